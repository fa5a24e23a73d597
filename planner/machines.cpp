#include "planner/machines.hpp"

#include <algorithm>

namespace flexplan {

std::vector<Machine> machines_of(const Topology& topo) {
  std::vector<Machine> machines;
  std::vector<int> index_of(topo.num_nodes(), -1);  // machine node -> index in `machines`
  for (int rank : topo.learners_under(topo.root())) {
    const NodeId node = topo.parent(topo.learner_node(rank));
    if (index_of[node] < 0) {
      index_of[node] = static_cast<int>(machines.size());
      machines.emplace_back();
    }
    machines[index_of[node]].learners.push_back(rank);
  }
  for (Machine& machine : machines)
    machine.leader = *std::min_element(machine.learners.begin(), machine.learners.end());
  return machines;
}

}  // namespace flexplan
