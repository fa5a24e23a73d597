// Lowering of IR ops to point-to-point hops (lowering.hpp).
#include "codegen/lowering.hpp"

#include <algorithm>

namespace flexplan::codegen {

std::vector<int32_t> chain_order(const ir::Op& op) {
  const auto& group = op.group;
  const auto at = std::find(group.begin(), group.end(), op.root);
  std::vector<int32_t> chain;
  chain.reserve(group.size() + 1);
  if (at == group.end()) {
    // Root outside the group: the group in its own order, then the root.
    if (op.kind == ir::OpKind::Broadcast) chain.push_back(op.root);
    chain.insert(chain.end(), group.begin(), group.end());
    if (op.kind == ir::OpKind::Reduce) chain.push_back(op.root);
    return chain;
  }
  // Cyclic order starting right after the root.
  const size_t n = group.size();
  const size_t r = static_cast<size_t>(at - group.begin());
  if (op.kind == ir::OpKind::Broadcast) chain.push_back(op.root);
  for (size_t i = 1; i < n; ++i) chain.push_back(group[(r + i) % n]);
  if (op.kind == ir::OpKind::Reduce) chain.push_back(op.root);
  return chain;
}

std::vector<Hop> lower_op(const ir::Op& op) {
  std::vector<Hop> hops;
  append_hops(op, hops);
  return hops;
}

void append_hops(const ir::Op& op, std::vector<Hop>& out) {
  const bool root_contributes = op.root_in_group();
  const bool reduce = op.kind == ir::OpKind::Reduce;
  if (op.shape == ir::OpShape::Star) {
    out.reserve(out.size() + op.group.size());
    for (int32_t member : op.group) {
      if (member == op.root) continue;
      if (reduce)
        out.push_back({member, op.root, root_contributes});
      else
        out.push_back({op.root, member, false});
    }
    return;
  }
  // The chain in chain_order's order, walked without building it: `previous` is the rank the
  // next hop leaves from, once `started`.
  int32_t previous = 0;
  bool started = false;
  const auto visit = [&](int32_t rank) {
    if (started) out.push_back({previous, rank, reduce && (rank != op.root || root_contributes)});
    previous = rank;
    started = true;
  };
  const auto& group = op.group;
  const auto at = std::find(group.begin(), group.end(), op.root);
  if (!reduce) visit(op.root);
  if (at == group.end()) {
    for (int32_t member : group) visit(member);
  } else {
    const size_t n = group.size();
    const size_t r = static_cast<size_t>(at - group.begin());
    for (size_t i = 1; i < n; ++i) visit(group[(r + i) % n]);
  }
  if (reduce) visit(op.root);
}

}  // namespace flexplan::codegen
