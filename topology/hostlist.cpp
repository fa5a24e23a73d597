// Slurm hostlist expressions (hostlist.hpp).
#include "topology/hostlist.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "topology/printable.hpp"

namespace flexplan {
namespace {

bool is_separator(char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The bounds of one range are at most this many digits: past that a range is a typo, not a
// cluster (and the numbers stay within 64 bits).
constexpr size_t kMaxDigits = 18;

// One bracketed list, "[0-5,12]" without its brackets, starting at `offset` in the expression:
// the values it stands for, formatted.
std::vector<std::string> bracket_values(std::string_view list, size_t offset, size_t max_names) {
  std::vector<std::string> values;
  if (list.empty()) throw HostlistError(offset, "empty brackets '[]': write a number or a range such as 1-4");
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, end - start);
    const size_t at = offset + start;
    if (item.empty()) throw HostlistError(at, "an empty entry in a bracketed list");
    const size_t x = item.find('x');
    if (x != std::string_view::npos) {
      // The 3-D prism: each digit position is a range of its own.
      const std::string_view low = item.substr(0, x), high = item.substr(x + 1);
      if (low.empty() || low.size() != high.size() || low.size() > kMaxDigits ||
          !std::all_of(low.begin(), low.end(), is_digit) || !std::all_of(high.begin(), high.end(), is_digit)) {
        throw HostlistError(at, fmt::format("'{}' is not a prism: write two digit strings of equal length "
                                            "joined by x, such as 000x333",
                                            detail::escaped(item)));
      }
      std::vector<std::string> prism{""};
      for (size_t d = 0; d < low.size(); ++d) {
        if (high[d] < low[d]) {
          throw HostlistError(at, fmt::format("in the prism '{}', digit {} runs down from {} to {}",
                                              detail::escaped(item), d + 1, low[d], high[d]));
        }
        std::vector<std::string> next;
        for (const auto& head : prism)
          for (char c = low[d]; c <= high[d]; ++c) next.push_back(head + c);
        prism = std::move(next);
        if (prism.size() + values.size() > max_names)
          throw HostlistError(at, fmt::format("the prism '{}' expands to more than {} names", detail::escaped(item), max_names));
      }
      values.insert(values.end(), prism.begin(), prism.end());
    } else {
      const size_t dash = item.find('-');
      const std::string_view low = item.substr(0, dash);
      const std::string_view high = dash == std::string_view::npos ? low : item.substr(dash + 1);
      for (const auto& bound : {low, high}) {
        if (bound.empty() || !std::all_of(bound.begin(), bound.end(), is_digit)) {
          throw HostlistError(at, fmt::format("'{}' is not a number or a range of numbers such as 1-4",
                                              detail::escaped(item)));
        }
        if (bound.size() > kMaxDigits)
          throw HostlistError(at, fmt::format("'{}' has more than {} digits", detail::escaped(bound), kMaxDigits));
      }
      const unsigned long long first = std::stoull(std::string(low)), last = std::stoull(std::string(high));
      if (last < first) {
        throw HostlistError(at, fmt::format("the range '{}' runs down: its end is below its start",
                                            detail::escaped(item)));
      }
      if (last - first >= max_names || values.size() + (last - first + 1) > max_names)
        throw HostlistError(at, fmt::format("the range '{}' expands to more than {} names", detail::escaped(item), max_names));
      // Zero padding comes from the lower bound, as Slurm reads "[01-16]".
      const size_t width = low.size();
      for (unsigned long long v = first; v <= last; ++v) values.push_back(fmt::format("{:0{}}", v, width));
    }
    start = end + 1;
  }
  return values;
}

// One name with brackets: every combination, the last bracket varying fastest.
void expand_entry(std::string_view expression, size_t begin, size_t end, size_t max_names,
                  std::vector<std::string>& out) {
  std::vector<std::string> names{""};
  size_t i = begin;
  while (i < end) {
    const char c = expression[i];
    if (c == ']') throw HostlistError(i, "a ']' without its '['");
    if (c != '[') {
      const size_t next = std::min(expression.find_first_of("[]", i), end);
      for (auto& name : names) name.append(expression.substr(i, next - i));
      i = next;
      continue;
    }
    const size_t close = expression.find(']', i + 1);
    if (close == std::string_view::npos || close >= end) throw HostlistError(i, "a '[' is never closed");
    const size_t nested = expression.find('[', i + 1);
    if (nested < close) throw HostlistError(nested, "brackets cannot nest");
    const auto values = bracket_values(expression.substr(i + 1, close - i - 1), i + 1, max_names);
    if (names.size() * values.size() + out.size() > max_names)
      throw HostlistError(i, fmt::format("the expression expands to more than {} names", max_names));
    std::vector<std::string> next;
    next.reserve(names.size() * values.size());
    for (const auto& head : names)
      for (const auto& value : values) next.push_back(head + value);
    names = std::move(next);
    i = close + 1;
  }
  out.insert(out.end(), names.begin(), names.end());
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression, size_t max_names) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < expression.size()) {
    if (is_separator(expression[i])) {
      ++i;
      continue;
    }
    // An entry runs to the next separator outside brackets.
    size_t end = i;
    int depth = 0;
    while (end < expression.size() && (depth > 0 || !is_separator(expression[end]))) {
      if (expression[end] == '[') ++depth;
      if (expression[end] == ']' && depth > 0) --depth;
      ++end;
    }
    expand_entry(expression, i, end, max_names, out);
    i = end;
  }
  return out;
}

bool hostlist_contains(std::string_view expression, std::string_view name) {
  const auto names = expand_hostlist(expression);
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace flexplan
