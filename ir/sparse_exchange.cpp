// The sparse all-reduce's transfer schedule, built from its layout's machines and names.
#include "ir/sparse_exchange.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string_view>

namespace flexplan::ir {
namespace {

// The machines' names as a tree: node 0 is above every machine; a machine is a leaf of the
// node its full name reaches (a node can be a machine and have nodes below it).
struct NameTree {
  struct Node {
    std::map<std::string, int, std::less<>> below;
    int machine = -1;
    int first_machine = -1;  // the lowest machine index in the subtree
    int height = 0;          // branching nodes on the longest way down, this one included
    // What combines at this node, by first machine: child nodes (node >= 0) or this node's own
    // machine (node == -1).
    struct Entry {
      int node, first_machine;
    };
    std::vector<Entry> entries;
  };
  std::vector<Node> nodes;
};

NameTree name_tree(const SparseLayout& layout) {
  NameTree tree;
  tree.nodes.emplace_back();
  for (size_t m = 0; m < layout.machine_names.size(); ++m) {
    int at = 0;
    std::string_view rest = layout.machine_names[m];
    while (true) {
      const size_t slash = rest.find('/');
      const std::string_view part = rest.substr(0, slash);
      auto it = tree.nodes[static_cast<size_t>(at)].below.find(part);
      if (it == tree.nodes[static_cast<size_t>(at)].below.end()) {
        const int id = static_cast<int>(tree.nodes.size());
        tree.nodes[static_cast<size_t>(at)].below.emplace(std::string(part), id);
        tree.nodes.emplace_back();
        at = id;
      } else {
        at = it->second;
      }
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
    tree.nodes[static_cast<size_t>(at)].machine = static_cast<int>(m);
  }
  // Children are created after their parents, so reverse creation order visits children first.
  for (size_t i = tree.nodes.size(); i-- > 0;) {
    auto& node = tree.nodes[i];
    if (node.machine >= 0) node.entries.push_back({-1, node.machine});
    int height = 0;
    for (const auto& [name, child] : node.below) {
      const auto& c = tree.nodes[static_cast<size_t>(child)];
      node.entries.push_back({child, c.first_machine});
      height = std::max(height, c.height);
    }
    std::sort(node.entries.begin(), node.entries.end(),
              [](const auto& a, const auto& b) { return a.first_machine < b.first_machine; });
    node.first_machine = node.entries.front().first_machine;
    node.height = height + (node.entries.size() >= 2 ? 1 : 0);
  }
  return tree;
}

bool less(const SparseExchange::Fraction& a, const SparseExchange::Fraction& b) {
  return static_cast<unsigned __int128>(a.num) * b.den < static_cast<unsigned __int128>(b.num) * a.den;
}

}  // namespace

SparseExchange sparse_exchange(const SparseLayout& layout) {
  if (layout.machines.empty()) throw std::invalid_argument("sparse exchange: no learners");
  SparseExchange out;
  // Every machine's slice boundaries j/n, reduced, once each.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> index_of;
  for (const auto& machine : layout.machines) {
    const uint64_t n = machine.size();
    for (uint64_t j = 0; j <= n; ++j) {
      const uint64_t g = std::gcd(j, n);
      index_of.emplace(std::pair{j / g, n / g}, 0);
    }
  }
  for (const auto& [fraction, index] : index_of) out.bounds.push_back({fraction.first, fraction.second});
  std::sort(out.bounds.begin(), out.bounds.end(), less);
  for (size_t u = 0; u < out.bounds.size(); ++u) index_of[{out.bounds[u].num, out.bounds[u].den}] = u;
  const uint64_t units = out.bounds.size() - 1;

  auto unit_of = [&](uint64_t j, uint64_t n) {
    const uint64_t g = std::gcd(j, n);
    return index_of.at({j / g, n / g});
  };
  // Machine m's learner that owns unit u.
  auto owner = [&](size_t m, uint64_t u) {
    const auto& machine = layout.machines[m];
    const auto& f = out.bounds[u];
    const auto j = static_cast<size_t>(static_cast<unsigned __int128>(f.num) * machine.size() / f.den);
    return machine[j];
  };

  Schedule& schedule = out.schedule;
  schedule.algorithm = "sparse-exchange";
  schedule.units = units;
  auto within_machines = [&](Phase phase, OpKind kind) {
    Step step{phase, 0, {}};
    for (const auto& machine : layout.machines) {
      const uint64_t n = machine.size();
      if (n < 2) continue;
      for (uint64_t j = 0; j < n; ++j) {
        step.ops.push_back({kind, unit_of(j, n), unit_of(j + 1, n), machine[j], RankList(machine), OpShape::Star});
      }
    }
    if (!step.ops.empty()) schedule.steps.push_back(std::move(step));
  };

  within_machines(Phase::ReduceScatter, OpKind::Reduce);
  out.first_sparse = schedule.steps.size();

  const NameTree tree = name_tree(layout);
  int top = 0;
  for (const auto& node : tree.nodes) top = std::max(top, node.height);
  // At a branching node, the owners of unit u on each entry's first machine combine for the
  // node: at the top node all of them get the sum; below it only the first, which later hands
  // the whole sum down to the others (a sum the others got on the way up would be overwritten).
  auto for_each_run = [&](const NameTree::Node& node, auto&& emit) {
    RankList run_reps;
    uint64_t run_begin = 0;
    for (uint64_t u = 0; u < units; ++u) {
      RankList reps;
      for (const auto& entry : node.entries) reps.push_back(owner(static_cast<size_t>(entry.first_machine), u));
      if (u > 0 && reps != run_reps) {
        emit(run_begin, u, run_reps);
        run_begin = u;
      }
      run_reps = std::move(reps);
    }
    emit(run_begin, units, run_reps);
  };
  auto level_step = [&](int height, Phase phase) {
    Step step{phase, height, {}};
    for (const auto& node : tree.nodes) {
      if (node.entries.size() < 2 || node.height != height) continue;
      for_each_run(node, [&](uint64_t begin, uint64_t end, const RankList& reps) {
        if (phase == Phase::Reduce && height == top) {
          for (int32_t root : reps) step.ops.push_back({OpKind::Reduce, begin, end, root, reps, OpShape::Star});
        } else if (phase == Phase::Reduce) {
          step.ops.push_back({OpKind::Reduce, begin, end, reps[0], reps, OpShape::Star});
        } else {
          step.ops.push_back({OpKind::Broadcast, begin, end, reps[0], reps, OpShape::Star});
        }
      });
    }
    if (!step.ops.empty()) schedule.steps.push_back(std::move(step));
  };
  for (int h = 1; h <= top; ++h) level_step(h, Phase::Reduce);
  // The top branching node's owners all hold the whole sum after its step; below it, each
  // node's first owner has it once its parent's step is done.
  for (int h = top - 1; h >= 1; --h) level_step(h, Phase::Broadcast);
  out.end_sparse = schedule.steps.size();

  within_machines(Phase::AllGather, OpKind::Broadcast);
  return out;
}

}  // namespace flexplan::ir
