// The size rule of topology/sizes.hpp: exact integer arithmetic, so that "1.5M" is 1572864
// bytes and no spelling rounds.
#include "topology/sizes.hpp"

#include <cctype>
#include <stdexcept>

#include <fmt/core.h>

#include "topology/printable.hpp"

namespace flexplan {
namespace {

bool space(char c) { return c == ' ' || c == '\t'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

uint64_t parse_size(std::string_view text, std::string* warning) {
  if (warning) warning->clear();
  const auto bad = [&](std::string_view why) {
    return std::invalid_argument(fmt::format("bad size '{}': {}", detail::escaped(text), why));
  };
  std::string_view rest = text;
  while (!rest.empty() && space(rest.front())) rest.remove_prefix(1);
  while (!rest.empty() && space(rest.back())) rest.remove_suffix(1);
  // The number: digits, then an optional fraction. At most 26 digits in all, so that the
  // mantissa (below 2^87) still fits 128 bits when scaled by 2^40.
  unsigned __int128 mantissa = 0;
  int digits = 0, decimals = 0;
  size_t pos = 0;
  for (; pos < rest.size() && digit(rest[pos]); ++pos, ++digits)
    mantissa = mantissa * 10 + static_cast<unsigned>(rest[pos] - '0');
  if (pos < rest.size() && rest[pos] == '.') {
    for (++pos; pos < rest.size() && digit(rest[pos]); ++pos, ++digits, ++decimals)
      mantissa = mantissa * 10 + static_cast<unsigned>(rest[pos] - '0');
  }
  if (digits == 0) throw bad("expected a number such as 64K, 1.5M or 512M");
  if (digits > 26) throw bad("too large");
  std::string_view unit = rest.substr(pos);
  while (!unit.empty() && space(unit.front())) unit.remove_prefix(1);

  const std::string u = upper(unit);
  int shift = -1;
  bool decimal_looking = false;  // "MB": a binary multiple spelled like a decimal one
  const char* const prefixes = "KMGT";
  if (u.empty() || u == "B") shift = 0;
  for (int k = 0; k < 4 && shift < 0; ++k) {
    const std::string p(1, prefixes[k]);
    if (u == p || u == p + "I" || u == p + "IB") shift = 10 * (k + 1);
    else if (u == p + "B") shift = 10 * (k + 1), decimal_looking = true;
  }
  if (shift < 0)
    throw bad(fmt::format("unknown unit \"{}\" (sizes take K, M, G or T, binary as in nccl-tests, "
                          "or KiB, MiB, GiB, TiB)",
                          detail::escaped(unit)));
  unsigned __int128 scale = 1;
  for (int d = 0; d < decimals; ++d) scale *= 10;
  const unsigned __int128 scaled = mantissa << shift;
  if (scaled % scale != 0) throw bad("not a whole number of bytes");
  const unsigned __int128 bytes = scaled / scale;
  if (bytes > UINT64_MAX) throw bad("too large");
  if (decimal_looking && warning) {
    const std::string number(rest.substr(0, pos)), prefix(1, u[0]);
    *warning = fmt::format("\"{}\" is read as {} {}iB (sizes are binary, as nccl-tests reads "
                           "them; only rates such as MB/s are decimal): write {}{} or {}{}iB",
                           detail::escaped(text), number, prefix, number, prefix, number, prefix);
  }
  return static_cast<uint64_t>(bytes);
}

}  // namespace flexplan
