// The seam between the GPU backend and the device: the backend is compiled once against the
// real CUDA runtime and NCCL headers and linked either to libcudart + libnccl or to the
// emulation (emulation/nccl_cuda_emulation.cpp), which defines exactly these functions:
//
//   CUDA: cudaGetDeviceCount cudaSetDevice cudaGetDevice cudaDeviceGetPCIBusId
//         cudaGetErrorString cudaGetLastError cudaMalloc cudaFree cudaMallocHost cudaFreeHost
//         cudaMallocAsync cudaFreeAsync cudaPointerGetAttributes cudaStreamCreate
//         cudaStreamCreateWithFlags cudaStreamDestroy cudaStreamSynchronize cudaStreamQuery
//         cudaDeviceSynchronize cudaMemcpy cudaMemcpyAsync cudaMemsetAsync cudaLaunchHostFunc
//         cudaEventCreate cudaEventCreateWithFlags cudaEventDestroy cudaEventRecord
//         cudaEventQuery cudaEventSynchronize cudaEventElapsedTime cudaStreamWaitEvent
//   NCCL: ncclGetVersion ncclGetErrorString ncclGetLastError ncclGetUniqueId ncclCommInitRank
//         ncclCommSplit ncclCommDestroy ncclCommCount ncclCommUserRank ncclCommGetAsyncError
//         ncclGroupStart ncclGroupEnd ncclReduce ncclBroadcast
//
// Adding a call to the backend means adding it to the emulation (the emulated tests fail to
// link otherwise). Errors become flexplan::RuntimeError naming the call.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "runtime/datatype.hpp"
#include "runtime/errors.hpp"

namespace flexplan::gpu {

// Throws RuntimeError("<what>: <cuda error text>") unless the call succeeded.
void check_cuda(cudaError_t result, const char* what);
// Throws RuntimeError("<what>: <nccl error text>: <ncclGetLastError>") unless it succeeded.
void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm = nullptr);

ncclDataType_t nccl_type(DataType type);
ncclRedOp_t nccl_op(ReduceOp op);  // avg is a sum, divided afterwards
// "2.28.9" from 22809.
std::string nccl_version_text(int code);

}  // namespace flexplan::gpu
