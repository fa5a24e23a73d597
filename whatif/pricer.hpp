// Prices one topology of a sweep as the plan command plans it (planner/plan_price.hpp: the
// same race, pipelined variants included), and counts the link traffic of a chosen algorithm,
// reusing the schedules walked for traffic between points of one tree shape.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "planner/plan_price.hpp"
#include "topology/topology.hpp"
#include "whatif/link_traffic.hpp"

namespace flexplan::whatif {

class Pricer {
 public:
  // `algorithms` as the plan command's --algorithms: empty is its default race (every suitable
  // row, with pipelined variants); one name alone forces it. Named rows that do not suit a
  // point's tree are left out there (the plan command would refuse the tree). `leave_out`: rows
  // the default race leaves out (PlanOptions::leave_out).
  Pricer(std::vector<std::string> algorithms, CostParams cost, std::vector<std::string> leave_out = {});

  // The plan the plan command would write for this topology, priced (price_plan), re-planning
  // from the plan whose schedules `from` keeps (its --from; ignored where `algorithms` names
  // the candidates).
  PlanPrice price(const Topology&, const std::vector<KeptSchedule>& from = {});
  // Bytes per message byte on every link under the algorithm's schedule. A pipelined variant
  // ("flexreduce@4") carries its base's bytes, slice by slice: the base is walked.
  LinkTraffic traffic(const Topology&, const std::string& algorithm);
  // The same for the schedule `price`'s plan uses for `bytes` (a kept one from its base).
  LinkTraffic traffic(const Topology&, const PlanPrice& price, uint64_t bytes);

  // Unpipelined candidates left out for their size somewhere (PlanPrice::left_out), and named
  // algorithms that did not suit some point's tree.
  const std::vector<std::string>& left_out() const { return left_out_; }
  const CostParams& cost_params() const { return cost_; }
  size_t schedules_built() const { return built_; }
  size_t plans_priced() const { return priced_; }

 private:
  const ir::Schedule* schedule(const Topology&, const AlgorithmChoice&);
  std::string cache_key(const Topology&, const AlgorithmChoice&) const;
  void note_left_out(const std::string& name);

  std::vector<std::string> algorithms_;
  CostParams cost_;
  std::vector<std::string> leave_out_rows_;
  // The shape key of the last topology asked about, to avoid recomputing it per algorithm.
  const Topology* keyed_ = nullptr;
  uint64_t keyed_hash_ = 0;
  std::string shape_;
  std::map<std::string, std::shared_ptr<ir::Schedule>> schedules_;  // by cache_key
  std::map<std::string, LinkTraffic> traffic_;                       // by cache_key
  std::vector<std::string> left_out_;
  size_t built_ = 0;
  size_t priced_ = 0;
};

}  // namespace flexplan::whatif
