// Bandwidth and latency figures: "10 GB/s", "25 Gbit/s", "50 us".
//
// A figure is converted to its canonical unit (bytes/s, seconds) by rounding the exact decimal
// quantity once: the unit's decimal prefix is folded into the number's exponent before the
// text is converted, and bit/binary scaling is by powers of two (exact). So "1.1 GB/s" and
// "1100 MB/s", or "1 Gbit/s" and "125 MB/s", give bit-identical doubles, which keeps the
// topology hash independent of how a figure is spelled.
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "topology/printable.hpp"
#include "topology/topology.hpp"

namespace flexplan {
namespace {

// The figures any link has, with room to spare; outside them a figure is a typo or an attack,
// and predictions would stop being finite, readable numbers (docs/topology.md, "Units").
constexpr double kMinBandwidth = 125;     // bytes/s: 1 kbit/s
constexpr double kMaxBandwidth = 1.25e14;  // bytes/s: 1000 Tbit/s
constexpr double kMinLatency = 1e-9;       // seconds, when not 0
constexpr double kMaxLatency = 100;        // seconds

// value = number * 10^decimal_exponent * 2^binary_exponent
struct UnitScale {
  int decimal_exponent;
  int binary_exponent;
};

const std::map<std::string, UnitScale, std::less<>>& bandwidth_units() {
  static const auto units = [] {
    std::map<std::string, UnitScale, std::less<>> table;
    struct Prefix {
      const char* text;
      int decimal_exponent;
      int binary_exponent;
    };
    // Both k and K mean 1000: KB/s and Kbit/s are common spellings of kB/s and kbit/s.
    const Prefix prefixes[] = {{"", 0, 0},   {"k", 3, 0},   {"K", 3, 0},   {"M", 6, 0},
                               {"G", 9, 0},  {"T", 12, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
                               {"Gi", 0, 30}, {"Ti", 0, 40}};
    const char* bit_bases[] = {"bit/s", "bits/s", "b/s", "bps"};
    const char* byte_bases[] = {"B/s", "Bps"};
    for (const Prefix& p : prefixes) {
      for (const char* base : bit_bases)  // 8 bits to the byte
        table[std::string(p.text) + base] = {p.decimal_exponent, p.binary_exponent - 3};
      for (const char* base : byte_bases)
        table[std::string(p.text) + base] = {p.decimal_exponent, p.binary_exponent};
    }
    return table;
  }();
  return units;
}

const std::map<std::string, UnitScale, std::less<>>& latency_units() {
  static const std::map<std::string, UnitScale, std::less<>> units = {
      {"ns", {-9, 0}}, {"us", {-6, 0}}, {"\u00b5s", {-6, 0}}, {"\u03bcs", {-6, 0}},
      {"ms", {-3, 0}}, {"s", {0, 0}}};
  return units;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Figures come from files and command lines: quoted escaped, so that no raw bytes reach a message.
std::string quoted(std::string_view text) { return fmt::format("\"{}\"", detail::escaped(text)); }

// The number at the front of `text`, split into its mantissa ("-1.5") and exponent (from an
// "e" suffix), and the unit after it.
struct SplitFigure {
  std::string_view mantissa;
  long exponent = 0;
  std::string_view unit;
};

SplitFigure split_figure(std::string_view text, const char* what) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.empty()) throw std::invalid_argument(fmt::format("empty {}", what));

  size_t pos = 0;
  if (text[pos] == '+' || text[pos] == '-') ++pos;
  size_t digits = 0;
  while (pos < text.size() && is_digit(text[pos])) ++pos, ++digits;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos, ++digits;
  }
  if (digits == 0) {
    std::string_view word = text.substr(text[0] == '+' || text[0] == '-' ? 1 : 0);
    if (word.starts_with("inf") || word.starts_with("Inf") || word.starts_with("nan") ||
        word.starts_with("NaN"))
      throw std::invalid_argument(fmt::format("{} is not finite", quoted(text)));
    throw std::invalid_argument(
        fmt::format("{} does not start with a number", quoted(text)));
  }
  SplitFigure split;
  split.mantissa = text.substr(0, pos);
  // An exponent: e or E, then an optional sign and digits. "5 e" is not one ("e" is no unit
  // either, so that still fails below).
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    size_t p = pos + 1;
    if (p < text.size() && (text[p] == '+' || text[p] == '-')) ++p;
    const size_t exp_digits_begin = p;
    while (p < text.size() && is_digit(text[p])) ++p;
    if (p > exp_digits_begin) {
      std::string_view exp_text = text.substr(pos + 1, p - pos - 1);
      if (exp_text.front() == '+') exp_text.remove_prefix(1);
      auto [end, ec] = std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(),
                                       split.exponent);
      if (ec != std::errc() || end != exp_text.data() + exp_text.size() ||
          std::labs(split.exponent) > 100000)
        throw std::invalid_argument(fmt::format("{} is out of range", quoted(text)));
      pos = p;
    }
  }
  std::string_view rest = text.substr(pos);
  while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
  split.unit = rest;
  return split;
}

// Roughly log10 of a decimal mantissa: 2 for "123.4", 0 for "1", -3 for "0.0012".
long decimal_magnitude(std::string_view mantissa) {
  const size_t point = std::min(mantissa.find('.'), mantissa.size());
  const size_t first = mantissa.find_first_of("123456789");
  if (first == std::string_view::npos) return 0;
  return first < point ? static_cast<long>(point - first) - 1
                       : -static_cast<long>(first - point);
}

// Converts mantissa * 10^exponent with a single rounding. Too large for a double gives an
// infinity of the number's sign: the figure is finite as written, and the caller's range check
// reports it against the limit ("1e308 GB/s" is 1e317 B/s, above the largest bandwidth).
double decimal_value(const SplitFigure& split, int extra_decimal_exponent,
                     std::string_view text) {
  std::string composed(split.mantissa);
  if (composed.front() == '+') composed.erase(0, 1);
  composed += fmt::format("e{}", split.exponent + extra_decimal_exponent);
  double value = 0;
  auto [end, ec] = std::from_chars(composed.data(), composed.data() + composed.size(), value);
  if (ec == std::errc::result_out_of_range) {
    // Too small rounds to zero (reported by the caller as zero).
    const bool tiny = decimal_magnitude(split.mantissa) + split.exponent + extra_decimal_exponent < 0;
    if (!tiny) return composed.front() == '-' ? -HUGE_VAL : HUGE_VAL;
    return 0;
  }
  if (ec != std::errc() || end != composed.data() + composed.size())
    throw std::invalid_argument(fmt::format("{} is not a number", quoted(text)));
  return value == 0 ? 0.0 : value;  // -0 becomes +0: the hash sees one zero
}

std::string unit_list(const std::map<std::string, UnitScale, std::less<>>& units,
                      const std::vector<std::string>& shown) {
  std::string list;
  for (const std::string& u : shown) {
    if (!units.contains(u)) continue;
    if (!list.empty()) list += ", ";
    list += u;
  }
  return list;
}

// Known units equal to `unit` ignoring case ("gb/s" -> Gb/s, GB/s).
std::string case_suggestions(const std::map<std::string, UnitScale, std::less<>>& units,
                             std::string_view unit) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string wanted = lower(unit);
  std::string found;
  for (const auto& [name, scale] : units) {
    if (lower(name) != wanted) continue;
    if (!found.empty()) found += " or ";
    found += name;
  }
  return found;
}

// The figure in its canonical unit; an infinity when it is too large for a double (the figure
// itself is finite: "inf" and "nan" were refused by split_figure).
double scaled(const SplitFigure& split, const UnitScale& scale, std::string_view text) {
  const double value = decimal_value(split, scale.decimal_exponent, text);
  return std::ldexp(value, scale.binary_exponent);
}

// Shortest text for `value` with at most 6 significant digits ("12.5", "3.125", "100").
std::string short_number(double value) { return fmt::format("{:.6g}", value); }

size_t significant_digits(const std::string& number) {
  size_t first = number.find_first_of("123456789");
  if (first == std::string::npos) return 1;
  size_t count = 0;
  size_t trailing_zeros = 0;
  for (size_t i = first; i < number.size() && (is_digit(number[i]) || number[i] == '.'); ++i) {
    if (number[i] == '.') continue;
    ++count;
    trailing_zeros = number[i] == '0' ? trailing_zeros + 1 : 0;
  }
  // "100" has one significant digit, "12.5" three.
  return number.find('.') == std::string::npos ? count - trailing_zeros : count;
}

// Zeros ending a whole number: 2 for "400", 0 for "12" and "1.5".
size_t trailing_zeros(const std::string& number) {
  if (number.find_first_of(".e") != std::string::npos) return 0;
  size_t zeros = 0;
  for (auto c = number.rbegin(); c != number.rend() && *c == '0'; ++c) ++zeros;
  return zeros == number.size() ? 0 : zeros;
}

// value with the largest SI prefix that keeps the number at least 1.
std::string with_si_prefix(double value, const char* base) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (p < 4 && std::fabs(value) >= 1000) value /= 1000, ++p;
  return fmt::format("{} {}{}", short_number(value), prefixes[p], base);
}

}  // namespace

double parse_bandwidth(const std::string& text) {
  const SplitFigure split = split_figure(text, "bandwidth");
  if (split.unit.empty())
    throw std::invalid_argument(fmt::format(
        "{} has no unit (write it like \"10 Gbit/s\" or \"12 GB/s\")", quoted(text)));
  const auto& units = bandwidth_units();
  auto unit = units.find(split.unit);
  if (unit == units.end()) {
    const std::string same_letters = case_suggestions(units, split.unit);
    const std::string hint =
        same_letters.empty()
            ? "units are " + unit_list(units, {"bit/s", "Kbit/s", "Mbit/s", "Gbit/s", "Tbit/s",
                                               "Gbps", "Gb/s", "B/s", "kB/s", "KB/s", "MB/s",
                                               "GB/s", "TB/s", "KiB/s", "MiB/s", "GiB/s"})
            : "did you mean " + same_letters + "? (b is bits, B is bytes)";
    throw std::invalid_argument(
        fmt::format("{}: unknown bandwidth unit {}; {}", quoted(text), quoted(split.unit), hint));
  }
  const double value = scaled(split, unit->second, text);
  if (value < 0) throw std::invalid_argument(fmt::format("{} is negative", quoted(text)));
  if (value == 0)
    throw std::invalid_argument(fmt::format("{} is zero: a link must carry data", quoted(text)));
  if (value < kMinBandwidth)
    throw std::invalid_argument(fmt::format(
        "{} is below 1 kbit/s, the smallest bandwidth flexplan accepts", quoted(text)));
  if (value > kMaxBandwidth)
    throw std::invalid_argument(fmt::format(
        "{} is above 1000 Tbit/s, the largest bandwidth flexplan accepts", quoted(text)));
  return value;
}

double parse_latency(const std::string& text) {
  const SplitFigure split = split_figure(text, "latency");
  if (split.unit.empty())
    throw std::invalid_argument(
        fmt::format("{} has no unit (write it like \"5 us\"; units are ns, us, ms, s)",
                    quoted(text)));
  const auto& units = latency_units();
  auto unit = units.find(split.unit);
  if (unit == units.end())
    throw std::invalid_argument(fmt::format(
        "{}: unknown latency unit {}; units are ns, us, ms, s", quoted(text), quoted(split.unit)));
  const double value = scaled(split, unit->second, text);
  if (value < 0) throw std::invalid_argument(fmt::format("{} is negative", quoted(text)));
  if (value > kMaxLatency)
    throw std::invalid_argument(
        fmt::format("{} is above 100 s, the largest latency flexplan accepts", quoted(text)));
  if (value > 0 && value < kMinLatency)
    throw std::invalid_argument(fmt::format(
        "{} is below 1 ns, the smallest nonzero latency flexplan accepts (write 0 for none)",
        quoted(text)));
  return value;
}

std::string format_bandwidth(double bytes_per_second) {
  if (!std::isfinite(bytes_per_second)) return fmt::format("{} B/s", bytes_per_second);
  // Networks are quoted in bits and buses in bytes: show whichever reads as the rounder
  // number (fewer significant digits, then more trailing zeros), bytes on a tie:
  // 10 Gbit/s not 1.25 GB/s, 400 Gbit/s not 50 GB/s, 12 GB/s not 96 Gbit/s.
  const std::string as_bytes = with_si_prefix(bytes_per_second, "B/s");
  const std::string as_bits = with_si_prefix(bytes_per_second * 8, "bit/s");
  auto number = [](const std::string& figure) { return figure.substr(0, figure.find(' ')); };
  const auto roundness = [&](const std::string& figure) {
    return std::pair(-static_cast<long>(significant_digits(number(figure))),
                     trailing_zeros(number(figure)));
  };
  return roundness(as_bits) > roundness(as_bytes) ? as_bits : as_bytes;
}

std::string format_latency(double seconds) {
  if (seconds == 0) return "0 s";
  if (!std::isfinite(seconds)) return fmt::format("{} s", seconds);
  const double magnitude = std::fabs(seconds);
  if (magnitude < 1e-6) return short_number(seconds * 1e9) + " ns";
  if (magnitude < 1e-3) return short_number(seconds * 1e6) + " us";
  if (magnitude < 1) return short_number(seconds * 1e3) + " ms";
  return short_number(seconds) + " s";
}

}  // namespace flexplan
