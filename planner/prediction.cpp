#include "planner/prediction.hpp"

#include <fmt/core.h>

#include "planner/algorithms.hpp"

namespace flexplan {
namespace {

std::function<double(double)> line(LinearCost cost) {
  return [cost](double bytes) { return cost.at(bytes); };
}

}  // namespace

AlgorithmPrediction predict_algorithm(const Topology& topo, std::string_view name,
                                      const CostParams& params) {
  AlgorithmPrediction prediction;
  prediction.algorithm = std::string(name);
  const bool falls_back = name == "blueconnect" && blueconnect_falls_back(topo);
  if (falls_back) prediction.note = "not symmetric: falls back to the ring";

  const auto size = estimate_schedule_size(topo, name);
  if (schedule_fits_limits(size)) {
    prediction.method = "evaluator";
    prediction.time = line(evaluate_schedule(topo, plan_algorithm(topo, name), params));
    return prediction;
  }
  const std::string too_big = fmt::format("~{} ops, too many to build", size.ops);
  prediction.note = prediction.note.empty() ? too_big : prediction.note + "; " + too_big;
  if (name == "ring" || falls_back) {
    prediction.method = "Eq. 2";  // exact for the depth-first ring
    prediction.time = line(ring_cost(topo, params));
  } else if (name == "blueconnect" && topo.is_symmetric()) {
    prediction.method = "Eq. 3";
    prediction.time = line(blueconnect_cost(topo, params));
  } else if (name == "hierarchical") {
    prediction.method = "closed form";  // exact for plan_hierarchical
    prediction.time = line(hierarchical_cost(topo, params));
  } else if (name == "flexreduce") {
    prediction.method = "Eq. 6";
    prediction.time = [&topo, params](double bytes) { return flexreduce_time(topo, bytes, params); };
  } else {
    prediction.method = "none";  // BlueConnect with even fan-outs but uneven links
  }
  return prediction;
}

std::string describe_topology(const Topology& topo) {
  return fmt::format("{} learner{}, {} level{}, {}", topo.num_learners(),
                     topo.num_learners() == 1 ? "" : "s", topo.num_levels(),
                     topo.num_levels() == 1 ? "" : "s",
                     topo.is_symmetric() ? "symmetric" : "asymmetric");
}

}  // namespace flexplan
