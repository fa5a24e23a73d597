#include "planner/size_format.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/core.h>

namespace flexplan {

namespace {

// Three significant digits, without trailing zeros.
std::string three_digits(double value) {
  const int decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  std::string text = fmt::format("{:.{}f}", value, decimals);
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

}  // namespace

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < kUnits.size()) {
    bytes /= 1024;
    ++unit;
  }
  return three_digits(bytes) + " " + kUnits[unit];
}

std::string format_seconds(double seconds) {
  if (seconds == 0) return "0 s";
  if (seconds < 1e-6) return three_digits(seconds * 1e9) + " ns";
  if (seconds < 1e-3) return three_digits(seconds * 1e6) + " us";
  if (seconds < 1) return three_digits(seconds * 1e3) + " ms";
  return three_digits(seconds) + " s";
}

std::string format_gbps(double bytes_per_second) {
  // Three significant digits keep slow links readable ("0.0781 GB/s"); from 1000 GB/s up,
  // whole numbers instead of {:.3g}'s exponent.
  const double gbps = bytes_per_second / 1e9;
  return gbps >= 999.5 ? fmt::format("{:.0f} GB/s", gbps) : fmt::format("{:.3g} GB/s", gbps);
}

std::string_view dtype_names() {
  return "float32, float64, float16, bfloat16, int8, uint8, int32, uint32, int64, uint64";
}

size_t dtype_size(std::string_view dtype, std::string* warning) {
  if (warning) warning->clear();
  static constexpr std::array<std::pair<std::string_view, size_t>, 10> kTypes = {{
      {"int8", 1}, {"uint8", 1}, {"float16", 2}, {"bfloat16", 2}, {"int32", 4},
      {"uint32", 4}, {"float32", 4}, {"int64", 8}, {"uint64", 8}, {"float64", 8},
  }};
  // The older names, kept working (docs/planner.md, "predict").
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kOld = {{
      {"float", "float32"}, {"double", "float64"}, {"half", "float16"}, {"int", "int32"},
      {"char", "int8"},
  }};
  for (const auto& [name, size] : kTypes)
    if (name == dtype) return size;
  for (const auto& [old, name] : kOld) {
    if (old != dtype) continue;
    if (warning) *warning = fmt::format("data type '{}' is now spelled '{}'", old, name);
    return dtype_size(name);
  }
  throw std::invalid_argument(fmt::format("unknown data type '{}' (known: {})", dtype, dtype_names()));
}

}  // namespace flexplan
