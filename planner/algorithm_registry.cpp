// Algorithms by name, and the size of their schedules before building them.
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/format.h>

#include "planner/algorithms.hpp"
#include "planner/machines.hpp"

namespace flexplan {
namespace {

using Planner = ir::Schedule (*)(const Topology&);

const std::vector<std::pair<std::string, Planner>>& registry() {
  static const std::vector<std::pair<std::string, Planner>> algorithms = {
      {"flexreduce", &plan_flexreduce},
      {"ring", &plan_ring},
      {"blueconnect", &plan_blueconnect},
      {"hierarchical", &plan_hierarchical},
  };
  return algorithms;
}

[[noreturn]] void unknown_algorithm(std::string_view name) {
  throw std::invalid_argument(fmt::format("unknown algorithm '{}' (known: {})", name,
                                          fmt::join(algorithm_names(), ", ")));
}

uint64_t sat_mul(uint64_t a, uint64_t b) {
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > ~uint64_t{0} ? ~uint64_t{0} : static_cast<uint64_t>(p);
}

// A ring reduce-scatter + all-gather among `members`, `rings` of them in parallel.
ScheduleSize ring_size(uint64_t members, uint64_t rings) {
  if (members < 2) return {};
  const uint64_t ops = sat_mul(sat_mul(2 * (members - 1), members), rings);
  return {ops, sat_mul(ops, 2)};
}

ScheduleSize flexreduce_size(const Topology& topo) {
  // At node x every subrange starts at a new-range or a holder boundary: at most twice the
  // learners under x subranges, each with degree(x) members; doubled for the all-gather.
  ScheduleSize size;
  for (NodeId x = 0; x < topo.num_nodes(); ++x) {
    if (topo.is_learner(x)) continue;
    const uint64_t subranges = 2 * topo.learners_under(x).size();
    size.ops += 2 * subranges;
    size.group_members = std::min<uint64_t>(
        size.group_members + sat_mul(2 * subranges, topo.degree(x)), ~uint64_t{0} >> 1);
  }
  return size;
}

ScheduleSize blueconnect_size(const Topology& topo) {
  if (blueconnect_falls_back(topo)) return ring_size(topo.num_learners(), 1);
  ScheduleSize size;
  const uint64_t learners = topo.num_learners();
  for (int level = 0; level < topo.num_levels(); ++level) {
    const uint64_t fan_out = topo.degree(topo.nodes_at_level(level).front());
    const auto rings = ring_size(fan_out, learners / fan_out);
    size.ops += rings.ops;
    size.group_members += rings.group_members;
  }
  return size;
}

// The leader ring, plus a local reduce and a local broadcast per machine of several learners.
ScheduleSize hierarchical_size(const Topology& topo) {
  const auto machines = machines_of(topo);
  ScheduleSize size = ring_size(machines.size(), 1);
  for (const Machine& machine : machines) {
    if (machine.learners.size() < 2) continue;
    size.ops += 2;
    size.group_members += 2 * machine.learners.size();
  }
  return size;
}

}  // namespace

std::vector<std::string> algorithm_names() {
  std::vector<std::string> names;
  for (const auto& [name, planner] : registry()) names.push_back(name);
  return names;
}

ir::Schedule plan_algorithm(const Topology& topo, std::string_view name) {
  for (const auto& [known, planner] : registry())
    if (known == name) return planner(topo);
  unknown_algorithm(name);
}

ScheduleSize estimate_schedule_size(const Topology& topo, std::string_view name) {
  if (name == "flexreduce") return flexreduce_size(topo);
  if (name == "ring") return ring_size(topo.num_learners(), 1);
  if (name == "blueconnect") return blueconnect_size(topo);
  if (name == "hierarchical") return hierarchical_size(topo);
  unknown_algorithm(name);
}

bool schedule_fits_limits(const ScheduleSize& size) {
  return size.ops <= kMaxScheduleOps && size.group_members <= kMaxScheduleGroupMembers;
}

}  // namespace flexplan
