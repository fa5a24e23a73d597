// The switch tree (switch_tree.hpp): a reduce-and-broadcast tree whose levels are the topology's
// own, so that a tree edge crosses a switch only where the data must, and the whole is rooted at
// the topology's centre; one tree, or two on half the units each.
#include "planner/switch_tree.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace flexplan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The message size the roots are chosen for: the middle sizes these trees serve.
constexpr double kDesignBytes = 65536;

// The narrowest link and the summed latency between two nodes.
struct Path {
  double bandwidth = kInfinity;
  double latency = 0;
};

Path path_between(const Topology& topo, NodeId a, NodeId b) {
  Path path;
  while (a != b) {
    NodeId& up = topo.depth(a) >= topo.depth(b) ? a : b;
    const Link& link = topo.uplink(up);
    path.bandwidth = std::min(path.bandwidth, link.bandwidth);
    path.latency += link.latency;
    up = topo.parent(up);
  }
  return path;
}

// Nodes from the root down, every parent before its children.
std::vector<NodeId> top_down(const Topology& topo) {
  std::vector<NodeId> order{topo.root()};
  for (size_t i = 0; i < order.size(); ++i)
    for (NodeId child : topo.children(order[i])) order.push_back(child);
  return order;
}

// A star op, members farthest from the root first (the order the model queues a root's hops in).
ir::Op star(const Topology& topo, ir::OpKind kind, uint64_t begin, uint64_t end, int32_t root,
            std::vector<int32_t> group) {
  std::vector<std::pair<double, int32_t>> keyed;
  for (int32_t r : group) keyed.emplace_back(r == root ? -1.0 : topo.path_latency(r, root), r);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < group.size(); ++i) group[i] = keyed[i].second;
  ir::Op op{kind, begin, end, root, ir::RankList(std::move(group))};
  op.shape = ir::OpShape::Star;
  return op;
}

// A member meeting at a node: a subtree's root, the reduce step from which its sum is ready, and
// its path to the node.
struct Member {
  int32_t rank = 0;
  uint32_t ready = 0;
  Path path;
  uint32_t learners = 1;  // in the subtree it heads
};

// Members in the order SwitchRoots::ByShape takes them as roots: ready last first, then heading
// more learners, then the lower rank (ByLearners: most learners first). Reads no link figure.
void order_by_shape(std::vector<Member>& members, bool heaviest_first) {
  std::stable_sort(members.begin(), members.end(), [&](const Member& x, const Member& y) {
    if (heaviest_first && x.learners != y.learners) return x.learners > y.learners;
    if (x.ready != y.ready) return x.ready > y.ready;
    if (x.learners != y.learners) return x.learners > y.learners;
    return x.rank < y.rank;
  });
}

// Members cheapest first as the root of their star at kDesignBytes (ties: the lower rank): the
// others' data into its link, the farthest of them, and the sum carried on over its own path.
void order_by_price(std::vector<Member>& members) {
  const double m = static_cast<double>(members.size());
  // The two farthest members, so that each member's farthest other is found in one pass.
  double far = 0, second = 0;
  size_t farthest = 0;
  for (size_t j = 0; j < members.size(); ++j) {
    const double d = members[j].path.latency + kDesignBytes / members[j].path.bandwidth;
    if (d > far) second = far, far = d, farthest = j;
    else if (d > second) second = d;
  }
  std::vector<std::pair<double, size_t>> priced;
  for (size_t j = 0; j < members.size(); ++j) {
    const Path& path = members[j].path;
    const double incast = (m - 1) * kDesignBytes / path.bandwidth;
    priced.emplace_back(2 * path.latency + std::max(incast, j == farthest ? second : far) + kDesignBytes / path.bandwidth, j);
  }
  std::stable_sort(priced.begin(), priced.end(), [&](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first < y.first;
    return members[x.second].rank < members[y.second].rank;
  });
  std::vector<Member> sorted;
  for (const auto& entry : priced) sorted.push_back(members[entry.second]);
  members = std::move(sorted);
}

// SwitchRoots::ByRootedPrice: a learner that could head a subtree, with the time at which its
// subtree's 64 KiB sum would be at it, and its path to the node the entry is seen from.
struct RootedEntry {
  int32_t rank = 0;
  double up = 0;
  double latency = 0;
  double bandwidth = kInfinity;
};

// One subtree meeting at a node (or the node itself, child -1), its entries by the time their
// data takes to cross their paths (kDesignBytes / bandwidth, ascending), with the least
// up + latency of every prefix and the least up + latency + crossing of every suffix, so that
// the member it sends to a root whose own path takes `crossing` is found by one search.
struct RootedGroup {
  NodeId child = -1;
  std::vector<RootedEntry> entries;
  std::vector<double> crossing;
  std::vector<std::pair<double, int32_t>> prefix, suffix;  // (time, rank); suffix has one more

  void index() {
    std::stable_sort(entries.begin(), entries.end(), [](const RootedEntry& x, const RootedEntry& y) {
      return x.bandwidth > y.bandwidth;
    });
    const size_t n = entries.size();
    crossing.resize(n);
    prefix.resize(n);
    suffix.assign(n + 1, {kInfinity, -1});
    for (size_t i = 0; i < n; ++i) {
      crossing[i] = kDesignBytes / entries[i].bandwidth;
      const std::pair<double, int32_t> here{entries[i].up + entries[i].latency, entries[i].rank};
      prefix[i] = i == 0 ? here : std::min(prefix[i - 1], here);
    }
    for (size_t i = n; i-- > 0;)
      suffix[i] = std::min(suffix[i + 1], {entries[i].up + entries[i].latency + crossing[i], entries[i].rank});
  }
  // The member whose data reaches a root soonest, the root's own path taking `own` to cross
  // and no latency: (time, rank). A hop crosses at its path's narrowest link.
  std::pair<double, int32_t> best_for(double own) const {
    const size_t at = static_cast<size_t>(std::upper_bound(crossing.begin(), crossing.end(), own) - crossing.begin());
    std::pair<double, int32_t> best = suffix[at];
    if (at > 0) best = std::min(best, {prefix[at - 1].first + own, prefix[at - 1].second});
    return best;
  }
  double earliest() const { return prefix.empty() ? kInfinity : prefix.back().first; }
};

// The learner heading each node's subtree (the topology taken from `centre`; `order` top-down,
// `from` each node's neighbour towards the centre) under SwitchRoots::ByRootedPrice, -1 where
// the subtree has no learner. Bottom up, each learner r of a node's subtree is priced as its
// root: the star's members are, per other subtree meeting there, the learner whose sum reaches
// r soonest (its own ready time, the two paths' latencies, the bytes at the narrower path's
// pace), and r's link takes the others' bytes in one after another; r's time is the latest of
// those and its own subtree's. Top down, the centre's root is the learner done soonest and every
// subtree's root the member its parent's root took.
std::vector<int32_t> rooted_price_heads(const Topology& topo, NodeId centre, const std::vector<NodeId>& order,
                                        const std::vector<NodeId>& from, bool exchange_at_centre) {
  const size_t nodes = static_cast<size_t>(topo.num_nodes());
  std::vector<std::vector<RootedGroup>> groups(nodes);
  std::vector<std::vector<RootedEntry>> heads(nodes);  // every learner below, as its node's root
  const auto link_to = [&](NodeId child, NodeId v) -> const Link& {
    return topo.parent(child) == v ? topo.uplink(child) : topo.uplink(v);
  };
  for (size_t i = order.size(); i-- > 0;) {
    const NodeId v = order[i];
    auto& meeting = groups[static_cast<size_t>(v)];
    if (topo.is_learner(v)) {
      RootedGroup self;
      self.entries.push_back(RootedEntry{topo.rank_of(v), 0, 0, kInfinity});
      meeting.push_back(std::move(self));
    }
    for (RootedGroup& group : meeting) group.index();
    const size_t k = meeting.size();
    auto& mine = heads[static_cast<size_t>(v)];
    for (size_t j = 0; j < k; ++j) {
      for (const RootedEntry& r : meeting[j].entries) {
        const double own = kDesignBytes / r.bandwidth;
        double done = r.up;
        if (k > 1) {
          double arrivals = 0, first = 0;
          for (size_t g = 0; g < k; ++g) {
            if (g == j) continue;
            arrivals = std::max(arrivals, meeting[g].best_for(own).first);
            first = std::max(first, meeting[g].earliest());
          }
          done = std::max({done, arrivals + r.latency, first + r.latency + static_cast<double>(k - 1) * own});
        }
        mine.push_back(RootedEntry{r.rank, done, r.latency, r.bandwidth});
      }
    }
    if (v == centre || mine.empty()) continue;
    const NodeId up = from[static_cast<size_t>(v)];
    const Link& link = link_to(v, up);
    RootedGroup group;
    group.child = v;
    for (const RootedEntry& r : mine)
      group.entries.push_back(RootedEntry{r.rank, r.up, r.latency + link.latency, std::min(r.bandwidth, link.bandwidth)});
    groups[static_cast<size_t>(up)].push_back(std::move(group));
  }
  std::vector<int32_t> head(nodes, -1);
  std::vector<std::pair<NodeId, int32_t>> todo;  // (node, the learner heading it)
  const auto& top = groups[static_cast<size_t>(centre)];
  if (exchange_at_centre && top.size() > 1) {
    // Each member takes in every other's bytes: per subtree, the learner whose sum is ready
    // and in soonest.
    for (const RootedGroup& group : top) {
      std::pair<double, int32_t> best{kInfinity, -1};
      for (const RootedEntry& r : group.entries)
        best = std::min(best, {r.up + r.latency + static_cast<double>(top.size() - 1) * kDesignBytes / r.bandwidth, r.rank});
      if (group.child >= 0) todo.emplace_back(group.child, best.second);
    }
  } else {
    std::pair<double, int32_t> best{kInfinity, -1};
    for (const RootedEntry& r : heads[static_cast<size_t>(centre)]) best = std::min(best, {r.up, r.rank});
    if (best.second >= 0) todo.emplace_back(centre, best.second);
  }
  while (!todo.empty()) {
    const auto [v, rank] = todo.back();
    todo.pop_back();
    head[static_cast<size_t>(v)] = rank;
    const auto& meeting = groups[static_cast<size_t>(v)];
    double own = 0;
    size_t j = meeting.size();
    for (size_t g = 0; g < meeting.size() && j == meeting.size(); ++g)
      for (const RootedEntry& r : meeting[g].entries)
        if (r.rank == rank) {
          own = kDesignBytes / r.bandwidth;
          j = g;
          break;
        }
    for (size_t g = 0; g < meeting.size(); ++g) {
      if (meeting[g].child < 0) continue;
      todo.emplace_back(meeting[g].child, g == j ? rank : meeting[g].best_for(own).second);
    }
  }
  return head;
}

// One tree on [begin, end): its ops going up by step, those coming down by the step they
// mirror (taken in reverse order), and the centre's exchange, if any (between them).
struct Tree {
  std::vector<std::vector<ir::Op>> up, down;
  std::vector<ir::Op> exchange;
};

Tree build_tree(const Topology& topo, NodeId centre, const SwitchTreeShape& shape, size_t pick, uint64_t begin,
                uint64_t end) {
  const uint32_t fanout = shape.fanout;
  // The topology taken as rooted at `centre`: every node's neighbours away from it.
  std::vector<NodeId> order{centre};
  std::vector<NodeId> from(static_cast<size_t>(topo.num_nodes()), -1);
  from[static_cast<size_t>(centre)] = centre;
  for (size_t i = 0; i < order.size(); ++i) {
    const NodeId v = order[i];
    const auto visit = [&](NodeId w) {
      if (w < 0 || from[static_cast<size_t>(w)] >= 0) return;
      from[static_cast<size_t>(w)] = v;
      order.push_back(w);
    };
    for (NodeId child : topo.children(v)) visit(child);
    visit(topo.parent(v));
  }
  const bool rooted = shape.roots == SwitchRoots::ByRootedPrice && pick == 0;
  const std::vector<int32_t> heads =
      rooted ? rooted_price_heads(topo, centre, order, from, shape.exchange_at_centre) : std::vector<int32_t>{};
  std::vector<Member> root(static_cast<size_t>(topo.num_nodes()), Member{-1, 0, {}, 0});
  std::vector<std::vector<Member>> meeting(static_cast<size_t>(topo.num_nodes()));
  Tree tree;
  // An op going up at `step`, and the one coming down in its place.
  const auto add = [&](uint32_t step, ir::Op up, ir::Op down) {
    if (tree.up.size() <= step) tree.up.resize(step + 1), tree.down.resize(step + 1);
    tree.up[step].push_back(std::move(up));
    tree.down[step].push_back(std::move(down));
  };
  for (size_t i = order.size(); i-- > 0;) {
    const NodeId v = order[i];
    auto& members = meeting[static_cast<size_t>(v)];
    if (topo.is_learner(v)) members.push_back(Member{topo.rank_of(v), 0, Path{}, 1});
    if (!members.empty()) {
      uint32_t learners = 0;
      for (const Member& member : members) learners += member.learners;
      if (rooted) {
        // The programme's root first, the others by rank.
        const int32_t head = heads[static_cast<size_t>(v)];
        std::stable_sort(members.begin(), members.end(), [&](const Member& x, const Member& y) {
          if ((x.rank == head) != (y.rank == head)) return x.rank == head;
          return x.rank < y.rank;
        });
      } else if (shape.roots == SwitchRoots::ByShape || shape.roots == SwitchRoots::ByLearners) {
        order_by_shape(members, shape.roots == SwitchRoots::ByLearners);
      } else {
        for (Member& member : members)
          if (member.rank != (topo.is_learner(v) ? topo.rank_of(v) : -1))
            member.path = path_between(topo, topo.learner_node(member.rank), v);
        order_by_price(members);
      }
      const size_t top = std::min(pick, members.size() - 1);
      std::rotate(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(top),
                  members.begin() + static_cast<std::ptrdiff_t>(top) + 1);
      uint32_t start = 0;
      for (const Member& member : members) start = std::max(start, member.ready);
      const size_t m = members.size();
      if (v == centre && shape.exchange_at_centre && m > 1) {
        std::vector<int32_t> all;
        for (const Member& member : members) all.push_back(member.rank);
        for (const Member& member : members)
          tree.exchange.push_back(star(topo, ir::OpKind::Reduce, begin, end, member.rank, all));
        continue;
      }
      const size_t k = fanout == 0 || fanout >= m - 1 ? std::max<size_t>(m - 1, 1) : fanout;
      // Heap of fan-out k over `members` (members[0] the root, the parent of j at (j - 1) / k),
      // its levels reduced deepest first.
      std::vector<uint32_t> level(m, 0);
      uint32_t levels = 0;
      for (size_t j = 1; j < m; ++j) levels = std::max(levels, level[j] = level[(j - 1) / k] + 1);
      for (size_t p = 0; p < m; ++p) {
        std::vector<int32_t> group;
        for (size_t j = k * p + 1; j <= k * p + k && j < m; ++j) group.push_back(members[j].rank);
        if (group.empty()) continue;
        group.push_back(members[p].rank);
        add(start + levels - 1 - level[p], star(topo, ir::OpKind::Reduce, begin, end, members[p].rank, group),
            star(topo, ir::OpKind::Broadcast, begin, end, members[p].rank, group));
      }
      root[static_cast<size_t>(v)] = Member{members[0].rank, start + levels, {}, learners};
    }
    if (v != centre && root[static_cast<size_t>(v)].rank >= 0)
      meeting[static_cast<size_t>(from[static_cast<size_t>(v)])].push_back(root[static_cast<size_t>(v)]);
  }
  return tree;
}

}  // namespace

NodeId switch_tree_centre(const Topology& topo) {
  const auto order = top_down(topo);
  const size_t nodes = static_cast<size_t>(topo.num_nodes());
  // In links. down: the farthest learner below a node; up: the farthest elsewhere.
  std::vector<double> down(nodes, -kInfinity), up(nodes, -kInfinity);
  for (size_t i = order.size(); i-- > 0;) {
    const NodeId v = order[i];
    if (topo.is_learner(v)) down[static_cast<size_t>(v)] = 0;
    for (NodeId child : topo.children(v))
      down[static_cast<size_t>(v)] =
          std::max(down[static_cast<size_t>(v)], down[static_cast<size_t>(child)] + 1.0);
  }
  for (const NodeId v : order) {
    // The two farthest learners through different children, for each child's way up.
    double first = topo.is_learner(v) ? 0 : -kInfinity, second = -kInfinity;
    NodeId via = -1;
    for (NodeId child : topo.children(v)) {
      const double d = down[static_cast<size_t>(child)] + 1.0;
      if (d > first) second = first, first = d, via = child;
      else if (d > second) second = d;
    }
    for (NodeId child : topo.children(v)) {
      const double other = std::max(up[static_cast<size_t>(v)], child == via ? second : first);
      up[static_cast<size_t>(child)] = other + 1.0;
    }
  }
  NodeId best = topo.root();
  double least = kInfinity;
  for (const NodeId v : order) {  // (by depth: the shallower wins ties)
    const double e = std::max(down[static_cast<size_t>(v)], up[static_cast<size_t>(v)]);
    if (e < least * (1 - 1e-12)) least = e, best = v;
  }
  return best;
}

ir::Schedule plan_switch_tree(const Topology& topo, const SwitchTreeShape& shape) {
  ir::Schedule schedule;
  const uint32_t trees = std::max<uint32_t>(shape.trees, 1);
  schedule.algorithm = fmt::format("switch-{}{}{}{}{}", shape.roots == SwitchRoots::ByShape ? "shape-" : shape.roots == SwitchRoots::ByLearners ? "heavy-" : shape.roots == SwitchRoots::ByRootedPrice ? "rooted-" : "", trees == 2 ? "double-" : "",
                                   shape.exchange_at_centre ? (trees == 2 ? "exch" : "exchange") : "tree",
                                   trees > 2 ? fmt::format("s-{}", trees) : "",
                                   shape.fanout > 0 ? fmt::format("-fan-out-{}", shape.fanout) : "");
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = trees;
  const NodeId centre = switch_tree_centre(topo);
  std::vector<std::vector<ir::Op>> up, down;
  std::vector<ir::Op> exchange;
  for (uint32_t t = 0; t < trees; ++t) {
    Tree tree = build_tree(topo, centre, shape, t, t, t + 1);
    if (up.size() < tree.up.size()) up.resize(tree.up.size()), down.resize(tree.up.size());
    for (size_t s = 0; s < tree.up.size(); ++s) {
      for (auto& op : tree.up[s]) up[s].push_back(std::move(op));
      for (auto& op : tree.down[s]) down[s].push_back(std::move(op));
    }
    for (auto& op : tree.exchange) exchange.push_back(std::move(op));
  }
  for (auto& ops : up)
    if (!ops.empty()) schedule.steps.push_back(ir::Step{ir::Phase::Reduce, 0, std::move(ops)});
  if (!exchange.empty()) schedule.steps.push_back(ir::Step{ir::Phase::Reduce, 0, std::move(exchange)});
  for (size_t s = down.size(); s-- > 0;)
    if (!down[s].empty()) schedule.steps.push_back(ir::Step{ir::Phase::Broadcast, 0, std::move(down[s])});
  return schedule;
}

ScheduleSize switch_tree_size(const Topology& topo, uint32_t trees, bool exchange_at_centre) {
  // Every learner but a tree's root is a child in one star of it a direction: at most P - 1
  // stars, each with its children and its root. The centre's exchange: one op per member (at
  // most its neighbours and itself), each over all of them.
  const uint64_t p = static_cast<uint64_t>(topo.num_learners());
  const uint64_t children = p > 0 ? p - 1 : 0;
  ScheduleSize size{2 * trees * children, 4 * trees * children};
  if (exchange_at_centre) {
    const NodeId centre = switch_tree_centre(topo);
    const uint64_t m = static_cast<uint64_t>(topo.degree(centre)) + 1;
    size.ops += trees * m;
    size.group_members += trees * m * m;
  }
  return size;
}

std::string switch_tree_unsuitable(const Topology& topo) {
  if (topo.num_learners() <= kMaxSwitchTreeRanks) return {};
  return fmt::format("{} learners: left out past {} (planning time on large trees)", topo.num_learners(),
                     kMaxSwitchTreeRanks);
}

}  // namespace flexplan
