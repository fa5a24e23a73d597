// The switch tree (switch_tree.hpp): a reduce-and-broadcast tree whose levels are the topology's
// own, so that a tree edge crosses a switch only where the data must, and the whole is rooted at
// the topology's centre; one tree, or two on half the units each.
#include "planner/switch_tree.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <tuple>
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
// more learners, then the lower rank. Reads no link figure.
void order_by_shape(std::vector<Member>& members) {
  std::stable_sort(members.begin(), members.end(), [](const Member& x, const Member& y) {
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

// One tree on [begin, end): its ops going up by step, those coming down by the step they
// mirror (taken in reverse order), and the centre's exchange, if any (between them).
struct Tree {
  std::vector<std::vector<ir::Op>> up, down;
  std::vector<ir::Op> exchange;
};

// What the trees built so far put on each link (by the node it is the uplink of), in messages
// per direction.
using LinkLoads = std::vector<double>;
// Passes over the trees taking turns (SwitchTreeShape::rotate_sides).
constexpr uint32_t kRotationPasses = 2;

// `centre_root`: where not -1, the member that is the centre node's root (a broadcast's source).
Tree build_tree(const Topology& topo, NodeId centre, const SwitchTreeShape& shape, size_t pick, uint64_t begin,
                uint64_t end, LinkLoads* link_loads, int32_t centre_root = -1) {
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
  std::vector<Member> root(static_cast<size_t>(topo.num_nodes()), Member{-1, 0, {}, 0});
  std::vector<double> added(shape.rotate_sides ? static_cast<size_t>(topo.num_nodes()) : 0, 0.0);  // (rotating)
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
    if (!members.empty() && shape.roots == SwitchRoots::ByPrice)
      for (Member& member : members)
        if (member.rank != (topo.is_learner(v) ? topo.rank_of(v) : -1))
          member.path = path_between(topo, topo.learner_node(member.rank), v);
    if (!members.empty() && v != centre && !topo.is_learner(v) && shape.lift_narrow &&
        shape.roots == SwitchRoots::ByPrice) {
      // Every member is behind a link narrower than this node's way towards the centre: a root
      // among them would take another's sum in over such a link and send the total out over it,
      // and take the result in again coming down, so they meet one level up instead, each
      // carrying only its own sum over its link (adversarial trees: 1 MiB's worst 1.49-1.75 of
      // n/w + D to 1.12-1.48, docs/planner-quality.md).
      const NodeId toward = from[static_cast<size_t>(v)];
      const double way = topo.uplink(topo.parent(v) == toward ? v : toward).bandwidth;
      const bool all_narrower =
          members.size() > 1 &&
          std::all_of(members.begin(), members.end(), [&](const Member& m) { return m.path.bandwidth < way; });
      if (all_narrower) {
        auto& above = meeting[static_cast<size_t>(toward)];
        above.insert(above.end(), members.begin(), members.end());
        continue;
      }
    }
    // Rotating: each tree's root here is the side (a member, or the way up: the members then
    // meet a level higher) that leaves the busiest link the members' hops cross least loaded
    // per byte, counting what the other trees put on every link (LinkLoads; plan_switch_tree).
    const bool rotating =
        shape.rotate_sides && shape.roots == SwitchRoots::ByPrice && members.size() > 1 && !topo.is_learner(v);
    size_t rotated_top = 0;
    if (rotating) {
      order_by_price(members);
      const NodeId toward = v == centre ? -1 : from[static_cast<size_t>(v)];
      const double share = 1.0 / std::max<uint32_t>(shape.trees, 1), m = static_cast<double>(members.size());
      std::vector<double>& loads = *link_loads;
      // A link by the node it is the uplink of.
      const auto link_between = [&](NodeId x, NodeId y) { return topo.parent(x) == y ? x : y; };
      // Each member's links to this node, and the way up's.
      std::vector<std::vector<NodeId>> paths(members.size());
      for (size_t j = 0; j < members.size(); ++j)
        for (NodeId x = topo.learner_node(members[j].rank); x != v; x = from[static_cast<size_t>(x)])
          paths[j].push_back(link_between(x, from[static_cast<size_t>(x)]));
      const NodeId way = v == centre ? -1 : link_between(v, toward);
      // The loads with every member not the root: each path carries one sum each way, and the
      // way up the root's sum on towards the centre.
      std::vector<NodeId> touched;
      const auto add = [&](NodeId link, double load) {
        if (added[static_cast<size_t>(link)] == 0) touched.push_back(link);
        added[static_cast<size_t>(link)] += load;
      };
      for (const auto& path : paths)
        for (const NodeId link : path) add(link, share);
      if (way >= 0) add(way, share);
      const auto per_byte = [&](NodeId link, double extra) {
        return (loads[static_cast<size_t>(link)] + added[static_cast<size_t>(link)] + extra) /
               topo.uplink(link).bandwidth;
      };
      // Links busiest first: the busiest a root's path does not cross is found in a few steps.
      std::vector<std::pair<double, NodeId>> busiest;
      for (const NodeId link : touched) busiest.emplace_back(per_byte(link, 0), link);
      std::sort(busiest.begin(), busiest.end(), std::greater<>());
      // The busiest link with `path` carrying (m - 1) more sums each way (a root's: the others'
      // sums in, the result out).
      const auto busiest_with = [&](const std::vector<NodeId>& path) {
        double most = 0;
        for (const NodeId link : path) most = std::max(most, per_byte(link, (m - 1) * share));
        for (const auto& [load, link] : busiest)
          if (std::find(path.begin(), path.end(), link) == path.end()) return std::max(most, load);
        return most;
      };
      const std::vector<NodeId> way_path = way >= 0 ? std::vector<NodeId>{way} : std::vector<NodeId>{};
      size_t best = 0;
      double least = busiest_with(paths[0]);
      for (size_t j = 1; j <= members.size() - (way < 0 ? 1 : 0); ++j)
        if (const double b = busiest_with(j < members.size() ? paths[j] : way_path); b < least * (1 - 1e-9))
          least = b, best = j;
      if (best < members.size()) {
        // Kept: the members' sums to the root and the result back (the root's own sum on
        // towards the centre is counted where it meets the others there).
        for (size_t j = 0; j < members.size(); ++j)
          for (const NodeId link : paths[j]) loads[static_cast<size_t>(link)] += (j == best ? m - 1 : 1) * share;
      }
      for (const NodeId link : touched) added[static_cast<size_t>(link)] = 0;
      if (best == members.size()) {  // lifted: their hops are counted where they meet
        auto& above = meeting[static_cast<size_t>(toward)];
        above.insert(above.end(), members.begin(), members.end());
        continue;
      }
      rotated_top = best;
    }
    if (!members.empty()) {
      uint32_t learners = 0;
      for (const Member& member : members) learners += member.learners;
      if (shape.roots == SwitchRoots::ByShape)
        order_by_shape(members);
      else if (!rotating)  // (ordered above, and the root chosen)
        order_by_price(members);
      size_t top = rotating ? rotated_top : std::min(pick, members.size() - 1);
      if (v == centre && centre_root >= 0)
        for (size_t j = 0; j < members.size(); ++j)
          if (members[j].rank == centre_root) top = j;
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
      // Each member's parent among them (members[0] the root), parents before their children.
      std::vector<size_t> parent(m, 0);
      if (shape.fit_fanout && shape.roots == SwitchRoots::ByPrice && m > 2) {
        // Fitted to the links: the others, widest link first, each under the member whose link
        // then carries least per byte, a member's link carrying its children's sums and its own
        // (the root's own only where it goes on towards the centre). The widest take the most.
        std::stable_sort(members.begin() + 1, members.end(),
                         [](const Member& x, const Member& y) { return x.path.bandwidth > y.path.bandwidth; });
        std::vector<uint32_t> children(m, 0), depth(m, 0);
        const auto with_one_more = [&](size_t p) {
          const double own = p == 0 && v == centre ? 0 : 1;
          return (own + children[p] + 1) / members[p].path.bandwidth;
        };
        std::set<std::tuple<double, uint32_t, size_t>> open{{with_one_more(0), 0, 0}};
        for (size_t j = 1; j < m; ++j) {
          const auto [load, at_depth, p] = *open.begin();
          open.erase(open.begin());
          parent[j] = p;
          depth[j] = at_depth + 1;
          ++children[p];
          open.emplace(with_one_more(p), at_depth, p);
          open.emplace(with_one_more(j), depth[j], j);
        }
      } else {
        const size_t k = fanout == 0 || fanout >= m - 1 ? std::max<size_t>(m - 1, 1) : fanout;
        for (size_t j = 1; j < m; ++j) parent[j] = (j - 1) / k;  // a heap of fan-out k
      }
      // Its levels reduced deepest first.
      std::vector<uint32_t> level(m, 0);
      uint32_t levels = 0;
      for (size_t j = 1; j < m; ++j) levels = std::max(levels, level[j] = level[parent[j]] + 1);
      std::vector<std::vector<int32_t>> groups(m);
      for (size_t j = 1; j < m; ++j) groups[parent[j]].push_back(members[j].rank);
      for (size_t p = 0; p < m; ++p) {
        std::vector<int32_t>& group = groups[p];
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
  // The rows' names: a chain (fan-out 1) or binary tree (2) at every switch is named so.
  const bool named_fanout = !shape.exchange_at_centre && (shape.fanout == 1 || shape.fanout == 2);
  const char* kind = shape.exchange_at_centre ? (trees == 2 ? "exch" : "exchange")
                     : !named_fanout          ? "tree"
                     : shape.fanout == 1      ? (trees == 2 ? "chain" : "chain-tree")
                                              : (trees == 2 ? "binary" : "binary-tree");
  schedule.algorithm = fmt::format("switch-{}{}{}{}{}", shape.roots == SwitchRoots::ByShape ? "shape-" : "",
                                   trees == 2 ? "double-" : "", kind, trees > 2 ? fmt::format("s-{}", trees) : "",
                                   shape.fanout > 0 && !named_fanout ? fmt::format("-fan-out-{}", shape.fanout) : "");
  // The raced ones by their rows' names (rotating three trees, fitted one or three), others
  // by the builder's name and what they add.
  const bool plain = !shape.exchange_at_centre && shape.roots == SwitchRoots::ByPrice && !shape.lift_narrow &&
                     shape.fanout == 0;
  if (plain && shape.rotate_sides && trees == 3)
    schedule.algorithm = shape.fit_fanout ? "switch-fit-triple" : "switch-triple-tree";
  else if (plain && shape.fit_fanout && !shape.rotate_sides && trees == 1)
    schedule.algorithm = "switch-fit-tree";
  else
    schedule.algorithm += fmt::format("{}{}", shape.rotate_sides ? "-rotated" : "", shape.fit_fanout ? "-fitted" : "");
  if (shape.lift_narrow)  // the raced ones by their rows' names
    schedule.algorithm = shape.fanout == 2 && trees <= 2 && !shape.exchange_at_centre && shape.roots == SwitchRoots::ByPrice &&
                                 !shape.rotate_sides && !shape.fit_fanout
                             ? (trees == 2 ? "switch-lift-double" : "switch-lift-binary")
                             : schedule.algorithm + "-lifted";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = trees;
  const NodeId centre = switch_tree_centre(topo);
  std::vector<std::vector<ir::Op>> up, down;
  std::vector<ir::Op> exchange;
  // Taking turns, the trees are chosen in passes: the first tree by tree, each seeing the loads
  // of those before it; then each tree again, seeing the loads of all the others (a tree chosen
  // first cannot know what the later ones will put on its links).
  std::vector<Tree> built(trees);
  if (shape.rotate_sides) {
    const size_t nodes = static_cast<size_t>(topo.num_nodes());
    std::vector<LinkLoads> own(trees, LinkLoads(nodes, 0.0));  // each tree's loads
    LinkLoads total(nodes, 0.0);
    for (uint32_t pass = 0; pass < kRotationPasses; ++pass)
      for (uint32_t t = 0; t < trees; ++t) {
        LinkLoads others = total;
        if (pass > 0)
          for (size_t l = 0; l < nodes; ++l) others[l] -= own[t][l];
        LinkLoads loads = others;
        built[t] = build_tree(topo, centre, shape, t, t, t + 1, &loads);
        for (size_t l = 0; l < nodes; ++l) own[t][l] = loads[l] - others[l], total[l] = loads[l];
      }
  } else {
    for (uint32_t t = 0; t < trees; ++t) built[t] = build_tree(topo, centre, shape, t, t, t + 1, nullptr);
  }
  for (uint32_t t = 0; t < trees; ++t) {
    Tree& tree = built[t];
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

ir::Schedule plan_switch_tree_broadcast(const Topology& topo, int32_t root, uint32_t fanout) {
  if (root < 0 || root >= topo.num_learners())
    throw std::invalid_argument(fmt::format("root {} is not among the {} learners", root, topo.num_learners()));
  ir::Schedule schedule;
  schedule.algorithm = fanout == 1 ? "switch-chain-tree" : fanout == 2 ? "switch-binary-tree" : "switch-tree";
  schedule.collective = ir::Collective::Broadcast;
  schedule.root = root;
  schedule.units = 1;
  const NodeId source = topo.learner_node(root);
  const NodeId centre = source == topo.root() ? source : topo.parent(source);
  SwitchTreeShape shape;
  shape.fanout = fanout;
  Tree tree = build_tree(topo, centre, shape, 0, 0, 1, nullptr, root);
  for (size_t s = tree.down.size(); s-- > 0;)
    if (!tree.down[s].empty()) schedule.steps.push_back(ir::Step{ir::Phase::Broadcast, 0, std::move(tree.down[s])});
  return schedule;
}

ScheduleSize switch_tree_size(const Topology& topo, uint32_t trees, bool exchange_at_centre, bool lifting) {
  // Every learner but a tree's root is a child in one star of it a direction: at most P - 1
  // stars, each with its children and its root. The centre's exchange: one op per member (at
  // most its neighbours and itself, or, where members are lifted, every learner), each over
  // all of them.
  const uint64_t p = static_cast<uint64_t>(topo.num_learners());
  const uint64_t children = p > 0 ? p - 1 : 0;
  ScheduleSize size{2 * trees * children, 4 * trees * children};
  if (exchange_at_centre) {
    const NodeId centre = switch_tree_centre(topo);
    const uint64_t m = lifting ? p : static_cast<uint64_t>(topo.degree(centre)) + 1;
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

std::string switch_triple_tree_unsuitable(const Topology& topo) {
  if (topo.num_learners() <= kMaxTripleTreeRanks) return {};
  return fmt::format("{} learners: left out past {} (three trees' planning time on large trees)", topo.num_learners(),
                     kMaxTripleTreeRanks);
}

}  // namespace flexplan
