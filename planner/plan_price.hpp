// The predicted all-reduce time of the plan the plan command writes, per message size: one
// function behind the plan command's table, `predict`'s plan column and every answer of
// `whatif` (its points, upgrade candidates and steps), so that they cannot disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/cost_model.hpp"
#include "planner/plan_builder.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct PlanPrice {
  struct Range {
    std::string algorithm;  // "flexreduce@4"
    uint64_t min_bytes = 0;
    std::optional<uint64_t> max_bytes;  // none: unbounded
    ScheduleCost cost;                  // the winner's price, as raced
    std::optional<size_t> kept;         // its schedule's base in `kept`, where kept
  };
  std::vector<Range> ranges;  // in order, covering every size
  // Every candidate that raced (priced and not left out), in the order raced, with its price:
  // the alternatives a report sets beside the plan.
  std::vector<std::pair<std::string, ScheduleCost>> racing;
  // Candidates left out of the race for their size (too big to build or to price), not those
  // that could not win.
  std::vector<std::string> left_out;
  // What a re-plan from this plan races again (PlanReport::kept, PlanOptions::kept).
  std::vector<KeptSchedule> kept;

  // The range serving an n-byte all-reduce, and the plan's predicted time for it.
  const Range& at(uint64_t bytes) const;
  double time(uint64_t bytes) const { return at(bytes).cost.at(static_cast<double>(bytes)); }
};

// From a report of build_plan_report: what the plan command prints.
PlanPrice plan_price(const PlanReport&);

// The same race as `flexplan TOPOLOGY -o plan.bin` with these options, without building the
// winners' schedules (PlanOptions::build_winners; all-reduce only): plan_price of it.
PlanPrice price_plan(const Topology&, PlanOptions);

}  // namespace flexplan
