#include "ir/plan_load.hpp"

#include <string_view>

#include "ir/errors.hpp"
#include "ir/file_bytes.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_text.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {
namespace {

constexpr std::string_view kTextHeader = "flexplan-plan";

// Whether the first statement, after blank lines and '#' comments, is the text form's header.
// A file that opens with neither it nor the plan.bin magic is no plan at all, and saying so
// reads better than a syntax error about its first odd byte.
bool starts_with_text_header(std::string_view text) {
  for (;;) {
    const size_t start = text.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) return false;
    text.remove_prefix(start);
    if (text.front() != '#') return text.starts_with(kTextHeader);
    const size_t line_end = text.find('\n');
    if (line_end == std::string_view::npos) return false;
    text.remove_prefix(line_end + 1);
  }
}

}  // namespace

Plan load_plan_file(const std::string& path, LoadCheck check) {
  const std::vector<uint8_t> bytes = detail::read_file_bytes(path);
  if (bytes.empty()) throw PlanFormatError(path + ": the file is empty");
  Plan plan;
  if (has_plan_magic(bytes)) {
    plan = decode_plan_unverified(bytes, path);
  } else {
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (!starts_with_text_header(text))
      throw PlanFormatError(path +
                            ": not a flexplan plan: it starts with neither the plan.bin magic "
                            "\"FLXPLAN\" nor the text form's header 'flexplan-plan 1'");
    plan = parse_plan_text(text, path);
  }
  if (check == LoadCheck::Verify) verify_plan(plan);
  return plan;
}

}  // namespace flexplan::ir
