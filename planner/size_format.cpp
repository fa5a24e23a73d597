#include "planner/size_format.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/core.h>

namespace flexplan {

uint64_t parse_size(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return std::invalid_argument(fmt::format("bad size '{}': {}", text, why));
  };
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) throw bad("expected a number such as 64K or 512M");
  std::string suffix(end, text.data() + text.size());
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() > 1 && (suffix.ends_with("IB") || suffix.ends_with("B")))
    suffix.resize(suffix.size() - (suffix.ends_with("IB") ? 2 : 1));
  if (suffix == "B") suffix.clear();
  int shift = 0;
  if (suffix == "K") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  else if (!suffix.empty()) throw bad("unknown suffix (use K, M, G or T)");
  if (shift > 0 && value > (~uint64_t{0} >> shift)) throw bad("too large");
  return value << shift;
}

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

size_t dtype_size(std::string_view dtype) {
  static constexpr std::array<std::pair<std::string_view, size_t>, 15> kTypes = {{
      {"int8", 1}, {"char", 1}, {"uint8", 1},
      {"half", 2}, {"float16", 2}, {"bfloat16", 2},
      {"int32", 4}, {"int", 4}, {"uint32", 4}, {"float", 4}, {"float32", 4},
      {"int64", 8}, {"uint64", 8}, {"double", 8}, {"float64", 8},
  }};
  for (const auto& [name, size] : kTypes)
    if (name == dtype) return size;
  throw std::invalid_argument(fmt::format(
      "unknown data type '{}' (known: int8, uint8, half, float16, bfloat16, int32, uint32, "
      "float, float32, int64, uint64, double, float64)",
      dtype));
}

}  // namespace flexplan
