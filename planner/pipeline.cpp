// Slicing a schedule into a pipeline (pipeline.hpp).
#include "planner/pipeline.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/core.h>

namespace flexplan {

ir::Schedule pipeline_slices(const ir::Schedule& schedule, uint32_t slices) {
  if (slices == 0) throw std::invalid_argument("pipeline: zero slices");
  if (schedule.units > std::numeric_limits<uint64_t>::max() / slices)
    throw std::invalid_argument(fmt::format("pipeline: {} units times {} slices overflow 64 bits",
                                            schedule.units, slices));
  ir::Schedule piped;
  piped.algorithm = slices == 1 ? schedule.algorithm
                                : fmt::format("{}@{}", schedule.algorithm, slices);
  piped.collective = schedule.collective;
  piped.min_bytes = schedule.min_bytes;
  piped.max_bytes = schedule.max_bytes;
  piped.units = schedule.units * slices;
  const size_t m = schedule.steps.size();
  if (m == 0) return piped;
  piped.steps.resize(m + slices - 1);
  for (size_t t = 0; t < piped.steps.size(); ++t) {
    ir::Step& step = piped.steps[t];
    // Slices j with 0 <= t - j < m; the step is labelled by the frontmost slice's step.
    const size_t first_slice = t + 1 > m ? t + 1 - m : 0;
    const size_t last_slice = std::min<size_t>(t, slices - 1);
    step.phase = schedule.steps[t - first_slice].phase;
    step.level = schedule.steps[t - first_slice].level;
    for (size_t j = first_slice; j <= last_slice; ++j) {
      const uint64_t offset = j * schedule.units;
      for (const ir::Op& op : schedule.steps[t - j].ops) {
        ir::Op& copy = step.ops.emplace_back(op);
        copy.begin += offset;
        copy.end += offset;
      }
    }
  }
  return piped;
}

PipelinePricer::PipelinePricer(const Topology& topo, const ir::Schedule& base,
                               const CostParams& params)
    : topo_(topo), base_(base), params_(params), members_before_(base.steps.size() + 1, 0) {
  for (size_t s = 0; s < base.steps.size(); ++s) {
    uint64_t members = 0;
    for (const ir::Op& op : base.steps[s].ops) members += op.group.size() + 1;
    members_before_[s + 1] = members_before_[s] + members;
  }
}

const StepCost& PipelinePricer::window(size_t first, size_t last) {
  const auto key = std::make_pair(first, last);
  if (auto it = windows_.find(key); it != windows_.end()) return it->second;
  ir::Schedule merged;
  merged.units = base_.units;
  merged.steps.resize(1);
  for (size_t s = first; s <= last; ++s) {
    const auto& ops = base_.steps[s].ops;
    merged.steps[0].ops.insert(merged.steps[0].ops.end(), ops.begin(), ops.end());
  }
  return windows_.emplace(key, evaluate_steps(topo_, merged, params_).front()).first->second;
}

std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> PipelinePricer::windows(
    uint32_t slices) const {
  std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> out;
  const size_t m = base_.steps.size();
  const size_t total = m == 0 ? 0 : m + slices - 1;
  for (size_t t = 0; t < total;) {
    const size_t first = t + 1 > slices ? t + 1 - slices : 0;
    const size_t last = std::min(t, m - 1);
    // The full window repeats while every base step has a slice in it.
    const size_t run = first == 0 && last == m - 1 && slices >= m ? slices - m + 1 : 1;
    out.push_back({{first, last}, run});
    t += run;
  }
  return out;
}

uint64_t PipelinePricer::work(uint32_t slices) const {
  uint64_t members = 0;
  for (const auto& [window, repeat] : windows(slices))
    if (!windows_.contains(window))
      members += members_before_[window.second + 1] - members_before_[window.first];
  return members;
}

ScheduleCost PipelinePricer::cost(uint32_t slices) {
  if (slices == 0) throw std::invalid_argument("pipeline: zero slices");
  ScheduleCost cost;
  cost.chunk_bytes = params_.chunk_bytes;
  const double scale = 1.0 / slices;
  for (const auto& [bounds, repeat] : windows(slices)) {
    StepCost step = window(bounds.first, bounds.second);
    step.per_byte *= scale;
    for (ChainCost& chain : step.chains) chain.share *= scale;
    step.repeat = repeat;
    cost.steps.push_back(std::move(step));
  }
  return cost;
}

}  // namespace flexplan
