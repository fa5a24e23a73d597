// Names of the IR's enums, and the choice of schedule by message size.
#include "ir/plan.hpp"

#include <algorithm>
#include <array>
#include <string>

namespace flexplan::ir {

namespace {

constexpr std::array<std::string_view, 2> kOpKindNames{"reduce", "broadcast"};
constexpr std::array<std::string_view, 2> kOpShapeNames{"chain", "star"};
constexpr std::array<std::string_view, 4> kPhaseNames{"reduce_scatter", "allgather", "reduce",
                                                      "broadcast"};
constexpr std::array<std::string_view, kCollectiveCount> kCollectiveNames{
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"};

template <typename Enum, size_t N>
Enum from_name(const std::array<std::string_view, N>& names, std::string_view word,
               std::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == word) return static_cast<Enum>(i);
  }
  std::string known;
  for (auto name : names) known += (known.empty() ? "" : ", ") + std::string(name);
  throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(word) +
                              "' (expected one of: " + known + ")");
}

template <size_t N>
std::string_view name_of(const std::array<std::string_view, N>& names, size_t index) {
  return index < N ? names[index] : std::string_view("invalid");
}

}  // namespace

bool Op::root_in_group() const {
  return std::find(group.begin(), group.end(), root) != group.end();
}

std::string_view to_string(OpKind kind) { return name_of(kOpKindNames, static_cast<size_t>(kind)); }
std::string_view to_string(OpShape shape) {
  return name_of(kOpShapeNames, static_cast<size_t>(shape));
}
std::string_view to_string(Phase phase) { return name_of(kPhaseNames, static_cast<size_t>(phase)); }
std::string_view to_string(Collective collective) {
  return name_of(kCollectiveNames, static_cast<size_t>(collective));
}

OpKind op_kind_from_string(std::string_view word) {
  return from_name<OpKind>(kOpKindNames, word, "op");
}
OpShape op_shape_from_string(std::string_view word) {
  return from_name<OpShape>(kOpShapeNames, word, "op shape");
}
Phase phase_from_string(std::string_view word) {
  return from_name<Phase>(kPhaseNames, word, "phase");
}
Collective collective_from_string(std::string_view word) {
  return from_name<Collective>(kCollectiveNames, word, "collective");
}

namespace {
bool serves(const Schedule& schedule, Collective collective, int32_t root) {
  return schedule.collective == collective && (!has_root(collective) || schedule.root == root);
}
}  // namespace

std::optional<size_t> find_schedule(const Plan& plan, const ScheduleQuery& query) {
  std::optional<size_t> first;
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const Schedule& schedule = plan.schedules[i];
    if (!serves(schedule, query.collective, query.root)) continue;
    if (!query.forced.empty() && schedule.algorithm != query.forced) continue;
    if (query.bytes >= schedule.min_bytes && (!schedule.max_bytes || query.bytes < *schedule.max_bytes))
      return i;
    if (!first && !query.forced.empty()) first = i;
  }
  return first;
}

std::vector<std::string> algorithms_of(const Plan& plan, Collective collective, int32_t root) {
  std::vector<std::string> names;
  for (const Schedule& schedule : plan.schedules)
    if (serves(schedule, collective, root) &&
        std::find(names.begin(), names.end(), schedule.algorithm) == names.end())
      names.push_back(schedule.algorithm);
  return names;
}

const Schedule& select_schedule(const Plan& plan, Collective collective, uint64_t bytes,
                                int32_t root) {
  if (const auto index = find_schedule(plan, {collective, bytes, root}))
    return plan.schedules[*index];
  throw std::out_of_range("the plan has no " + std::string(to_string(collective)) +
                          (has_root(collective) ? " (root " + std::to_string(root) + ")" : "") +
                          " schedule for messages of " + std::to_string(bytes) + " bytes");
}

bool plans_collective(const Plan& plan, Collective collective, int32_t root) {
  return std::any_of(plan.schedules.begin(), plan.schedules.end(),
                     [&](const Schedule& s) { return serves(s, collective, root); });
}

bool plans_collective_any_root(const Plan& plan, Collective collective) {
  return std::any_of(plan.schedules.begin(), plan.schedules.end(),
                     [&](const Schedule& s) { return s.collective == collective; });
}

}  // namespace flexplan::ir
