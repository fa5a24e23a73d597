// Pictures of what a schedule does: the predicted timeline as a Chrome trace / Perfetto JSON
// (a row per rank and per busy link direction, each transfer a slice), and a Graphviz diagram
// of a small schedule's steps. docs/codegen.md shows both.
#pragma once

#include <cstdint>
#include <stdexcept>
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

// A schedule too large to draw.
class TooLargeToDraw : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
inline constexpr size_t kMaxDrawnHops = 400;

// Graphviz: one cluster per step (phase and level), a node per rank taking part, an edge per
// hop labelled with its op and unit range (reduce hops blue, broadcast hops green). Throws
// TooLargeToDraw beyond kMaxDrawnHops hops.
std::string dot_graph(const ir::Plan& plan, size_t index);

}  // namespace flexplan::codegen
