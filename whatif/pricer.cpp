// Pricing with schedules reused across the points of a sweep (pricer.hpp).
#include "whatif/pricer.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "planner/algorithms.hpp"
#include "whatif/editable_tree.hpp"

namespace flexplan::whatif {
namespace {

// The rows whose schedules follow the link figures (shares from bandwidths): cached per
// topology, not per shape.
bool reads_link_figures(const AlgorithmChoice& choice) {
  return choice.row->name == "flexreduce-bw" || choice.row->name == "chain-bw";
}

}  // namespace

Pricer::Pricer(std::vector<std::string> algorithms, CostParams cost) : cost_(cost) {
  if (algorithms.empty()) {
    for (const auto& row : algorithm_table())
      if (!row.on_request_only) choices_.push_back({&row, 1});
  } else {
    for (const auto& name : algorithms) choices_.push_back(find_algorithm(name));
  }
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
    slot = std::make_shared<ir::Schedule>(choice.build_compact(topo));
    ++built_;
    if (!schedule_fits_limits(measured_size(*slot))) {
      slot.reset();
      return nullptr;
    }
  }
  return slot.get();
}

std::vector<AlgorithmPrice> Pricer::price(const Topology& topo) {
  std::vector<AlgorithmPrice> prices;
  for (const auto& choice : choices_) {
    if (choice.row->unsuitable && !choice.row->unsuitable(topo).empty()) continue;
    if (auto closed = choice.closed_form(topo, cost_)) {
      prices.push_back({choice.name(), std::move(*closed), "closed form"});
      continue;
    }
    const ir::Schedule* built = schedule(topo, choice);
    if (built == nullptr) {
      const std::string name = choice.name();
      if (std::find(left_out_.begin(), left_out_.end(), name) == left_out_.end())
        left_out_.push_back(name);
      continue;
    }
    prices.push_back({choice.name(), evaluate_schedule(topo, *built, cost_), "evaluator"});
  }
  return prices;
}

LinkTraffic Pricer::traffic(const Topology& topo, const std::string& algorithm) {
  const AlgorithmChoice choice = find_algorithm(algorithm);
  // Only the ring and the schedule-free closed forms can skip building: the ring's traffic has
  // a closed form too; the others are built (once per shape).
  if (choice.row->name == "ring" && choice.slices == 1) return ring_traffic(topo);
  const ir::Schedule* built = schedule(topo, choice);
  if (built == nullptr)
    throw std::runtime_error(fmt::format("{}: the schedule is too big to walk for link traffic", algorithm));
  auto [it, fresh] = traffic_.try_emplace(cache_key(topo, choice));
  if (fresh) it->second = schedule_traffic(topo, *built);
  return it->second;
}

}  // namespace flexplan::whatif
