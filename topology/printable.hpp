// Making input text safe to print (internal to the topology library): escaping for error
// messages, and the code points a name must not hold because they change how output reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flexplan::detail {

// `text` as a message may quote it: bytes that are not well-formed UTF-8 become \xHH, control
// characters \n, \r, \t or \xHH (C0, DEL) and \uHHHH (C1), and bidirectional controls and line
// separators \uHHHH. Everything else, backslashes included, is kept as is. So a message never
// carries raw bytes that a terminal would act on or that would reorder the text around them.
std::string escaped(std::string_view text);

// The first code point of `text` that a name must not hold: a control character
// (U+0000-U+001F, U+007F-U+009F), a bidirectional control (U+061C, U+200E, U+200F,
// U+202A-U+202E, U+2066-U+2069) or a line or paragraph separator (U+2028, U+2029); kNotUtf8
// where the text stops being well-formed UTF-8 (the JSON parser refuses that before).
inline constexpr uint32_t kNotUtf8 = 0xfffd;
std::optional<uint32_t> unprintable_code_point(std::string_view text);

// What `code_point` (one that unprintable_code_point returns) is, for a message: "the control
// character U+001B", "the bidirectional control U+202E (RIGHT-TO-LEFT OVERRIDE)".
std::string describe_unprintable(uint32_t code_point);

}  // namespace flexplan::detail
