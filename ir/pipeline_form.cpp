// expand_pipeline and pipeline_base (pipeline_form.hpp).
#include "ir/pipeline_form.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ir/errors.hpp"

namespace flexplan::ir {

namespace {

void check_pipeline_of(const Schedule& base, uint32_t slices) {
  if (slices == 0) throw std::invalid_argument("pipeline: zero slices");
  if (base.slices != 1)
    throw std::invalid_argument(fmt::format("pipeline: the base '{}' is itself a pipeline of {} slices",
                                            base.algorithm, base.slices));
  if (base.units > std::numeric_limits<uint64_t>::max() / slices)
    throw std::invalid_argument(fmt::format("pipeline: {} units times {} slices overflow 64 bits",
                                            base.units, slices));
}

}  // namespace

Schedule compact_pipeline(Schedule base, uint32_t slices) {
  check_pipeline_of(base, slices);
  // An empty base's expansion is no steps at all, held (and written) whole.
  if (base.steps.empty()) return expand_pipeline(base, slices);
  if (slices > 1) base.algorithm = fmt::format("{}@{}", base.algorithm, slices);
  base.slices = slices;
  return base;
}

Schedule materialize(const Schedule& schedule) {
  if (schedule.slices == 1) return schedule;
  uint64_t members = 0;
  for (const Step& step : schedule.steps)
    for (const Op& op : step.ops) members += op.group.size();
  const uint64_t ops = expanded_op_count(schedule);
  if (ops > kMaxMaterializedOps || members > kMaxMaterializedGroupMembers / schedule.slices)
    throw TooLargeToExpand(fmt::format(
        "schedule '{}' expands to {} ops and {} group members, more than the {} and {} held whole "
        "to print or compile it (it runs as it is: plan.bin and the runtime keep it compact)",
        schedule.algorithm, ops, members * schedule.slices, kMaxMaterializedOps, kMaxMaterializedGroupMembers));
  const auto pipeline = pipeline_base(schedule);
  Schedule whole = expand_pipeline(pipeline->base, pipeline->slices);
  whole.algorithm = schedule.algorithm;
  return whole;
}

Plan materialize(const Plan& plan) {
  Plan whole = plan;
  for (Schedule& schedule : whole.schedules)
    if (schedule.slices != 1) schedule = materialize(schedule);
  return whole;
}

ExpandedOp expanded_op(const Schedule& schedule, size_t t, size_t index) {
  if (t < expanded_step_count(schedule, schedule.slices)) {
    for (size_t j = first_slice_in_step(schedule, t); j <= last_slice_in_step(schedule.slices, t); ++j) {
      const std::vector<Op>& ops = schedule.steps[t - j].ops;
      if (index < ops.size()) return {&ops[index], j * schedule.units};
      index -= ops.size();
    }
  }
  throw std::out_of_range(fmt::format("schedule '{}' has no op {} in step {}", schedule.algorithm, index, t));
}

uint64_t expanded_op_count(const Schedule& schedule) {
  uint64_t ops = 0;
  for (const Step& step : schedule.steps) ops += step.ops.size();
  return ops * schedule.slices;
}

PipelineFootprint pipeline_footprint(const Schedule& base, int32_t world_size) {
  PipelineFootprint footprint;
  // Each op's ranks once: its group, and its root when outside the group (one walk of the
  // group finds both).
  const auto for_each_rank = [&](auto&& take) {
    for (const Step& step : base.steps)
      for (const Op& op : step.ops) {
        bool root_in_group = false;
        for (const int32_t rank : op.group) {
          root_in_group |= rank == op.root;
          if (rank >= 0 && rank < world_size) take(rank);
        }
        if (!root_in_group && op.root >= 0 && op.root < world_size) take(op.root);
      }
  };
  for (const Step& step : base.steps) {
    footprint.ops += step.ops.size();
    for (const Op& op : step.ops) footprint.group_members += op.group.size();
  }
  // Counted in a table by rank when the world is not much larger than the schedule, else by
  // sorting the ranks taken part: memory in the schedule's size either way (a small plan.bin
  // may claim a world of two billion).
  const uint64_t taken = footprint.ops + footprint.group_members;
  if (static_cast<uint64_t>(std::max(world_size, 0)) <= 4 * taken + 64) {
    std::vector<uint64_t> rank_ops(static_cast<size_t>(std::max(world_size, 0)), 0);
    for_each_rank([&](int32_t rank) {
      footprint.largest_rank_ops = std::max(footprint.largest_rank_ops, ++rank_ops[static_cast<size_t>(rank)]);
    });
  } else {
    std::vector<int32_t> ranks;
    ranks.reserve(taken);
    for_each_rank([&](int32_t rank) { ranks.push_back(rank); });
    std::sort(ranks.begin(), ranks.end());
    for (size_t run = 0; run < ranks.size();) {
      size_t end = run;
      while (end < ranks.size() && ranks[end] == ranks[run]) ++end;
      footprint.largest_rank_ops = std::max<uint64_t>(footprint.largest_rank_ops, end - run);
      run = end;
    }
  }
  return footprint;
}

std::string pipeline_beyond_limits(const PipelineFootprint& base, uint64_t slices) {
  const auto over = [&](uint64_t per_slice, uint64_t limit) { return per_slice > limit / std::max<uint64_t>(slices, 1); };
  if (slices > kMaxPipelineSlices) return fmt::format("{} slices (limit {})", slices, kMaxPipelineSlices);
  if (over(base.ops, kMaxExpandedOps) || over(base.group_members, kMaxExpandedGroupMembers))
    return fmt::format("its pipeline would have {} ops and {} group members (limits {} and {})",
                       base.ops * slices, base.group_members * slices, kMaxExpandedOps, kMaxExpandedGroupMembers);
  if (over(base.largest_rank_ops, kMaxRankExpandedOps))
    return fmt::format("one rank would take part in {} of its ops (limit {})", base.largest_rank_ops * slices,
                       kMaxRankExpandedOps);
  return {};
}

void require_materialized(const Schedule& schedule, std::string_view where) {
  if (schedule.slices != 1)
    throw std::logic_error(fmt::format("{}: schedule '{}' is a compact pipeline of {} slices; "
                                       "materialize it first (ir/pipeline_form.hpp)",
                                       where, schedule.algorithm, schedule.slices));
}

Schedule expand_pipeline(const Schedule& base, uint32_t slices) {
  check_pipeline_of(base, slices);
  Schedule piped;
  piped.algorithm = slices == 1 ? base.algorithm : fmt::format("{}@{}", base.algorithm, slices);
  piped.collective = base.collective;
  piped.root = base.root;  // (a sharded collective is never pipelined: its shards would be cut)
  piped.min_bytes = base.min_bytes;
  piped.max_bytes = base.max_bytes;
  piped.units = base.units * slices;
  piped.steps.resize(expanded_step_count(base, slices));
  for (size_t t = 0; t < piped.steps.size(); ++t) {
    Step& step = piped.steps.edit()[t];
    step.phase = base.steps[expanded_step_label(base, t)].phase;
    step.level = base.steps[expanded_step_label(base, t)].level;
    // Reserved: regrowing was half of a million-op pipeline's build.
    step.ops.reserve(expanded_op_offset(base, t, last_slice_in_step(slices, t) + 1));
    for_each_expanded_op(base, slices, t, [&](size_t j, const Op& op) {
      Op& copy = step.ops.emplace_back(op);
      copy.begin += j * base.units;
      copy.end += j * base.units;
    });
  }
  return piped;
}

std::optional<PipelineBase> pipeline_base(const Schedule& piped) {
  const std::string_view name = piped.algorithm;
  const size_t at = name.rfind('@');
  if (piped.slices > 1) {
    PipelineBase out{piped, piped.slices};
    out.base.slices = 1;
    const std::string suffix = fmt::format("@{}", piped.slices);
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      out.base.algorithm.resize(name.size() - suffix.size());
    return out;
  }
  if (at == std::string_view::npos) return std::nullopt;
  uint32_t slices = 0;
  const std::string_view digits = name.substr(at + 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), slices);
  if (error != std::errc() || end != digits.data() + digits.size() || slices < 2)
    return std::nullopt;
  const size_t n = piped.steps.size();
  if (n < slices || piped.units % slices != 0) return std::nullopt;
  const size_t m = n - slices + 1;

  // Expansion step k < m opens with base step k (slice 0), followed by base steps k - 1, ...
  // of the later slices: the base's op counts follow from the expansion's.
  PipelineBase out;
  out.slices = slices;
  Schedule& base = out.base;
  base.algorithm = std::string(name.substr(0, at));
  base.collective = piped.collective;
  base.root = piped.root;
  base.min_bytes = piped.min_bytes;
  base.max_bytes = piped.max_bytes;
  base.units = piped.units / slices;
  base.steps.resize(m);
  std::vector<size_t> counts(m);
  for (size_t k = 0; k < m; ++k) {
    size_t later = 0;
    for (size_t j = 1; j <= std::min<size_t>(k, slices - 1); ++j) later += counts[k - j];
    const size_t ops = piped.steps[k].ops.size();
    if (later > ops) return std::nullopt;
    counts[k] = ops - later;
    const Step& from = piped.steps[k];
    base.steps.edit()[k].phase = from.phase;
    base.steps.edit()[k].level = from.level;
    base.steps.edit()[k].ops.assign(from.ops.begin(), from.ops.begin() + static_cast<ptrdiff_t>(counts[k]));
  }

  // The schedule must be the expansion op for op.
  for (size_t t = 0; t < n; ++t) {
    const Step& step = piped.steps[t];
    const Step& label = base.steps[expanded_step_label(base, t)];
    if (step.phase != label.phase || step.level != label.level) return std::nullopt;
    size_t o = 0;
    bool same = true;
    for_each_expanded_op(base, slices, t, [&](size_t j, const Op& op) {
      if (!same) return;
      if (o >= step.ops.size()) {
        same = false;
        return;
      }
      const Op& got = step.ops[o++];
      const uint64_t offset = j * base.units;
      same = op.end <= base.units && got.kind == op.kind && got.shape == op.shape && got.root == op.root &&
             got.begin == op.begin + offset && got.end == op.end + offset &&
             got.group == op.group;
    });
    if (!same || o != step.ops.size()) return std::nullopt;
  }
  return out;
}

}  // namespace flexplan::ir
