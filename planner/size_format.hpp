// Sizes, times and element types as the command line reads and prints them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flexplan {

// "65536", "64K", "512M", "2G" (binary multiples, as nccl-tests), also "64KiB" and "64KB".
// Throws std::invalid_argument naming the text.
uint64_t parse_size(std::string_view text);

// "0 B", "512 B", "37 KiB", "1.5 MiB": at most three significant digits.
std::string format_bytes(double bytes);
// "850 ns", "12.3 us", "4.56 ms", "1.23 s".
std::string format_seconds(double seconds);
// "9.87 GB/s", "0.0781 GB/s", "1250 GB/s": decimal GB/s as nccl-tests prints them, three
// significant digits (whole numbers from 1000 GB/s up, so no exponent there).
std::string format_gbps(double bytes_per_second);

// Element size of a data type: float/float32, double/float64, half/float16, bfloat16,
// int8/char, uint8, int32/int, uint32, int64, uint64. Throws std::invalid_argument listing them.
size_t dtype_size(std::string_view dtype);

}  // namespace flexplan
