// Prices the racing algorithms on one topology of a sweep, reusing the work between points:
// schedules of algorithms that ignore link figures are built once per tree shape and only
// re-priced when bandwidths or latencies change; closed forms are priced without building.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "topology/topology.hpp"
#include "whatif/link_traffic.hpp"

namespace flexplan::whatif {

struct AlgorithmPrice {
  std::string algorithm;
  ScheduleCost cost;
  std::string priced_by;  // "closed form" or "evaluator"
};

class Pricer {
 public:
  // Empty `algorithms`: every unpipelined row of the table that is not on request only.
  Pricer(std::vector<std::string> algorithms, CostParams cost);

  // The suitable algorithms' prices, in table (or requested) order; algorithms whose schedule
  // exceeds the planner's size limits and that have no closed form are left out, and named in
  // `left_out` once.
  std::vector<AlgorithmPrice> price(const Topology&);
  // Bytes per message byte on every link under the algorithm's schedule.
  LinkTraffic traffic(const Topology&, const std::string& algorithm);

  const std::vector<std::string>& left_out() const { return left_out_; }
  const CostParams& cost_params() const { return cost_; }
  size_t schedules_built() const { return built_; }

 private:
  const ir::Schedule* schedule(const Topology&, const AlgorithmChoice&);
  std::string cache_key(const Topology&, const AlgorithmChoice&) const;

  std::vector<AlgorithmChoice> choices_;
  CostParams cost_;
  // The shape key of the last topology asked about, to avoid recomputing it per algorithm.
  const Topology* keyed_ = nullptr;
  uint64_t keyed_hash_ = 0;
  std::string shape_;
  std::map<std::string, std::shared_ptr<ir::Schedule>> schedules_;  // by cache_key
  std::map<std::string, LinkTraffic> traffic_;                       // by cache_key
  std::vector<std::string> left_out_;
  size_t built_ = 0;
};

}  // namespace flexplan::whatif
