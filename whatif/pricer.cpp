// Pricing a sweep's topologies as the plan command plans them (pricer.hpp).
#include "whatif/pricer.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "planner/algorithms.hpp"
#include "whatif/editable_tree.hpp"

namespace flexplan::whatif {
namespace {

// The rows whose schedules follow the link figures (shares from bandwidths; the switch trees'
// roots by bandwidth and their centre by latency): cached per topology, not per shape.
bool reads_link_figures(const AlgorithmChoice& choice) {
  return choice.row->name == "flexreduce-bw" || choice.row->name == "chain-bw" ||
         choice.row->name.starts_with("switch-");
}

}  // namespace

Pricer::Pricer(std::vector<std::string> algorithms, CostParams cost, std::vector<std::string> leave_out)
    : algorithms_(std::move(algorithms)), cost_(cost), leave_out_rows_(std::move(leave_out)) {
  for (const auto& name : algorithms_) find_algorithm(name);  // unknown names throw here
}

void Pricer::note_left_out(const std::string& name) {
  if (std::find(left_out_.begin(), left_out_.end(), name) == left_out_.end()) left_out_.push_back(name);
}

PlanPrice Pricer::price(const Topology& topo, const std::vector<KeptSchedule>& from) {
  PlanOptions options;
  if (algorithms_.empty()) options.kept = from;  // (copies share their steps)
  options.cost = cost_;
  options.leave_out = leave_out_rows_;
  // The sweep runs its own worker threads; the planner's helper thread would only add a
  // thread start per upgrade candidate (same plan either way, plan_builder.hpp).
  options.prepare_bases_in_parallel = false;
  for (const auto& name : algorithms_) {
    const AlgorithmChoice choice = find_algorithm(name);
    if (choice.row->unsuitable && !choice.row->unsuitable(topo).empty()) {
      note_left_out(name);
      continue;
    }
    options.algorithms.push_back(name);
  }
  if (!algorithms_.empty() && options.algorithms.empty())
    throw std::runtime_error(fmt::format("none of the algorithms asked for suits tree '{}'", topo.name()));
  PlanPrice price = price_plan(topo, options);
  ++priced_;
  // Pipelined variants left out (their pricing budget, mostly) are the planner's detail: the
  // plan command lists them; here the unpipelined rows alone.
  for (const auto& name : price.left_out)
    if (name.find('@') == std::string::npos) note_left_out(name);
  return price;
}

std::string Pricer::cache_key(const Topology& topo, const AlgorithmChoice& choice) const {
  return choice.name() + '|' + (reads_link_figures(choice) ? topo.hash_hex() : shape_);
}

const ir::Schedule* Pricer::schedule(const Topology& topo, const AlgorithmChoice& choice) {
  if (keyed_ != &topo || keyed_hash_ != topo.hash()) {
    shape_ = shape_key(topo);
    keyed_ = &topo;
    keyed_hash_ = topo.hash();
  }
  auto& slot = schedules_[cache_key(topo, choice)];
  if (!slot) {
    const auto estimate = choice.estimate(topo);
    if (estimate && !schedule_fits_limits(*estimate)) return nullptr;
    try {
      slot = std::make_shared<ir::Schedule>(choice.build_compact(topo, cost_));
    } catch (const ScheduleBeyondLimits&) {
      return nullptr;
    }
    ++built_;
    if (!schedule_fits_limits(measured_size(*slot))) {
      slot.reset();
      return nullptr;
    }
  }
  return slot.get();
}

LinkTraffic Pricer::traffic(const Topology& topo, const PlanPrice& price, uint64_t bytes) {
  const PlanPrice::Range& range = price.at(bytes);
  // A kept row's schedule is not built by name: its base is the plan's (walked each time asked,
  // once per point and step).
  if (range.algorithm.starts_with("kept") && range.kept) return schedule_traffic(topo, price.kept.at(*range.kept).base);
  return traffic(topo, range.algorithm);
}

LinkTraffic Pricer::traffic(const Topology& topo, const std::string& algorithm) {
  AlgorithmChoice choice = find_algorithm(algorithm);
  choice.slices = 1;  // slices carry the base's bytes between the same learners
  // The ring's traffic has a closed form; the others are walked (once per shape).
  if (choice.row->name == "ring") return ring_traffic(topo);
  const ir::Schedule* built = schedule(topo, choice);
  if (built == nullptr)
    throw std::runtime_error(fmt::format("{}: the schedule is too big to walk for link traffic", algorithm));
  auto [it, fresh] = traffic_.try_emplace(cache_key(topo, choice));
  if (fresh) it->second = schedule_traffic(topo, *built);
  return it->second;
}

}  // namespace flexplan::whatif
