// Predicted all-reduce time per algorithm at any size, for `flexplan predict`.
#include "planner/prediction.hpp"

#include <fmt/core.h>

#include "planner/algorithm_table.hpp"
#include "planner/critical_path.hpp"

namespace flexplan {
namespace {

std::function<double(double)> curve(ScheduleCost cost) {
  return [cost = std::move(cost)](double bytes) { return cost.at(bytes); };
}

}  // namespace

AlgorithmPrediction predict_algorithm(const Topology& topo, std::string_view name,
                                      const CostParams& params) {
  AlgorithmPrediction prediction;
  const auto choice = find_algorithm(name);
  prediction.algorithm = choice.name();
  if (choice.row->note) prediction.note = choice.row->note(topo);
  if (choice.row->unsuitable) {
    const std::string why = choice.row->unsuitable(topo);
    if (!why.empty()) {
      prediction.method = "none";
      prediction.note = why;
      return prediction;
    }
  }

  const auto size = choice.estimate(topo);
  if (!size || schedule_fits_limits(*size)) {
    try {
      const auto schedule = choice.build_compact(topo, params);
      if (schedule_fits_limits(measured_size(schedule))) {
        // The rows the planner prices by their critical path are priced so here too.
        prediction.method = choice.row->critical_path ? "critical path" : "evaluator";
        ScheduleCost cost = choice.row->critical_path ? critical_path_cost(topo, schedule, params)
                                                      : evaluate_schedule(topo, schedule, params);
        cost.busy_floor = host_busy_floor(lowered_hop_count(schedule), params);  // as the planner's
        prediction.time = curve(std::move(cost));
        return prediction;
      }
    } catch (const ScheduleBeyondLimits&) {
      // Too big to build; priced below as such.
    }
  }
  const std::string too_big = size ? fmt::format("~{} ops, too many to build", size->ops)
                                   : std::string("too many ops to price");
  prediction.note = prediction.note.empty() ? too_big : prediction.note + "; " + too_big;
  if (auto closed = choice.closed_form(topo, params)) {
    prediction.method = "closed form";  // exact for the schedule
    prediction.time = curve(std::move(*closed));
  } else if (choice.slices == 1 && choice.row->model != nullptr &&
             choice.row->model(topo, 0, params) >= 0) {
    prediction.method = std::string(choice.row->model_name);
    const auto model = choice.row->model;
    prediction.time = [&topo, params, model](double bytes) { return model(topo, bytes, params); };
  } else {
    prediction.method = "none";
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
