// The LP behind bandwidth-aware FlexReduce (bandwidth_shares.hpp), solved with COIN-OR CLP.
#include "planner/bandwidth_shares.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <utility>

#include <CoinFinite.hpp>
#include <fmt/core.h>

#include "planner/floor.hpp"
#include "planner/linear_program.hpp"
#include "planner/virtual_tree.hpp"

namespace flexplan {
namespace {

// Nodes that any automorphism of the tree maps onto each other share an orbit: identical
// sibling subtrees (same uplink bandwidths and shapes all the way down) are interchangeable, and
// the LP is convex, so averaging an optimum over those swaps gives an optimum in which such
// nodes hold the same shares. The LP then needs one set of columns and rows per orbit, which is
// what keeps it small on large regular clusters (thousands of identical machines).
struct Orbits {
  std::vector<int> of;             // by node
  std::vector<NodeId> representative;  // by orbit: its first node in node order
  std::vector<NodeId> top_down;    // every node, parents before children
  std::vector<int> in_node_order;  // the orbits by their representatives' node ids
};

Orbits orbits_of(const Topology& topo) {
  const auto nodes = static_cast<size_t>(topo.num_nodes());
  // Shape of each subtree, bottom up (children have larger depth).
  std::vector<NodeId> by_depth(nodes);
  for (size_t n = 0; n < nodes; ++n) by_depth[n] = static_cast<NodeId>(n);
  std::stable_sort(by_depth.begin(), by_depth.end(),
                   [&](NodeId a, NodeId b) { return topo.depth(a) > topo.depth(b); });
  std::map<std::vector<uint64_t>, int> shape_ids;
  std::vector<int> shape(nodes, 0);
  for (NodeId n : by_depth) {
    std::vector<uint64_t> key;
    if (n != topo.root()) key.push_back(std::bit_cast<uint64_t>(topo.uplink(n).bandwidth));
    std::vector<uint64_t> kids;
    for (NodeId c : topo.children(n)) kids.push_back(static_cast<uint64_t>(shape[c]));
    std::sort(kids.begin(), kids.end());
    key.push_back(kids.size());
    key.insert(key.end(), kids.begin(), kids.end());
    shape[n] = shape_ids.try_emplace(std::move(key), static_cast<int>(shape_ids.size())).first->second;
  }
  Orbits orbits;
  orbits.of.assign(nodes, 0);
  std::map<std::pair<int, int>, int> orbit_ids;
  for (auto n_it = by_depth.rbegin(); n_it != by_depth.rend(); ++n_it) {  // parents first
    const NodeId n = *n_it;
    const std::pair<int, int> key{n == topo.root() ? -1 : orbits.of[topo.parent(n)], shape[n]};
    const auto [it, fresh] = orbit_ids.try_emplace(key, static_cast<int>(orbit_ids.size()));
    orbits.of[n] = it->second;
    if (fresh) orbits.representative.push_back(n);
  }
  orbits.top_down.assign(by_depth.rbegin(), by_depth.rend());
  orbits.in_node_order.resize(orbits.representative.size());
  std::iota(orbits.in_node_order.begin(), orbits.in_node_order.end(), 0);
  std::sort(orbits.in_node_order.begin(), orbits.in_node_order.end(),
            [&](int a, int b) { return orbits.representative[a] < orbits.representative[b]; });
  return orbits;
}

// How far, in latency, each node's subtree reaches: `deepest[u]` the largest sum of uplink
// latencies from a learner under u up to u, `to_root[u]` the sum from u up to the root. A
// learner under u that holds items after the step of u's ancestor a then reaches a's other
// children through at least deepest[u] + to_root[u] - to_root[a] of latency.
struct LatencyReach {
  std::vector<double> deepest, to_root;
  double longest = 0;  // deepest[root]: the scale of the LP's latency terms
  double up_to(NodeId u, NodeId a) const { return deepest[u] + to_root[u] - to_root[a]; }
};

LatencyReach latency_reach(const Topology& topo, const Orbits& orbits) {
  const auto nodes = static_cast<size_t>(topo.num_nodes());
  LatencyReach reach{std::vector<double>(nodes, 0), std::vector<double>(nodes, 0), 0};
  for (NodeId n : orbits.top_down)
    if (n != topo.root()) reach.to_root[n] = reach.to_root[topo.parent(n)] + topo.uplink(n).latency;
  for (auto it = orbits.top_down.rbegin(); it != orbits.top_down.rend(); ++it)  // children first
    if (*it != topo.root()) {
      const NodeId up = topo.parent(*it);
      reach.deepest[up] = std::max(reach.deepest[up], reach.deepest[*it] + topo.uplink(*it).latency);
    }
  reach.longest = reach.deepest[topo.root()];
  return reach;
}

// Machines: switches of two or more children, all of them learners. Where a machine is active in
// a virtual tree its learners need no columns of their own (ShareLp): whatever the machine's
// subtree holds after each step can be split among its learners in fixed proportions, and the
// learners' links then take their loads exactly when their sum does (bandwidth_shares.hpp).
std::vector<char> machines_of(const Topology& topo) {
  std::vector<char> machine(static_cast<size_t>(topo.num_nodes()), 0);
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (topo.is_learner(n) || topo.degree(n) < 2) continue;
    const auto kids = topo.children(n);
    machine[static_cast<size_t>(n)] =
        std::all_of(kids.begin(), kids.end(), [&](NodeId c) { return topo.is_learner(c); });
  }
  return machine;
}

// A learner whose machine is active in the virtual tree `transparent` describes.
bool in_active_machine(const Topology& topo, const std::vector<char>& machine,
                       const std::vector<char>& transparent, NodeId n) {
  return topo.is_learner(n) && n != topo.root() && machine[static_cast<size_t>(topo.parent(n))] &&
         !passes_through(topo, transparent, topo.parent(n));
}

// The virtual trees worth offering: the tree itself, the flat tree, and each orbit of switches
// made transparent where their uplinks could carry some of their children's data uncombined (at
// least as fast as the slowest child's link, both taken as the minimum cuts of floor.hpp's
// group_cuts), the highest ratio first, at most kMaxSingles. Even a ratio of 1 can pay: three
// equal links at a switch meet the floor only with a third of the vector passed up uncombined.
// Transparency is given to whole orbits so that the symmetry argument holds.
constexpr size_t kMaxSingles = 48;
constexpr double kPromising = 1.0;

// The LP columns one virtual tree adds: its weight, and one per orbit representative and
// virtual ancestor, counted as if machines' learners had columns of their own (ShareLp needs
// none) unless `machines_out` gives the machines: the limits on what the LP holds were set in
// the first measure, and it also tracks how many
// pieces the schedule cuts the vector into, which bounds the pipelines that fit (a mix of
// trees that the LP could now solve made the 16k tree's base 2.6 times as large, and its
// pipelines stop at @4). A node's virtual ancestors are its active (non-transparent) physical
// ancestors, so they are counted top down without building the VirtualTree: a plan sizes up to
// kMaxSingles + 2 trees for the column count and again for the LP, and building each one on a
// 16k-learner tree took milliseconds.
uint64_t tree_columns(const Topology& topo, const Orbits& orbits, const std::vector<char>& transparent,
                      const std::vector<char>* machines_out = nullptr) {
  const auto active = [&](NodeId n) {
    return !passes_through(topo, transparent, n) &&
           !(machines_out != nullptr && in_active_machine(topo, *machines_out, transparent, n));
  };
  std::vector<uint32_t> active_above(static_cast<size_t>(topo.num_nodes()), 0);
  uint64_t columns = 1;
  for (NodeId n : orbits.top_down) {
    if (n == topo.root()) continue;
    const NodeId up = topo.parent(n);
    active_above[n] = active_above[up] + (active(up) ? 1 : 0);
    if (active(n) && orbits.representative[orbits.of[n]] == n) columns += active_above[n];
  }
  return columns;
}

// The tree with every switch of one orbit made transparent.
std::vector<char> orbit_transparent(const Topology& topo, const Orbits& orbits, int orbit) {
  std::vector<char> tree(static_cast<size_t>(topo.num_nodes()), 0);
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (orbits.of[n] == orbit) tree[static_cast<size_t>(n)] = 1;
  return tree;
}

// Switches that can be made transparent: not the root, two children or more (a switch of one
// child passes its data through anyway).
bool can_be_transparent(const Topology& topo, NodeId n) {
  return n != topo.root() && !topo.is_learner(n) && topo.degree(n) >= 2;
}

// The tree itself and the flat tree always (when they fit kMaxShareLpColumns together), then
// the single-orbit trees in order of promise while the LP stays within the limit; with
// `every_single`, every single-orbit tree, promising or not and without the limits (the whole LP
// that tests compare column generation with).
std::vector<std::vector<char>> candidate_trees(const Topology& topo, const Orbits& orbits,
                                               bool every_single = false) {
  const size_t nodes = static_cast<size_t>(topo.num_nodes());
  std::vector<std::vector<char>> trees{std::vector<char>(nodes, 0)};
  std::vector<std::pair<double, int>> singles;  // (ratio, orbit)
  std::vector<char> flat(nodes, 0);
  bool any_switch = false;
  const GroupCuts cuts = group_cuts(topo);
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (n == topo.root() || topo.is_learner(n)) continue;
    flat[static_cast<size_t>(n)] = 1;
    any_switch = true;
    const int orbit = orbits.of[n];
    if (!can_be_transparent(topo, n) || orbits.representative[orbit] != n) continue;
    double slowest_child = cuts.below[static_cast<size_t>(topo.children(n).front())];
    for (NodeId child : topo.children(n)) slowest_child = std::min(slowest_child, cuts.below[static_cast<size_t>(child)]);
    const double ratio = cuts.above[static_cast<size_t>(n)] / slowest_child;
    if (ratio >= kPromising || every_single) singles.emplace_back(ratio, orbit);
  }
  std::sort(singles.begin(), singles.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (singles.size() > kMaxSingles && !every_single) singles.resize(kMaxSingles);
  uint64_t columns = 1 + tree_columns(topo, orbits, trees.front());  // the objective, the tree itself
  if (any_switch && (every_single || columns + tree_columns(topo, orbits, flat) <= kMaxShareLpColumns)) {
    columns += tree_columns(topo, orbits, flat);
    trees.push_back(std::move(flat));
  }
  for (const auto& [ratio, orbit] : singles) {
    auto tree = orbit_transparent(topo, orbits, orbit);
    const uint64_t more = tree_columns(topo, orbits, tree);
    if (columns + more > kMaxShareLpColumns && !every_single) continue;
    columns += more;
    trees.push_back(std::move(tree));
  }
  std::sort(trees.begin(), trees.end());
  trees.erase(std::unique(trees.begin(), trees.end()), trees.end());
  return trees;
}

// The share LP over some of the candidate virtual trees. Built two ways:
// - the master (no prices): minimise the busiest link's load / bandwidth, the trees' weights
//   free and summing to 1;
// - a pricing problem (one tree, prices given for the master's rows): that tree alone at
//   weight 1, minimising the priced sum of those rows' loads.
// Bandwidths are relative to `slowest`, which keeps the numbers near 1.
//
// Learners of a machine that is active in a tree have no columns there. Their machine's
// columns say what its subtree holds after each step; split in proportions beta_l (summing to
// 1, the same in every tree where the machine is active), learner l holds beta_l of it. Then
// l's load is W + beta_l C + E_l: W the weight of those trees (l sends what it gives up and
// receives the rest once, "1" per unit of vector), C the rest of the machine's load in them
// (linear in its columns: (k - 1) x what it holds at each step, less what it keeps at the
// root, k the step's fan-in), E_l l's load in the other trees (its own columns there). Every
// link of l then fits, W + beta_l C + E_l <= t w_l, for some such betas exactly when
//   W + E_l <= t w_l for every learner l (its link row), and
//   sum over l of (W + E_l) + C <= t sum over l of w_l (the machine row),
// since C >= 0: take beta_l in proportion to each row's slack. On a tree of machines this
// removes most columns (learners are most nodes) without changing the optimum.
struct ShareLp {
  struct Columns {
    int weight = -1;
    std::vector<std::vector<int>> held;  // by orbit, by ancestor index
  };
  LinearProgram lp;
  int time = -1;                      // the master's objective column
  std::vector<Columns> columns;       // by tree
  std::vector<int> link_row;          // the master's load row, by node; -1 where none
  std::vector<int> machine_row;       // the master's machine row, by machine; -1 where none
  // (By orbit, below and in the constructor, what only orbit representatives have: by node,
  // a deep tree of a million learners spent more on these vectors than on the LP.)
  // Kept to split each active machine's holdings after solving: the load terms of each
  // learner's link and each machine's C, by orbit.
  std::vector<std::vector<std::pair<int, double>>> learner_terms, machine_terms;
  // Also kept for the split (machine_splits): each active machine's steps above its own, by
  // orbit, in every tree where it is active: the tree's weight column, and for each virtual
  // ancestor its level (the step it is reduced in), its fan-in less one, and the column of
  // what the machine holds after its step.
  struct MachineStep {
    int level = 0;
    double fan_in = 0;  // k_a - 1
    int held = -1;
  };
  struct MachineInTree {
    int weight = -1;
    std::vector<MachineStep> above;
  };
  std::vector<std::vector<MachineInTree>> machine_steps;
  // The links' loads step by step (the master's, links of learners in active machines aside):
  // at the step of u's virtual ancestor a (reduce-scatter; the all-gather mirrors it), the link
  // above u sends up what u's subtree gives up there and takes down k_a - 1 partial sums of
  // what it keeps. Each term adds coefficient x column to link orbit `orbit`'s load at step
  // `level`, going down or up. The split weighs its own links' loads against them.
  struct StepTerm {
    int orbit = 0;
    int level = 0;
    bool down = false;
    int col = -1;
    double coefficient = 0;
  };
  std::vector<StepTerm> step_terms;
  // The master's link loads over their bandwidths, summed: the tie-breaking aim among optima.
  std::vector<std::pair<int, double>> total_load;
  // The latency the holders put on the star ops, summed (relative to the tree's longest path):
  // the main tie-breaking aim (total_load counts a thousandth as much). Items u's subtree holds after the step of ancestor a make a
  // learner under u the root of a star at a and a member of one at a's next ancestor; each
  // column weighs what it holds by the latency from u's farthest learner up to those two
  // branches, times the learners of its orbit. The busiest link's load is the same on every
  // optimum, while a star's latency is that of its farthest hop: without this term the tie-break
  // could hand the owners to the slower-latency side as soon as a link got faster, making the
  // faster tree's schedule slower (docs/whatif.md, "Faster links, slower plans").
  std::vector<std::pair<int, double>> latency_load;

  // `prices` (pricing problems only): by node, the price of its link row; machine_prices the
  // price of each machine row.
  // `incast`: 1 + the star ops' incast loss (cost_model.hpp, StarIncast), on the partial sums
  // that two or more of a branch's other children send at once into a link between the star's
  // root and the branch, the root learner's own link aside.
  ShareLp(const Topology& topo, const Orbits& orbits, const std::vector<char>& machine, double slowest, double incast,
          const std::vector<const std::vector<char>*>& trees, const std::vector<double>* prices,
          const std::vector<double>* machine_prices, const LatencyReach* reach = nullptr,
          const std::vector<int>* orbit_sizes = nullptr) {
    const auto is_representative = [&](NodeId n) { return orbits.representative[orbits.of[n]] == n; };
    const bool pricing = prices != nullptr;
    if (!pricing) time = lp.column(0, COIN_DBL_MAX, 1);  // in units of 1 / slowest
    const size_t orbit_count = orbits.representative.size();
    std::vector<std::vector<std::pair<int, double>>> link_load(orbit_count);
    std::vector<std::vector<std::pair<int, double>>> machine_load(orbit_count);  // the C terms
    std::vector<char> machine_active(orbit_count, 0);
    std::vector<std::pair<int, double>> weights_sum;
    columns.resize(trees.size());
    for (size_t t = 0; t < trees.size(); ++t) {
      const VirtualTree vt(topo, *trees[t]);
      Columns& cols = columns[t];
      cols.weight = pricing ? lp.column(1, 1) : lp.column();
      weights_sum.emplace_back(cols.weight, 1.0);
      cols.held.resize(orbits.representative.size());
      const auto held = [&](NodeId n) -> const std::vector<int>& { return cols.held[orbits.of[n]]; };
      const auto split = [&](NodeId n) { return in_active_machine(topo, machine, *trees[t], n); };
      for (NodeId u : vt.bottom_up())
        if (is_representative(u) && !split(u))
          for (size_t j = 0; j < vt.ancestors(u).size(); ++j)
            cols.held[orbits.of[u]].push_back(lp.column(0, 1));  // at most the weight, itself at most 1
      if (!pricing && reach != nullptr && reach->longest > 0)
        for (NodeId u : vt.bottom_up()) {
          if (!is_representative(u) || split(u)) continue;
          const auto& ancestors = vt.ancestors(u);
          const double members = static_cast<double>((*orbit_sizes)[orbits.of[u]]);
          for (size_t j = 0; j < ancestors.size(); ++j) {
            double reached = reach->up_to(u, ancestors[j]);
            if (j + 1 < ancestors.size()) reached += reach->up_to(u, ancestors[j + 1]);
            if (reached > 0) latency_load.emplace_back(cols.held[orbits.of[u]][j], members * reached / reach->longest);
          }
        }
      for (NodeId u : vt.bottom_up()) {
        const auto& ancestors = vt.ancestors(u);
        if (split(u)) {
          // Its link: W here, the rest through the machine row.
          if (is_representative(u)) link_load[orbits.of[u]].emplace_back(cols.weight, 1.0);
          continue;
        }
        if (is_representative(u)) {
          if (machine[static_cast<size_t>(u)]) {
            // C: (k - 1) x the whole range at u's own step, (k_a - 1) x what u holds after each
            // later step a, less what it keeps at the root.
            auto& c = machine_load[orbits.of[u]];
            machine_active[orbits.of[u]] = 1;
            if (!pricing) {
              if (machine_steps.empty()) machine_steps.resize(orbit_count);
              MachineInTree& in_tree = machine_steps[orbits.of[u]].emplace_back();
              in_tree.weight = cols.weight;
              for (size_t j = 0; j < ancestors.size(); ++j)
                in_tree.above.push_back({vt.level(ancestors[j]),
                                         static_cast<double>(vt.children(ancestors[j]).size()) - 1, held(u)[j]});
            }
            c.emplace_back(cols.weight, static_cast<double>(vt.children(u).size()) - 1);
            for (size_t j = 0; j < ancestors.size(); ++j) {
              const double fan_in = static_cast<double>(vt.children(ancestors[j]).size()) - 1;
              if (fan_in > 0) c.emplace_back(held(u)[j], fan_in);
            }
            c.emplace_back(ancestors.empty() ? cols.weight : held(u).back(), -1.0);
          } else if (!vt.children(u).empty()) {
            // After u's own step its children hold the class's whole range between them, and
            // after each later step what u's subtree holds.
            std::vector<std::pair<int, double>> own{{cols.weight, -1.0}};
            for (NodeId c : vt.children(u)) own.emplace_back(held(c)[0], 1.0);
            lp.row(std::move(own), 0, 0);
            for (size_t j = 0; j < ancestors.size(); ++j) {
              std::vector<std::pair<int, double>> later{{held(u)[j], -1.0}};
              for (NodeId c : vt.children(u)) later.emplace_back(held(c)[j + 1], 1.0);
              lp.row(std::move(later), 0, 0);
            }
          }
          if (!ancestors.empty()) {
            // Nested: what u holds only shrinks going up.
            lp.row({{held(u)[0], 1.0}, {cols.weight, -1.0}}, -COIN_DBL_MAX, 0);
            for (size_t j = 1; j < ancestors.size(); ++j)
              lp.row({{held(u)[j], 1.0}, {held(u)[j - 1], -1.0}}, -COIN_DBL_MAX, 0);
          }
        }
        if (ancestors.empty()) continue;  // the root
        // L_u, added to every physical link on u's way up to its virtual parent (one row per
        // orbit of links: every member of an orbit carries the same load), where one of them is
        // its orbit's representative.
        const NodeId up = vt.parent(u);
        const auto rows_on_way_up = [&] {
          for (NodeId link = u; link != up; link = topo.parent(link))
            if (is_representative(link)) return true;
          return false;
        };
        if (!rows_on_way_up()) continue;
        // Two or more partial sums arriving at once into the star's root: the pricers' incast
        // loss on every link between the root and the branch (StarIncast) but the root
        // learner's own, which is inside its machine. So a learner's own link takes the plain
        // load, and the links above it on its way up (switches of one child, transparent ones)
        // the loss, as the links above a machine or switch do.
        const auto load_on = [&](bool own_learner_link) {
          std::vector<std::pair<int, double>> load{{cols.weight, 1.0}, {held(u).back(), -1.0}};
          for (size_t j = 0; j < ancestors.size(); ++j) {
            const double fan_in = static_cast<double>(vt.children(ancestors[j]).size()) - 1;
            if (fan_in > 0) load.emplace_back(held(u)[j], fan_in >= 2 && !own_learner_link ? fan_in * incast : fan_in);
          }
          return load;
        };
        const auto above = load_on(false);
        for (NodeId link = u; link != up; link = topo.parent(link))
          if (is_representative(link)) {
            const bool own_learner_link = link == u && topo.is_learner(u);
            const auto& load = own_learner_link ? load_on(true) : above;
            auto& row = link_load[orbits.of[link]];
            row.insert(row.end(), load.begin(), load.end());
            if (pricing) continue;
            for (size_t j = 0; j < ancestors.size(); ++j) {
              const int level = vt.level(ancestors[j]);
              const int orbit = orbits.of[link];
              step_terms.push_back({orbit, level, false, j == 0 ? cols.weight : held(u)[j - 1], 1.0});
              step_terms.push_back({orbit, level, false, held(u)[j], -1.0});
              const double fan_in = static_cast<double>(vt.children(ancestors[j]).size()) - 1;
              if (fan_in > 0)
                step_terms.push_back({orbit, level, true, held(u)[j], fan_in >= 2 && !own_learner_link ? fan_in * incast : fan_in});
            }
          }
      }
    }
    lp.row(weights_sum, 1, 1);
    link_row.assign(static_cast<size_t>(topo.num_nodes()), -1);
    machine_row.assign(static_cast<size_t>(topo.num_nodes()), -1);
    learner_terms.resize(orbit_count);
    machine_terms.resize(orbit_count);
    // Machine rows first, while every learner's terms are at hand: each child's are those of its
    // orbit's representative (orbit members carry the same load).
    std::vector<char> learner_known(orbit_count, 0);
    for (const int orbit : orbits.in_node_order) {
      const NodeId m = orbits.representative[orbit];
      if (!machine_active[orbit]) continue;
      auto terms = std::move(machine_load[orbit]);
      machine_terms[orbit] = terms;
      double bandwidth = 0;
      for (NodeId l : topo.children(m)) {
        const auto& own = link_load[orbits.of[l]];
        terms.insert(terms.end(), own.begin(), own.end());
        bandwidth += topo.uplink(l).bandwidth / slowest;
        if (!learner_known[orbits.of[l]]) {  // once per orbit: its learners' terms are alike
          learner_terms[orbits.of[l]] = own;
          learner_known[orbits.of[l]] = 1;
        }
      }
      if (pricing) {
        const double price = (*machine_prices)[static_cast<size_t>(m)];
        if (price != 0)
          for (const auto& [col, coefficient] : terms) lp.add_to_objective(col, price * coefficient);
        continue;
      }
      terms.emplace_back(time, -bandwidth);
      machine_row[static_cast<size_t>(m)] = lp.row(std::move(terms), -COIN_DBL_MAX, 0);
    }
    for (const int orbit : orbits.in_node_order) {
      const NodeId n = orbits.representative[orbit];
      if (!separates_learners(topo, n)) continue;
      auto terms = std::move(link_load[orbit]);
      if (pricing) {
        const double price = (*prices)[static_cast<size_t>(n)];
        if (price != 0)
          for (const auto& [col, coefficient] : terms) lp.add_to_objective(col, price * coefficient);
        continue;
      }
      for (const auto& [col, coefficient] : terms)
        total_load.emplace_back(col, coefficient * slowest / topo.uplink(n).bandwidth);
      terms.emplace_back(time, -topo.uplink(n).bandwidth / slowest);
      link_row[static_cast<size_t>(n)] = lp.row(std::move(terms), -COIN_DBL_MAX, 0);
    }
  }
};

// The master's duals as prices: of each link row, and of each machine row (a price on each of
// its learners' links too), scaled so that sum of price x relative bandwidth is 1. Then any mix
// of trees has a busiest link at least its priced load, and a tree whose cheapest priced load is
// below the optimum can lower it. `any` is false where the duals give no prices (degenerate).
struct Prices {
  std::vector<double> links, machines;  // by node
  bool any = false;
  bool on(const Topology& topo, NodeId n) const {
    return links[static_cast<size_t>(n)] > 0 ||
           (topo.is_learner(n) && n != topo.root() && machines[static_cast<size_t>(topo.parent(n))] > 0);
  }
};

Prices prices_of(const Topology& topo, const ShareLp& master, const LinearProgram::Solution& solution,
                 double slowest) {
  Prices prices;
  prices.links.assign(static_cast<size_t>(topo.num_nodes()), 0);
  prices.machines.assign(static_cast<size_t>(topo.num_nodes()), 0);
  // CLP's duals of <= rows are <= 0 in a minimisation; noise of the other sign counts as 0.
  const auto dual = [&](int row) { return std::max(0.0, -solution.row_duals[static_cast<size_t>(row)]); };
  double scale = 0;
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (const int row = master.link_row[static_cast<size_t>(n)]; row >= 0) {
      prices.links[static_cast<size_t>(n)] = dual(row);
      scale += dual(row) * topo.uplink(n).bandwidth / slowest;
    }
    if (const int row = master.machine_row[static_cast<size_t>(n)]; row >= 0) {
      prices.machines[static_cast<size_t>(n)] = dual(row);
      for (NodeId l : topo.children(n)) scale += dual(row) * topo.uplink(l).bandwidth / slowest;
    }
  }
  if (!(scale > 0)) return prices;
  for (double& price : prices.links) price /= scale;
  for (double& price : prices.machines) price /= scale;
  prices.any = true;
  return prices;
}

// What fraction of each active machine's holdings each of its learners takes (ShareLp), by
// learner orbit, the same in every tree: learner l takes beta_l, with beta_l C at most the slack
// of its link row (the LP's optimum holds for any such split).
//
// The holders: learner orbits in order of their uplinks' latency, lowest first, and among
// equals of their slack per learner, largest first, as few as the slack allows (every holder
// is another piece of the schedule, and a root of star ops whose latency is their farthest
// hop's).
//
// Among them, the split that loads the machine's learner links least step by step: with A the
// range the machine reduces at its own step, a learner sends (1 - beta_l) A up at that step and
// receives (k - 1) beta_l A, and at each later step it sends and receives beta_l times what the
// machine does. So the busiest of these links at the machine's step is A max((k - 1) mu, nu)
// and at a later one mu times that step's load, with mu = max beta_l / w_l and
// nu = max (1 - beta_l) / w_l over the machine's learners (a non-holder sends all, 1 / w_l).
// The split minimises the sum over the steps of each step's busiest link direction, these
// links' or, where busier, the rest of the step's (ShareLp::step_terms, other machines' learner
// links aside): the bandwidth term of the unpipelined schedule, and of a pipeline's fill and
// drain, that the split can change. Among equals, these links' own sum; within that, the
// holdings in proportion to the links' bandwidths. Filling the holders in latency order up to
// their slack instead made the first one's link as busy as the LP's optimum over the whole
// schedule, and so the busiest of the steps where it works alone; a faster link took more and
// made those steps slower (docs/whatif.md, "Faster links, slower plans"). For a given split
// the sum only falls as a link gets faster, and a faster learner link only widens its slack.
std::vector<double> machine_splits(const Topology& topo, const Orbits& orbits, const ShareLp& master,
                                   const LinearProgram::Solution& solution, double optimum, double slowest) {
  std::vector<double> split(orbits.representative.size(), 0);
  const auto column = [&](int col) { return solution.columns[static_cast<size_t>(col)]; };
  const auto value = [&](const std::vector<std::pair<int, double>>& terms) {
    double sum = 0;
    for (const auto& [col, coefficient] : terms) sum += coefficient * column(col);
    return sum;
  };
  // Each step's busiest link direction but the split learners' (relative to `slowest`).
  std::vector<double> floors;
  {
    int levels = 0;
    for (const auto& term : master.step_terms) levels = std::max(levels, term.level + 1);
    std::map<int, std::vector<double>> loads;  // link orbit: by level and direction
    for (const auto& term : master.step_terms) {
      auto& load = loads[term.orbit];
      load.resize(2 * static_cast<size_t>(levels), 0.0);
      load[2 * static_cast<size_t>(term.level) + term.down] += term.coefficient * column(term.col);
    }
    floors.assign(static_cast<size_t>(levels), 0.0);
    for (const auto& [orbit, load] : loads) {
      const double bandwidth = topo.uplink(orbits.representative[orbit]).bandwidth / slowest;
      for (size_t i = 0; i < load.size(); ++i) floors[i / 2] = std::max(floors[i / 2], load[i] / bandwidth);
    }
  }
  const auto floor_at = [&](int level) {
    return static_cast<size_t>(level) < floors.size() ? floors[static_cast<size_t>(level)] : 0.0;
  };
  for (NodeId m = 0; m < topo.num_nodes(); ++m) {
    if (master.machine_row[static_cast<size_t>(m)] < 0) continue;
    const double carried = std::max(0.0, value(master.machine_terms[orbits.of[m]]));  // C
    struct Holder {
      int orbit = 0;
      double count = 0;  // learners of the orbit in this machine
      double slack = 0;  // of its link row, per learner
      double cap = 0;    // the most each may take: its slack over C
      double bandwidth = 0;
    };
    std::map<int, Holder> by_orbit;
    for (NodeId l : topo.children(m)) {
      const double load = value(master.learner_terms[orbits.of[l]]);
      Holder& h = by_orbit[orbits.of[l]];
      h.orbit = orbits.of[l];
      h.bandwidth = topo.uplink(l).bandwidth / slowest;
      h.slack = std::max(0.0, optimum * h.bandwidth - load);
      h.cap = carried > 0 ? std::min(1.0, h.slack / carried) : 1.0;
      ++h.count;
    }
    // The lowest latency first, then the largest slack. A learner that holds anything is a root
    // of the star ops above, whose latency is their farthest hop's, so holders are chosen by
    // latency before slack; slack alone handed the holdings to a slower-latency learner once its
    // link was made faster (docs/whatif.md).
    std::vector<Holder> order;
    for (const auto& [orbit, h] : by_orbit) order.push_back(h);
    const auto latency = [&](int orbit) { return topo.uplink(orbits.representative[orbit]).latency; };
    std::sort(order.begin(), order.end(), [&](const Holder& a, const Holder& b) {
      if (latency(a.orbit) != latency(b.orbit)) return latency(a.orbit) < latency(b.orbit);
      if (a.slack != b.slack) return a.slack > b.slack;
      return a.orbit > b.orbit;
    });
    // The machine's steps: A, and by later step (level) what the machine sends up and receives
    // there, over the trees where it is active.
    double whole = 0;
    std::map<int, std::pair<double, double>> later;  // level: (up, down)
    for (const auto& in_tree : master.machine_steps[orbits.of[m]]) {
      const double weight = column(in_tree.weight);
      whole += weight;
      double before = weight;
      for (const auto& step : in_tree.above) {
        const double held = column(step.held);
        auto& [up, down] = later[step.level];
        up += std::max(0.0, before - held);
        down += step.fan_in * held;
        before = held;
      }
    }
    const double fan_in = static_cast<double>(topo.degree(m)) - 1;
    const double floor0 = floor_at(0);
    // The steps' busiest links under mu and nu: each step's floor, or the split's links where
    // busier; and the split's links' own loads summed.
    const auto busiest = [&](double mu, double nu) {
      const double own = whole * std::max(fan_in * mu, nu);
      double floored = std::max(floor0, own), alone = own;
      for (const auto& [level, load] : later) {
        const double h = std::max(load.first, load.second) * mu;
        floored += std::max(floor_at(level), h);
        alone += h;
      }
      return std::pair{floored, alone};
    };
    // The split among the first `holders` of `order`, by position.
    const auto split_among = [&](size_t holders) {
      std::vector<double> beta;
      const std::vector<Holder> chosen(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(holders));
      double senders = 0;  // the slowest non-holder's 1 / w
      for (size_t i = holders; i < order.size(); ++i) senders = std::max(senders, 1 / order[i].bandwidth);
      double room = 0;
      for (const Holder& h : chosen) room += h.cap * h.count;
      if (room <= 1) {
        // Exactly enough slack, or (rounding) not quite: each takes its slack, scaled to sum to 1.
        for (const Holder& h : chosen) beta.push_back(room > 0 ? h.cap / room : 1.0 / topo.degree(m));
        return beta;
      }
      // The largest holding each may take at mu, the least at nu.
      const auto most = [&](const Holder& h, double mu) { return std::min(h.cap, mu * h.bandwidth); };
      const auto least = [&](const Holder& h, double nu) { return std::max(0.0, 1 - nu * h.bandwidth); };
      // The least nu that some split within `most` at mu meets: every holder's least at or
      // below its most, and the leasts summing to 1 at most (a bisection on the sum, decreasing
      // in nu).
      double nu_sum = 0;
      {
        double lo = 0, hi = 0;
        for (const Holder& h : chosen) hi = std::max(hi, 1 / h.bandwidth);
        const auto sum_least = [&](double nu) {
          double sum = 0;
          for (const Holder& h : chosen) sum += h.count * least(h, nu);
          return sum;
        };
        for (int i = 0; i < 100 && sum_least(lo) > 1; ++i) {
          const double mid = 0.5 * (lo + hi);
          (sum_least(mid) > 1 ? lo : hi) = mid;
        }
        nu_sum = sum_least(lo) > 1 ? hi : lo;
      }
      const auto least_nu = [&](double mu) {
        double nu = std::max(senders, nu_sum);
        for (const Holder& h : chosen) nu = std::max(nu, (1 - most(h, mu)) / h.bandwidth);
        return nu;
      };
      const auto sum_most = [&](double mu) {
        double sum = 0;
        for (const Holder& h : chosen) sum += h.count * most(h, mu);
        return sum;
      };
      // The least mu at which the holders can take everything.
      double mu_lo = 0, mu_hi = 0;
      for (const Holder& h : chosen) mu_hi = std::max(mu_hi, h.cap / h.bandwidth);
      for (int i = 0; i < 100; ++i) {
        const double mid = 0.5 * (mu_lo + mu_hi);
        (sum_most(mid) >= 1 ? mu_hi : mu_lo) = mid;
      }
      const double mu_least = mu_hi;
      // Both sums are convex and piecewise linear in mu: their least values are at mu_least or
      // where a piece ends. The candidates: where a holder's most meets its cap, where
      // (k - 1) mu or a later step's load meets a piece of least_nu or a floor.
      std::vector<double> candidates{mu_least};
      const auto candidate = [&](double mu) {
        if (mu > mu_least && std::isfinite(mu)) candidates.push_back(mu);
      };
      std::vector<double> nu_levels{senders, nu_sum};  // least_nu's constant pieces
      for (const Holder& h : chosen) {
        candidate(h.cap / h.bandwidth);
        nu_levels.push_back((1 - h.cap) / h.bandwidth);
        if (whole > 0) candidate(1 / h.bandwidth - floor0 / whole);  // least_nu meets the floor
        if (fan_in > 0) candidate(1 / h.bandwidth / (fan_in + 1));  // (k - 1) mu meets 1 / w - mu
      }
      if (fan_in > 0) {
        for (double nu : nu_levels) candidate(nu / fan_in);
        if (whole > 0) candidate(floor0 / whole / fan_in);
      }
      for (const auto& [level, load] : later)
        if (const double h = std::max(load.first, load.second); h > 0) candidate(floor_at(level) / h);
      std::sort(candidates.begin(), candidates.end());
      double mu = candidates.front();
      auto best = busiest(mu, least_nu(mu));
      for (double c : candidates) {
        const auto at = busiest(c, least_nu(c));
        if (at.first < best.first * (1 - 1e-12) ||
            (at.first <= best.first * (1 + 1e-12) && at.second < best.second * (1 - 1e-12))) {
          best = at;
          mu = c;
        }
      }
      const double nu = least_nu(mu);
      // Within [least, most], in proportion to the bandwidths as far as the bounds allow.
      const auto take = [&](const Holder& h, double lambda) {
        return std::clamp(lambda * h.bandwidth, std::min(least(h, nu), most(h, mu)), most(h, mu));
      };
      const auto sum_take = [&](double lambda) {
        double sum = 0;
        for (const Holder& h : chosen) sum += h.count * take(h, lambda);
        return sum;
      };
      double lambda_lo = 0, lambda_hi = mu;
      for (int i = 0; i < 100; ++i) {
        const double mid = 0.5 * (lambda_lo + lambda_hi);
        (sum_take(mid) >= 1 ? lambda_hi : lambda_lo) = mid;
      }
      const double total = sum_take(lambda_hi);
      for (const Holder& h : chosen) beta.push_back(total > 0 ? take(h, lambda_hi) / total : 1.0 / topo.degree(m));
      return beta;
    };
    // The fewest holders their slack allows. (Taking more wherever that lowered the sum made
    // more steps slower, by the latency of their roots, than it saved: on the what-if property
    // test's seeds, more upgrades predicted slower.)
    size_t holders = 0;
    for (double room = 0; holders < order.size() && room < 1; ++holders) room += order[holders].cap * order[holders].count;
    const std::vector<double> beta = split_among(holders);
    for (size_t i = 0; i < holders; ++i) split[order[i].orbit] = beta[i];
  }
  return split;
}

// A share as the schedule takes it: within [0, 1], and 0 where it is the solver's noise (CLP
// leaves columns that should be 0 at about 1e-7; holdings of 1.2e-6 were seen too). A holding
// that small would still be an op of its own, a piece a few bytes long with a whole hop's
// latency: a link made faster once gave a machine 9.6e-8 of the vector that way and the
// pipelined schedule 40% more time. Dropping one moves a plan's time by parts in a million.
double without_noise(double share) {
  constexpr double kNoise = 1e-5;
  return share < kNoise ? 0.0 : std::min(share, 1.0);
}

}  // namespace

uint64_t tree_lp_columns(const Topology& topo) {
  if (topo.num_learners() < 2) return 0;
  const Orbits orbits = orbits_of(topo);
  const auto machine = machines_of(topo);
  return 1 + tree_columns(topo, orbits, std::vector<char>(static_cast<size_t>(topo.num_nodes()), 0), &machine);
}

BandwidthShares bandwidth_shares(const Topology& topo, ShareSolve how, double incast_loss) {
  const double incast = 1 + incast_loss;
  BandwidthShares shares;
  if (topo.num_learners() < 2) return shares;
  double slowest = 0;
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (separates_learners(topo, n))
      slowest = slowest == 0 ? topo.uplink(n).bandwidth : std::min(slowest, topo.uplink(n).bandwidth);

  // Column generation over the candidate trees: the master starts with the tree itself; its
  // link duals price every other tree (the pricing LP: that tree alone, minimising the priced
  // load), and a tree enters when it would lower the master's optimum. By LP duality the loop
  // ends at the optimum of the LP over all candidates, usually after one small solve: the
  // master stops at once when it meets the floor (a lower bound on every schedule).
  const Orbits orbits = orbits_of(topo);
  const auto machine = machines_of(topo);
  const LatencyReach reach = latency_reach(topo, orbits);
  std::vector<int> orbit_sizes(orbits.representative.size(), 0);
  for (NodeId n = 0; n < topo.num_nodes(); ++n) ++orbit_sizes[orbits.of[n]];
  auto candidates = candidate_trees(topo, orbits, how == ShareSolve::all_trees);
  const double floor_per_byte = cost_floor(topo).per_byte;
  std::vector<char> in_master(candidates.size(), 0);
  for (size_t t = 0; t < candidates.size(); ++t)
    if (std::none_of(candidates[t].begin(), candidates[t].end(), [](char c) { return c != 0; }))
      in_master[t] = 1;  // the tree itself
  if (how == ShareSolve::all_trees) in_master.assign(candidates.size(), 1);
  std::set<int> proposed;  // orbits whose transparent tree the duals have proposed
  std::ptrdiff_t switches = 0;  // what the flat tree makes transparent
  for (NodeId n = 0; n < topo.num_nodes(); ++n) switches += n != topo.root() && !topo.is_learner(n);
  for (;;) {
    std::vector<const std::vector<char>*> trees;
    std::vector<size_t> tree_index;
    for (size_t t = 0; t < candidates.size(); ++t)
      if (in_master[t]) {
        trees.push_back(&candidates[t]);
        tree_index.push_back(t);
      }
    ShareLp master(topo, orbits, machine, slowest, incast, trees, nullptr, nullptr, &reach, &orbit_sizes);
    auto solution = master.lp.minimise();
    const double optimum = solution.columns[static_cast<size_t>(master.time)];
    bool entered = false;
    if (optimum / slowest > floor_per_byte * (1 + 1e-9)) {
      const Prices prices = prices_of(topo, master, solution, slowest);
      if (prices.any) {
        const auto priced = [&](NodeId n) { return prices.on(topo, n); };
        // A tree differs from the tree itself only under the nearest active ancestor A of each
        // switch it makes transparent: there the switch's children hang from A instead, and no
        // other link's load changes form. The tree itself prices at the optimum or above (it is
        // in the master), so a tree whose changes reach no priced link cannot lower it, and
        // needs no pricing LP (each one is the size of the whole LP).
        std::vector<char> priced_inside(static_cast<size_t>(topo.num_nodes()), 0);  // below n's uplink
        for (int level = 0; level < topo.num_levels(); ++level)
          for (NodeId n : topo.nodes_at_level(level))
            for (NodeId c : topo.children(n))
              if (priced(c) || priced_inside[static_cast<size_t>(c)])
                priced_inside[static_cast<size_t>(n)] = 1;
        const auto could_lower = [&](const std::vector<char>& tree) {
          for (NodeId n = 0; n < topo.num_nodes(); ++n) {
            if (!tree[static_cast<size_t>(n)] || !can_be_transparent(topo, n)) continue;
            NodeId above = topo.parent(n);
            while (passes_through(topo, tree, above)) above = topo.parent(above);
            if (priced_inside[static_cast<size_t>(above)]) return true;
          }
          return false;
        };
        const auto lowers = [&](const std::vector<char>& tree) {
          if (!could_lower(tree)) return false;
          const ShareLp pricing(topo, orbits, machine, slowest, incast, {&tree}, &prices.links, &prices.machines);
          try {
            return pricing.lp.minimise().objective < optimum * (1 - 1e-7);
          } catch (const std::logic_error&) {
            return true;  // a pricing LP CLP cannot solve lets its tree in: always safe
          }
        };
        for (size_t t = 0; t < candidates.size(); ++t)
          if (!in_master[t] && lowers(candidates[t])) in_master[t] = entered = true;
        // Trees the list above left out (it keeps the most promising by bandwidth ratio alone):
        // the two switches nearest above each binding link, made transparent. Their children
        // then no longer receive partial sums there, which is the load a binding link below
        // them can shed; a mix of such trees meets the floor where one tree cannot (three
        // equal links at one switch: 4/3 of a link's time mixed, 3/2 combined).
        if (!entered && how == ShareSolve::column_generation) {
          uint64_t master_columns = 1;
          for (const auto* tree : trees) master_columns += tree_columns(topo, orbits, *tree);
          for (NodeId n = 0; n < topo.num_nodes(); ++n) {
            if (!priced(n)) continue;
            int found = 0;
            for (NodeId a = topo.parent(n); a != topo.root() && found < 2; a = topo.parent(a)) {
              if (!can_be_transparent(topo, a)) continue;
              ++found;
              if (!proposed.insert(orbits.of[a]).second) continue;
              auto tree = orbit_transparent(topo, orbits, orbits.of[a]);
              if (std::find(candidates.begin(), candidates.end(), tree) != candidates.end()) continue;
              const uint64_t more = tree_columns(topo, orbits, tree);
              if (master_columns + more > kMaxShareLpColumns || !lowers(tree)) continue;
              master_columns += more;
              candidates.push_back(std::move(tree));
              in_master.push_back(1);
              entered = true;
            }
          }
        }
        // Each tree above sheds load at one place. Where links bind at two places, a tree that
        // helps one leaves the other's load as it was, and no such tree lowers the optimum: the
        // master mixes one helper per place, each for part of the vector. The tree transparent
        // wherever any tree the master mixes is (the flat tree aside) helps at every place at
        // once, for the whole vector.
        if (!entered && how == ShareSolve::column_generation) {
          std::vector<char> united(static_cast<size_t>(topo.num_nodes()), 0);
          int parts = 0;
          uint64_t master_columns = 1;
          for (size_t i = 0; i < trees.size(); ++i) {
            master_columns += tree_columns(topo, orbits, *trees[i]);
            if (!(solution.columns[static_cast<size_t>(master.columns[i].weight)] > 1e-9)) continue;
            const auto& tree = *trees[i];
            const auto transparent = std::count(tree.begin(), tree.end(), char{1});
            if (transparent == 0 || transparent == switches) continue;  // the tree itself, flat
            for (size_t n = 0; n < tree.size(); ++n) united[n] = united[n] || tree[n];
            ++parts;
          }
          if (parts >= 2 && std::find(candidates.begin(), candidates.end(), united) == candidates.end()) {
            const uint64_t more = tree_columns(topo, orbits, united);
            if (master_columns + more <= kMaxShareLpColumns && lowers(united)) {
              candidates.push_back(std::move(united));
              in_master.push_back(1);
              entered = true;
            }
          }
        }
      } else {
        // No prices to go by (a degenerate dual): every candidate enters.
        for (size_t t = 0; t < candidates.size(); ++t)
          if (!in_master[t]) in_master[t] = entered = true;
      }
    }
    if (entered) continue;

    // Among the optima (the LP is degenerate: many share the busiest link's time), the one that
    // loads the links least in all, each link's load over its bandwidth: CLP's vertex otherwise
    // depends on how the rows happen to be written, and the unpipelined base's steps and the
    // latency of the pieces with it (the 16k benchmark tree: 8 B 252 -> 202 us, 64 KiB 383 ->
    // 326 us predicted; docs/results/planning-speed-log.md).
    // The latency the holders put on the star ops (ShareLp::latency_load) counts first, the
    // load in all a thousandth as much: one solve (a second, lexicographic one cost the 16k
    // benchmark tree about a third more planning time).
    master.lp.clear_objective();
    master.lp.set_upper(master.time, optimum * (1 + 1e-9));
    for (const auto& [col, coefficient] : master.latency_load) master.lp.add_to_objective(col, coefficient);
    const double load_weight = master.latency_load.empty() ? 1.0 : 1e-3;
    for (const auto& [col, coefficient] : master.total_load) master.lp.add_to_objective(col, load_weight * coefficient);
    try {
      solution = master.lp.minimise();
    } catch (const std::logic_error&) {
      // Keep the first optimum: it is as good by the LP's own measure.
    }
    shares.per_byte = optimum / slowest;
    const std::vector<double> split = machine_splits(topo, orbits, master, solution, optimum, slowest);
    for (size_t i = 0; i < trees.size(); ++i) {
      const double weight = solution.columns[static_cast<size_t>(master.columns[i].weight)];
      if (!(weight > 1e-9)) continue;
      ShareClass& share = shares.classes.emplace_back();
      share.transparent = candidates[tree_index[i]];
      share.weight = weight;
      share.held.resize(topo.num_nodes());
      for (NodeId u = 0; u < topo.num_nodes(); ++u)
        for (int col : master.columns[i].held[orbits.of[u]])
          share.held[u].push_back(without_noise(solution.columns[static_cast<size_t>(col)] / weight));
      for (NodeId u = 0; u < topo.num_nodes(); ++u) {
        if (!in_active_machine(topo, machine, share.transparent, u)) continue;
        const double beta = split[orbits.of[u]];
        auto& held = share.held[u];
        held = {without_noise(beta)};
        for (double h : share.held[topo.parent(u)]) held.push_back(without_noise(beta * h));
      }
    }
    break;
  }
  // Renormalise the weights the solver left at noise level out.
  double total = 0;
  for (const auto& share : shares.classes) total += share.weight;
  for (auto& share : shares.classes) share.weight /= total;
  return shares;
}

}  // namespace flexplan
