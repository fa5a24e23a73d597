// Predicted all-reduce time per algorithm at any message size, for the command line: from the
// general evaluator when the schedule is small enough to build, else from the algorithm's exact
// closed form, else from its model (the paper's Eq. 6 for FlexReduce, Eq. 3 for BlueConnect on
// symmetric trees), else none. The returned function refers to the topology, which must outlive
// it.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct AlgorithmPrediction {
  std::string algorithm;
  std::string method;                        // "evaluator", "Eq. 2", ... or "none"
  std::string note;                          // why a closed form was used, or fell back
  std::function<double(double bytes)> time;  // seconds; empty when there is no prediction
};

AlgorithmPrediction predict_algorithm(const Topology&, std::string_view name,
                                      const CostParams& = {});

// "5 learners, 2 levels, asymmetric"
std::string describe_topology(const Topology&);

}  // namespace flexplan
