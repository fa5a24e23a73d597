// Loading a plan file in either form, from its first bytes: the plan.bin magic, or else the
// text form's header.
#include "ir/plan_load.hpp"

#include <optional>
#include <span>
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
// reads better than a syntax error about its first odd byte. `text` is the start of the file,
// all of it when `whole`; nullopt when that start cannot tell yet.
std::optional<bool> starts_with_text_header(std::string_view text, bool whole) {
  for (;;) {
    const size_t start = text.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) return whole ? std::optional(false) : std::nullopt;
    text.remove_prefix(start);
    if (text.front() != '#') {
      if (whole || text.size() >= kTextHeader.size()) return text.starts_with(kTextHeader);
      return kTextHeader.starts_with(text) ? std::nullopt : std::optional(false);
    }
    const size_t line_end = text.find('\n');
    if (line_end == std::string_view::npos) return whole ? std::optional(false) : std::nullopt;
    text.remove_prefix(line_end + 1);
  }
}

}  // namespace

Plan load_plan_file(const std::string& path, LoadCheck check) {
  // Read from the start only as far as each check needs, so that a large file that is no plan
  // (or a plan.bin whose header is wrong) is refused before its bulk is read.
  detail::FileReader file(path);
  const std::span<const uint8_t> magic = file.read_to(8);
  if (magic.empty()) throw PlanFormatError(path + ": the file is empty");
  Plan plan;
  if (has_plan_magic(magic)) {
    plan = decode_plan_unverified(read_plan_bytes(file), path);
  } else {
    // Twice as much each time: linear in what the decision needs, which is little unless the
    // file opens with long comments.
    for (uint64_t wanted = 4096;; wanted *= 2) {
      const std::span<const uint8_t> head = file.read_to(wanted);
      const bool whole = head.size() < wanted;
      const auto is_text = starts_with_text_header(
          std::string_view(reinterpret_cast<const char*>(head.data()), head.size()), whole);
      if (!is_text) continue;
      if (*is_text) break;
      throw PlanFormatError(path +
                            ": not a flexplan plan: it starts with neither the plan.bin magic "
                            "\"FLXPLAN\" nor the text form's header 'flexplan-plan 1'");
    }
    const std::span<const uint8_t> bytes = file.read_all();
    plan = parse_plan_text(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                           path);
  }
  if (check == LoadCheck::Verify) verify_plan(plan);
  return plan;
}

}  // namespace flexplan::ir
