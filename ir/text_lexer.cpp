#include "ir/text_lexer.hpp"

#include <fmt/format.h>

#include "ir/errors.hpp"
#include "ir/utf8.hpp"

namespace flexplan::ir::detail {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool is_plain(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > ' ' && u != 0x7f && c != '"' && c != '#' && c != '\\';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  std::vector<TokenLine> run() {
    std::vector<TokenLine> lines;
    TokenLine current{1, {}};
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        if (!current.tokens.empty()) lines.push_back(std::move(current));
        current = TokenLine{++line_, {}};
        line_start_ = ++pos_;
      } else if (is_blank(c)) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '"') {
        current.tokens.push_back(checked(quoted()));
      } else if (is_plain(c)) {
        Token token{"", false, line_, column()};
        while (pos_ < text_.size() && is_plain(text_[pos_])) token.text.push_back(text_[pos_++]);
        current.tokens.push_back(checked(std::move(token)));
      } else {
        fail(column(),
             fmt::format("unexpected character (byte {:#04x})", static_cast<unsigned char>(c)));
      }
    }
    if (!current.tokens.empty()) lines.push_back(std::move(current));
    return lines;
  }

 private:
  size_t column() const { return pos_ - line_start_ + 1; }

  [[noreturn]] void fail(size_t column, const std::string& what) const {
    throw PlanFormatError(fmt::format("{}:{}:{}: {}", source_, line_, column, what));
  }

  // Strings, and so names, are UTF-8 in every form of a plan.
  Token checked(Token token) const {
    if (const auto bad = invalid_utf8_at(token.text)) {
      fail(token.column, fmt::format("the {} is not valid UTF-8 (byte {:#04x} at offset {})",
                                     token.quoted ? "string" : "word",
                                     static_cast<unsigned char>(token.text[*bad]), *bad));
    }
    return token;
  }

  Token quoted() {
    Token token{"", true, line_, column()};
    ++pos_;  // opening quote
    for (;;) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail(token.column, "unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return token;
      if (c != '\\') {
        token.text.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) fail(column(), "unterminated string");
      const char escape = text_[pos_++];
      switch (escape) {
        case '"':
          token.text.push_back('"');
          break;
        case '\\':
          token.text.push_back('\\');
          break;
        case 'n':
          token.text.push_back('\n');
          break;
        case 't':
          token.text.push_back('\t');
          break;
        case 'r':
          token.text.push_back('\r');
          break;
        case 'x': {
          const int high = pos_ < text_.size() ? hex_digit(text_[pos_]) : -1;
          const int low = pos_ + 1 < text_.size() ? hex_digit(text_[pos_ + 1]) : -1;
          if (high < 0 || low < 0) fail(column() - 2, "\\x must be followed by two hex digits");
          token.text.push_back(static_cast<char>(high * 16 + low));
          pos_ += 2;
          break;
        }
        default:
          fail(column() - 2, fmt::format("unknown escape '\\{}'", escape));
      }
    }
  }

  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
  size_t line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

std::vector<TokenLine> tokenize_plan_text(std::string_view text, const std::string& source) {
  return Lexer(text, source).run();
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f)
          out += fmt::format("\\x{:02x}", u);
        else
          out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string quote_if_needed(std::string_view text) {
  if (text.empty()) return quote(text);
  for (char c : text) {
    if (!is_plain(c)) return quote(text);
  }
  return std::string(text);
}

}  // namespace flexplan::ir::detail
