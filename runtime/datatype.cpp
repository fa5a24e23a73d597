#include "runtime/datatype.hpp"

#include "runtime/half.hpp"

namespace flexplan {

size_t size_of(DataType type) {
  switch (type) {
    case DataType::Float32: return 4;
    case DataType::Float64: return 8;
    case DataType::Float16: return 2;
    case DataType::BFloat16: return 2;
    case DataType::Int32: return 4;
    case DataType::Int64: return 8;
    case DataType::UInt8: return 1;
  }
  return 0;
}

std::string_view to_string(DataType type) {
  switch (type) {
    case DataType::Float32: return "float32";
    case DataType::Float64: return "float64";
    case DataType::Float16: return "float16";
    case DataType::BFloat16: return "bfloat16";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
    case DataType::UInt8: return "uint8";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

std::optional<DataType> parse_data_type(std::string_view name) {
  for (DataType type : kAllDataTypes) {
    if (to_string(type) == name) return type;
  }
  // The short spellings of the nccl-tests tools.
  if (name == "float" || name == "f32") return DataType::Float32;
  if (name == "double" || name == "f64") return DataType::Float64;
  if (name == "half" || name == "f16") return DataType::Float16;
  if (name == "bf16") return DataType::BFloat16;
  if (name == "int" || name == "i32") return DataType::Int32;
  if (name == "i64") return DataType::Int64;
  if (name == "u8") return DataType::UInt8;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (ReduceOp op : kAllReduceOps) {
    if (to_string(op) == name) return op;
  }
  return std::nullopt;
}

bool is_floating(DataType type) {
  return type == DataType::Float32 || type == DataType::Float64 || type == DataType::Float16 ||
         type == DataType::BFloat16;
}

double unit_roundoff(DataType type) {
  switch (type) {
    case DataType::Float64: return 0x1p-53;
    case DataType::Float32: return 0x1p-24;
    case DataType::Float16: return 0x1p-11;
    case DataType::BFloat16: return 0x1p-8;
    default: return 0;
  }
}

double load_element(const void* buffer, size_t i, DataType type) {
  switch (type) {
    case DataType::Float32: return static_cast<const float*>(buffer)[i];
    case DataType::Float64: return static_cast<const double*>(buffer)[i];
    case DataType::Float16: return half::f16_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case DataType::BFloat16: return half::bf16_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case DataType::Int32: return static_cast<const int32_t*>(buffer)[i];
    case DataType::Int64: return static_cast<double>(static_cast<const int64_t*>(buffer)[i]);
    case DataType::UInt8: return static_cast<const uint8_t*>(buffer)[i];
  }
  return 0;
}

void store_element(void* buffer, size_t i, DataType type, double value) {
  switch (type) {
    case DataType::Float32: static_cast<float*>(buffer)[i] = static_cast<float>(value); break;
    case DataType::Float64: static_cast<double*>(buffer)[i] = value; break;
    case DataType::Float16: static_cast<uint16_t*>(buffer)[i] = half::float_to_f16(static_cast<float>(value)); break;
    case DataType::BFloat16: static_cast<uint16_t*>(buffer)[i] = half::float_to_bf16(static_cast<float>(value)); break;
    case DataType::Int32: static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(value); break;
    case DataType::Int64: static_cast<int64_t*>(buffer)[i] = static_cast<int64_t>(value); break;
    case DataType::UInt8: static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(value); break;
  }
}

}  // namespace flexplan
