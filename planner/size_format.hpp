// Sizes, times and element types as the command line reads and prints them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "topology/sizes.hpp"  // parse_size: the one rule for sizes

namespace flexplan {

// "0 B", "512 B", "37 KiB", "1.5 MiB": at most three significant digits.
std::string format_bytes(double bytes);
// "850 ns", "12.3 us", "4.56 ms", "1.23 s".
std::string format_seconds(double seconds);
// "9.87 GB/s", "0.0781 GB/s", "1250 GB/s": decimal GB/s as nccl-tests prints them, three
// significant digits (whole numbers from 1000 GB/s up, so no exponent there).
std::string format_gbps(double bytes_per_second);

// Element size of a data type named as flexbench and the runtime name them: float32, float64,
// float16, bfloat16, int8, uint8, int32, uint32, int64, uint64. The older spellings float,
// double, half, int and char are still read, and `warning` (when given) names the new one.
// Throws std::invalid_argument listing the names.
size_t dtype_size(std::string_view dtype, std::string* warning = nullptr);

// The names dtype_size reads without a warning, comma-separated, for help texts.
std::string_view dtype_names();

}  // namespace flexplan
