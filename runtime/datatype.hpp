// Element types and reduction operators of the all-reduce API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace flexplan {

enum class DataType : uint8_t { Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8 };

// Avg is a sum divided by the world size at the end; integer avg truncates toward zero.
enum class ReduceOp : uint8_t { Sum, Prod, Min, Max, Avg };

size_t size_of(DataType type);

// Names used by flexbench and error messages: "float32", "bfloat16", "uint8", "sum", "avg".
std::string_view to_string(DataType type);
std::string_view to_string(ReduceOp op);
std::optional<DataType> parse_data_type(std::string_view name);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

bool is_floating(DataType type);
// Unit roundoff of a floating type (2^-24 for float32), 0 for integers: the scale of the
// error bounds that tests and flexbench's check allow.
double unit_roundoff(DataType type);

// Element i of a buffer of `type`, widened to double; and the inverse, rounding floats to
// nearest and converting integers as C++ does (the value must be in range). For checks and
// benchmarks that fill and read buffers of any type, not for the reduction kernels.
double load_element(const void* buffer, size_t i, DataType type);
void store_element(void* buffer, size_t i, DataType type, double value);

inline constexpr DataType kAllDataTypes[] = {DataType::Float32, DataType::Float64,
                                             DataType::Float16, DataType::BFloat16,
                                             DataType::Int32,   DataType::Int64,
                                             DataType::UInt8};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min,
                                             ReduceOp::Max, ReduceOp::Avg};

}  // namespace flexplan
