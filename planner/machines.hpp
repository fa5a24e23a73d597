// Machines as the hierarchical algorithm sees them: the parents of learners, each with its
// learners. Shared by the schedule (hierarchical.cpp), its closed-form price (closed_forms.cpp)
// and its size estimate (algorithm_registry.cpp), which must all agree on the grouping.
#pragma once

#include <cstdint>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan {

struct Machine {
  std::vector<int32_t> learners;  // in depth-first order of the tree
  int32_t leader = -1;            // the lowest rank among them
};

// Every machine once, in depth-first order of the tree.
std::vector<Machine> machines_of(const Topology&);

}  // namespace flexplan
