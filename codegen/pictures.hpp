// Pictures of what a schedule does: the predicted timeline as a Chrome trace / Perfetto JSON
// (a row per rank and per busy link direction, each transfer a slice), and a Graphviz diagram
// of a schedule's steps (for a large one, of what moves between machines). docs/codegen.md
// shows both.
#pragma once

#include <cstdint>
#include <string>

#include "ir/plan.hpp"
#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan::codegen {

// Timeline of schedule `index` of `plan` moving a message of `bytes` bytes over `topology`,
// priced by the cost model (evaluate_steps, StepCost::at with params.chunk_bytes): steps follow
// each other, each as long as the model prices it. On a rank's row every transfer it sends or receives spans its step; on a link
// direction's row the transfers crossing it are laid end to end, each as long as its bytes take
// at the link's bandwidth, so the row shows how busy the link is in each step. Throws
// std::invalid_argument when the topology is not the plan's (hash or learner count).
std::string trace_json(const ir::Plan& plan, size_t index, const Topology& topology, uint64_t bytes,
                       const CostParams& params = {});

// Above this many hops a diagram of single hops is unreadable, and dot_graph groups learners by
// machine.
inline constexpr size_t kMaxDrawnHops = 400;

// Graphviz. Up to kMaxDrawnHops hops: one cluster per step (phase and level), a node per rank
// taking part, an edge per hop labelled with its op and unit range (reduce hops blue, broadcast
// hops green). Above: a node per machine (a learner's parent in the tree, from the plan's rank
// names; a node per rank when it names none), an edge per direction and kind summing its hops
// and the data they carry in vectors (1 = the whole message), hops within a machine in its
// node, and the graph's label saying so. The schedule may be held compact.
std::string dot_graph(const ir::Plan& plan, size_t index);

}  // namespace flexplan::codegen
