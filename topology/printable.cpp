// Escaping input text for messages, and the code points names must not hold (printable.hpp).
// The topology library cannot use ir/utf8.hpp (ir sits above it), so it decodes UTF-8 here.
#include "topology/printable.hpp"

#include <fmt/core.h>

namespace flexplan::detail {
namespace {

// One code point of well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF), or `valid` false for a byte that does not start one.
struct Decoded {
  uint32_t code_point = 0;
  size_t length = 1;
  bool valid = false;
};

Decoded decode(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return {lead, 1, true};
  size_t length;
  uint8_t low = 0x80, high = 0xbf;  // the allowed range of the second byte
  uint32_t code_point;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, code_point = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, code_point = lead & 0x0f;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, code_point = lead & 0x07;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return {};
  }
  if (i + length > text.size() || byte(i + 1) < low || byte(i + 1) > high) return {};
  for (size_t k = 1; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return {};
    code_point = (code_point << 6) | (byte(i + k) & 0x3f);
  }
  return {code_point, length, true};
}

bool is_control(uint32_t c) { return c < 0x20 || (c >= 0x7f && c <= 0x9f); }

bool is_bidi_control(uint32_t c) {
  return c == 0x061c || c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069);
}

bool is_line_separator(uint32_t c) { return c == 0x2028 || c == 0x2029; }

bool unprintable(uint32_t c) { return is_control(c) || is_bidi_control(c) || is_line_separator(c); }

const char* bidi_name(uint32_t c) {
  switch (c) {
    case 0x061c: return "ARABIC LETTER MARK";
    case 0x200e: return "LEFT-TO-RIGHT MARK";
    case 0x200f: return "RIGHT-TO-LEFT MARK";
    case 0x202a: return "LEFT-TO-RIGHT EMBEDDING";
    case 0x202b: return "RIGHT-TO-LEFT EMBEDDING";
    case 0x202c: return "POP DIRECTIONAL FORMATTING";
    case 0x202d: return "LEFT-TO-RIGHT OVERRIDE";
    case 0x202e: return "RIGHT-TO-LEFT OVERRIDE";
    case 0x2066: return "LEFT-TO-RIGHT ISOLATE";
    case 0x2067: return "RIGHT-TO-LEFT ISOLATE";
    case 0x2068: return "FIRST STRONG ISOLATE";
    case 0x2069: return "POP DIRECTIONAL ISOLATE";
    default: return "";
  }
}

}  // namespace

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode(text, i);
    if (!d.valid) {
      out += fmt::format("\\x{:02X}", static_cast<uint8_t>(text[i]));
    } else if (!unprintable(d.code_point)) {
      out.append(text, i, d.length);
    } else if (d.code_point == '\n') {
      out += "\\n";
    } else if (d.code_point == '\r') {
      out += "\\r";
    } else if (d.code_point == '\t') {
      out += "\\t";
    } else if (d.code_point < 0x80) {
      out += fmt::format("\\x{:02X}", d.code_point);
    } else {
      out += fmt::format("\\u{:04X}", d.code_point);
    }
    i += d.length;
  }
  return out;
}

std::optional<uint32_t> unprintable_code_point(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const Decoded d = decode(text, i);
    if (!d.valid) return kNotUtf8;
    if (unprintable(d.code_point)) return d.code_point;
    i += d.length;
  }
  return std::nullopt;
}

std::string describe_unprintable(uint32_t code_point) {
  if (code_point == kNotUtf8) return "a byte that is not UTF-8";
  if (is_bidi_control(code_point))
    return fmt::format("the bidirectional control U+{:04X} ({})", code_point, bidi_name(code_point));
  if (is_line_separator(code_point))
    return fmt::format("the {} separator U+{:04X}", code_point == 0x2028 ? "line" : "paragraph",
                       code_point);
  return fmt::format("the control character U+{:04X}", code_point);
}

}  // namespace flexplan::detail
