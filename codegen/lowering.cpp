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
  const bool root_contributes = op.root_in_group();
  std::vector<Hop> hops;
  if (op.shape == ir::OpShape::Star) {
    hops.reserve(op.group.size());
    for (int32_t member : op.group) {
      if (member == op.root) continue;
      if (op.kind == ir::OpKind::Reduce)
        hops.push_back({member, op.root, root_contributes});
      else
        hops.push_back({op.root, member, false});
    }
    return hops;
  }
  const auto chain = chain_order(op);
  if (chain.size() < 2) return hops;
  hops.reserve(chain.size() - 1);
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    const int32_t dst = chain[i + 1];
    const bool contributes = op.kind == ir::OpKind::Reduce && (dst != op.root || root_contributes);
    hops.push_back({chain[i], dst, contributes});
  }
  return hops;
}

}  // namespace flexplan::codegen
