// From a topology to a plan: build every candidate algorithm's schedule, price each with the
// general evaluator as a line T(n) = latency + per_byte * n, and keep for each message-size
// range the schedule whose line is lowest there (the lower envelope of the lines over n >= 0).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/flexreduce.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct PlanOptions {
  std::vector<std::string> algorithms;  // empty = all of algorithm_names()
  CostParams cost{};
  // Told about each phase as it ends ("flexreduce: 1.2M ops built in 0.4 s") and about
  // algorithms skipped for size.
  std::function<void(std::string_view)> progress{};
};

ir::Plan build_plan(const Topology&, const PlanOptions&);

// What build_plan weighed, for the command line's summary. Ring, BlueConnect's ring fallback
// and hierarchical have exact closed forms (tested equal to the evaluator), so they are priced
// without building and built only when they win a size range; the evaluator then re-prices
// them as a check. FlexReduce and BlueConnect proper are built and priced by the evaluator.
struct Candidate {
  std::string algorithm;
  bool priced = false;    // has a cost line (false: too big to build and no closed form)
  bool built = false;     // its schedule was built (it is in the plan, or needed the evaluator)
  std::string priced_by;  // "evaluator" or "closed form"
  std::string left_out_because;  // non-empty: not in the race although it might have won
  ScheduleSize size;      // actual when built, estimated otherwise
  LinearCost cost;        // when priced
  bool racing() const { return priced && left_out_because.empty(); }
};

struct PlanReport {
  ir::Plan plan;
  std::vector<Candidate> candidates;                // in the order requested
  std::optional<ReduceCallStats> flexreduce_calls;  // when FlexReduce was built
};
PlanReport build_plan_report(const Topology&, const PlanOptions&);

// The lower envelope of lines over message sizes n >= 0 in whole bytes: the pieces
// [min_bytes, max_bytes) on which each line is lowest, in order; the last is unbounded. Lines
// equal to within a relative 1e-9 count as equal, and ties go to the lower index.
struct EnvelopePiece {
  size_t line = 0;
  uint64_t min_bytes = 0;
  std::optional<uint64_t> max_bytes;
};
std::vector<EnvelopePiece> lower_envelope(std::span<const LinearCost> lines);

}  // namespace flexplan
