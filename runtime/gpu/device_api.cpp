// Error checks and type mappings of the device seam (device_api.hpp).
#include "runtime/gpu/device_api.hpp"

#include <fmt/format.h>

namespace flexplan::gpu {

void check_cuda(cudaError_t result, const char* what) {
  if (result != cudaSuccess) throw RuntimeError(fmt::format("{}: {}", what, cudaGetErrorString(result)));
}

void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm) {
  if (result == ncclSuccess) return;
  const char* detail = ncclGetLastError(comm);
  throw RuntimeError(fmt::format("{}: {}{}{}", what, ncclGetErrorString(result),
                                 detail && *detail ? ": " : "", detail ? detail : ""));
}

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::Float32: return ncclFloat32;
    case DataType::Float64: return ncclFloat64;
    case DataType::Float16: return ncclFloat16;
    case DataType::BFloat16: return ncclBfloat16;
    case DataType::Int32: return ncclInt32;
    case DataType::Int64: return ncclInt64;
    case DataType::UInt8: return ncclUint8;
  }
  throw RuntimeError("unknown data type");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Avg: return ncclSum;
    case ReduceOp::Prod: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
  }
  throw RuntimeError("unknown reduction");
}

std::string nccl_version_text(int code) {
  // Since 2.9 the code is major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

}  // namespace flexplan::gpu
