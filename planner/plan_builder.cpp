// build_plan: price the candidates, take the lower envelope, build the winners, assemble.
#include "planner/plan_builder.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/format.h>

#include "planner/size_format.hpp"

namespace flexplan {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The requested algorithms, checked and without repeats, in the order given.
std::vector<std::string> requested_algorithms(const PlanOptions& options) {
  if (options.algorithms.empty()) return algorithm_names();
  const auto known = algorithm_names();
  std::vector<std::string> names;
  for (const auto& name : options.algorithms) {
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw std::invalid_argument(fmt::format("unknown algorithm '{}' (known: {})", name,
                                              fmt::join(known, ", ")));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

ScheduleSize measured_size(const ir::Schedule& schedule) {
  ScheduleSize size;
  for (const auto& step : schedule.steps) {
    size.ops += step.ops.size();
    for (const auto& op : step.ops) size.group_members += op.group.size();
  }
  return size;
}

// The exact closed form of an algorithm's schedule on this tree, if it has one.
std::optional<LinearCost> exact_closed_form(const Topology& topo, const std::string& name,
                                            const CostParams& params) {
  if (name == "ring" || (name == "blueconnect" && blueconnect_falls_back(topo)))
    return ring_cost(topo, params);
  if (name == "hierarchical") return hierarchical_cost(topo, params);
  return std::nullopt;
}

bool same_cost(const LinearCost& a, const LinearCost& b) {
  const auto close = [](double x, double y) {
    return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y));
  };
  return close(a.latency, b.latency) && close(a.per_byte, b.per_byte);
}

class PlanBuilder {
 public:
  PlanBuilder(const Topology& topo, const PlanOptions& options)
      : topo_(topo), options_(options) {}

  PlanReport run() {
    for (const auto& name : requested_algorithms(options_)) price(name);
    auto pieces = winning_pieces();
    assemble(pieces);
    return std::move(report_);
  }

 private:
  void note(const std::string& text) const {
    if (options_.progress) options_.progress(text);
  }

  void price(const std::string& name) {
    const size_t index = report_.candidates.size();
    report_.candidates.emplace_back();
    schedules_.emplace_back();
    auto& candidate = report_.candidates[index];
    candidate.algorithm = name;
    candidate.size = estimate_schedule_size(topo_, name);
    if (auto closed = exact_closed_form(topo_, name, options_.cost)) {
      candidate.priced = true;
      candidate.priced_by = "closed form";
      candidate.cost = *closed;
    } else if (schedule_fits_limits(candidate.size)) {
      build(index);
    } else {
      candidate.left_out_because = too_big(candidate.size);
      note(fmt::format("{}: left out: {}", name, candidate.left_out_because));
    }
  }

  static std::string too_big(const ScheduleSize& size) {
    return fmt::format("its schedule would have ~{} ops and {} group members (limits {} and {})",
                       size.ops, size.group_members, kMaxScheduleOps, kMaxScheduleGroupMembers);
  }

  // Builds the candidate's schedule and prices it with the evaluator; a closed-form price
  // must agree.
  void build(size_t index) {
    auto& candidate = report_.candidates[index];
    auto start = Clock::now();
    auto schedule = plan_algorithm(topo_, candidate.algorithm);
    candidate.size = measured_size(schedule);
    note(fmt::format("{}: {} steps, {} ops built in {:.3f} s", candidate.algorithm,
                     schedule.steps.size(), candidate.size.ops, seconds_since(start)));
    start = Clock::now();
    const auto cost = evaluate_schedule(topo_, schedule, options_.cost);
    note(fmt::format("{}: priced in {:.3f} s", candidate.algorithm, seconds_since(start)));
    if (candidate.priced && !same_cost(cost, candidate.cost))
      throw std::logic_error(fmt::format(
          "cost model: the closed form of {} ({} s + {} s/B) disagrees with the evaluator "
          "({} s + {} s/B)",
          candidate.algorithm, candidate.cost.latency, candidate.cost.per_byte, cost.latency,
          cost.per_byte));
    if (candidate.algorithm == "flexreduce")
      report_.flexreduce_calls = reduce_call_stats(topo_, schedule);
    candidate.cost = cost;
    candidate.priced = true;
    candidate.built = true;
    if (candidate.priced_by.empty()) candidate.priced_by = "evaluator";
    schedules_[index] = std::move(schedule);
  }

  // The envelope over the priced candidates, after building every winner; a winner too big to
  // build leaves the race and the envelope is taken again.
  std::vector<std::pair<size_t, EnvelopePiece>> winning_pieces() {
    for (;;) {
      std::vector<size_t> racing;
      std::vector<LinearCost> lines;
      for (size_t i = 0; i < report_.candidates.size(); ++i)
        if (report_.candidates[i].racing()) {
          racing.push_back(i);
          lines.push_back(report_.candidates[i].cost);
        }
      if (racing.empty())
        throw std::runtime_error("no algorithm could be built for topology '" + topo_.name() +
                                 "': every requested schedule exceeds the size limits");
      std::vector<std::pair<size_t, EnvelopePiece>> pieces;
      bool dropped = false;
      for (const auto& piece : lower_envelope(lines)) {
        const size_t index = racing[piece.line];
        auto& candidate = report_.candidates[index];
        if (!candidate.built) {
          if (!schedule_fits_limits(candidate.size)) {
            candidate.left_out_because = fmt::format(
                "would win messages of {} and up, but {}",
                format_bytes(static_cast<double>(piece.min_bytes)),
                too_big(candidate.size));
            note(fmt::format("{}: left out: {}", candidate.algorithm,
                             candidate.left_out_because));
            dropped = true;
            break;
          }
          build(index);
        }
        pieces.emplace_back(index, piece);
      }
      if (!dropped) return pieces;
    }
  }

  void assemble(const std::vector<std::pair<size_t, EnvelopePiece>>& pieces) {
    auto& plan = report_.plan;
    plan.world_size = topo_.num_learners();
    plan.topology_name = topo_.name();
    plan.topology_hash = topo_.hash_hex();
    plan.rank_names.reserve(topo_.num_learners());
    for (int rank = 0; rank < topo_.num_learners(); ++rank)
      plan.rank_names.push_back(topo_.full_name(topo_.learner_node(rank)));
    for (const auto& [index, piece] : pieces) {
      auto& schedule = *schedules_[index];  // each candidate wins one piece at most
      schedule.min_bytes = piece.min_bytes;
      schedule.max_bytes = piece.max_bytes;
      plan.schedules.push_back(std::move(schedule));
    }
  }

  const Topology& topo_;
  const PlanOptions& options_;
  PlanReport report_;
  std::vector<std::optional<ir::Schedule>> schedules_;  // by candidate index, once built
};

}  // namespace

PlanReport build_plan_report(const Topology& topo, const PlanOptions& options) {
  return PlanBuilder(topo, options).run();
}

ir::Plan build_plan(const Topology& topo, const PlanOptions& options) {
  return build_plan_report(topo, options).plan;
}

}  // namespace flexplan
