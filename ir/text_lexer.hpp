// Splits the text form of a plan into lines of tokens (internal to the IR library). A token is
// a run of non-blank characters or a double-quoted string with C-like escapes; `#` starts a
// comment outside quotes. Every token knows its line and column for error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flexplan::ir::detail {

struct Token {
  std::string text;  // the unquoted, unescaped text for a quoted string
  bool quoted = false;
  size_t line = 0;    // 1-based
  size_t column = 0;  // 1-based
};

struct TokenLine {
  size_t line = 0;
  std::vector<Token> tokens;  // never empty
};

// Throws PlanFormatError "source:line:column: what" on a broken quoted string.
std::vector<TokenLine> tokenize_plan_text(std::string_view text, const std::string& source);

// `text` as a token: as it is when it is a non-empty run of plain characters, else quoted.
std::string quote_if_needed(std::string_view text);
std::string quote(std::string_view text);

}  // namespace flexplan::ir::detail
