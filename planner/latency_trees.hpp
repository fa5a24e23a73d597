// The latency rows' builders (latency_trees.cpp): direct exchange, direct among machine leaders,
// and binary trees of the leaders rooted at the tree's centre, one or two of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithms.hpp"
#include "topology/topology.hpp"

namespace flexplan {

ir::Schedule plan_direct(const Topology&);
ir::Schedule plan_leader_direct(const Topology&);
ir::Schedule plan_centre_tree(const Topology&);
ir::Schedule plan_double_tree(const Topology&);

// `ranks` with the one of least eccentricity (most links to another of them) first, the rest by
// their links from it (ties in the given order). Links, not latencies: the shape depends on the
// tree's structure only (whatif's in-place sweeps keep schedules while link values change).
std::vector<int32_t> by_distance_from_centre(const Topology&, const std::vector<int32_t>& ranks);

// Upper bounds of the schedules' sizes: the machines' star ops plus, among the leaders, the
// direct exchange or `trees` binary heaps.
ScheduleSize latency_tree_size(const Topology&, bool direct_among_leaders, uint64_t trees);
ScheduleSize direct_size(const Topology&);
// The direct exchanges are left out past this many ranks: a root's P - 1 hops one after another
// cost 0.7 ms there with the measured hop overhead, never less than a tree.
inline constexpr int kMaxDirectRanks = 1024;
std::string direct_unsuitable(const Topology&);
std::string leader_direct_unsuitable(const Topology&);

}  // namespace flexplan
