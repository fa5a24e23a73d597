#include "ir/op_text.hpp"

#include <fmt/format.h>

namespace flexplan::ir {

std::string format_op(const Op& op, size_t member_limit) {
  std::string text =
      fmt::format("{} [{},{}) root {} {}", to_string(op.kind), op.begin, op.end, op.root,
                  op.shape == OpShape::Star ? "star" : "group");
  const size_t shown = std::min(member_limit, op.group.size());
  for (size_t i = 0; i < shown; ++i) fmt::format_to(std::back_inserter(text), " {}", op.group[i]);
  if (shown < op.group.size())
    fmt::format_to(std::back_inserter(text), " ... ({} members)", op.group.size());
  return text;
}

std::string format_ranks(std::span<const int32_t> ranks) {
  constexpr size_t kShown = 8;
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  std::string text = "ranks {";
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    fmt::format_to(std::back_inserter(text), "{}{}", i ? ", " : "", ranks[i]);
  }
  if (ranks.size() > kShown)
    fmt::format_to(std::back_inserter(text), ", ...}} ({} in all)", ranks.size());
  else
    text += "}";
  return text;
}

}  // namespace flexplan::ir
