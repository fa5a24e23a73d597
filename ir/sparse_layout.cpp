// The sparse all-reduce's machines and slices, derived from a plan's learner names.
#include "ir/sparse_layout.hpp"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace flexplan::ir {

SparseLayout::Slice SparseLayout::slice(int32_t rank, uint64_t count) const {
  const auto& members = machines.at(static_cast<size_t>(machine_of.at(static_cast<size_t>(rank))));
  const uint64_t n = members.size();
  const uint64_t j = static_cast<uint64_t>(local_index[static_cast<size_t>(rank)]);
  return {unit_to_element(j, n, count), unit_to_element(j + 1, n, count)};
}

std::vector<int32_t> SparseLayout::overlapping(int32_t machine, Slice range, uint64_t count) const {
  std::vector<int32_t> out;
  for (int32_t rank : machines.at(static_cast<size_t>(machine))) {
    const Slice s = slice(rank, count);
    if (s.begin < range.end && range.begin < s.end) out.push_back(rank);
  }
  return out;
}

namespace {

// A learner's machine is its name without the last '/' component.
std::string machine_of_name(const std::string& name) {
  const size_t slash = name.rfind('/');
  return slash == std::string::npos ? std::string() : name.substr(0, slash);
}

SparseLayout layout_of_machines(const std::vector<std::string>& machine_by_rank) {
  const size_t world = machine_by_rank.size();
  SparseLayout layout;
  layout.machine_of.resize(world);
  layout.local_index.resize(world);
  std::map<std::string, int32_t> index_of_machine;
  for (size_t rank = 0; rank < world; ++rank) {
    const std::string& machine = machine_by_rank[rank];
    auto [it, inserted] = index_of_machine.emplace(machine, static_cast<int32_t>(layout.machines.size()));
    if (inserted) {
      layout.machines.emplace_back();
      layout.machine_names.push_back(machine);
    }
    auto& members = layout.machines[static_cast<size_t>(it->second)];
    layout.machine_of[rank] = it->second;
    layout.local_index[rank] = static_cast<int32_t>(members.size());
    members.push_back(static_cast<int32_t>(rank));
  }
  return layout;
}

}  // namespace

SparseLayout sparse_layout(const Plan& plan) {
  const size_t world = static_cast<size_t>(plan.world_size);
  if (!plan.rank_names.empty() && plan.rank_names.size() != world) {
    throw std::invalid_argument(fmt::format("sparse layout: {} rank names for a world of {}",
                                            plan.rank_names.size(), world));
  }
  if (!plan.rank_names.empty()) return sparse_layout(plan.rank_names);
  std::vector<std::string> machines;  // one per rank
  for (size_t rank = 0; rank < world; ++rank) machines.push_back(fmt::format("#{}", rank));
  return layout_of_machines(machines);
}

SparseLayout sparse_layout(const std::vector<std::string>& rank_names) {
  std::vector<std::string> machines;
  machines.reserve(rank_names.size());
  for (const std::string& name : rank_names) machines.push_back(machine_of_name(name));
  return layout_of_machines(machines);
}

}  // namespace flexplan::ir
