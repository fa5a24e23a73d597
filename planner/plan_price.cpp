// The plan's predicted time per size (plan_price.hpp).
#include "planner/plan_price.hpp"

#include <stdexcept>

#include <fmt/core.h>

namespace flexplan {

const PlanPrice::Range& PlanPrice::at(uint64_t bytes) const {
  for (const Range& range : ranges)
    if (bytes >= range.min_bytes && (!range.max_bytes || bytes < *range.max_bytes)) return range;
  throw std::logic_error(fmt::format("plan price: no range holds {} bytes", bytes));
}

PlanPrice plan_price(const PlanReport& report) {
  PlanPrice price;
  for (const PlanRange& range : report.ranges) {
    const Candidate& winner = report.candidates.at(range.candidate);
    price.ranges.push_back({winner.algorithm, range.min_bytes, range.max_bytes, winner.cost, range.kept});
  }
  price.kept = report.kept;
  for (const Candidate& candidate : report.candidates) {
    if (candidate.racing())
      price.racing.emplace_back(candidate.algorithm, candidate.cost);
    else if (!candidate.priced || candidate.left_out_because.rfind("cannot win", 0) != 0)
      price.left_out.push_back(candidate.algorithm);
  }
  return price;
}

PlanPrice price_plan(const Topology& topo, PlanOptions options) {
  options.build_winners = false;
  options.compact_pipelines = true;  // as the plan command: pipelines are priced compact
  options.collectives = {ir::Collective::AllReduce};
  return plan_price(build_plan_report(topo, options));
}

}  // namespace flexplan
