// One row per all-reduce algorithm: its name, builder, size estimate, exact closed-form price
// if it has one, whether slicing it into a pipeline can pay, and a line for the command line.
// Everything the planner, the cost model and the CLI know about an algorithm is here; adding one
// is adding its builder and its row.
//
// Pipelined variants are named "<algorithm>@<slices>" ("flexreduce@4"): the algorithm's schedule
// with the vector cut into that many slices that flow through its steps one step apart
// (pipeline.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct AlgorithmRow {
  std::string_view name;
  std::string_view summary;  // one line, for --help and the plan summary
  ir::Schedule (*build)(const Topology&);
  // Where the schedule follows the cost model (flexreduce-bw's shares price the incast loss),
  // the builder the planner calls with its CostParams; null: `build`.
  ir::Schedule (*build_for_cost)(const Topology&, const CostParams&) = nullptr;
  // Without building it; exact or an upper bound. Null when only building tells (the
  // planner then builds the schedule once and slices that for the pipelined variants).
  ScheduleSize (*estimate)(const Topology&);
  // An exact price without building it (tested equal to the evaluator), where there is one.
  std::optional<ScheduleCost> (*closed_form)(const Topology&, const CostParams&) = nullptr;
  // Why the algorithm does not apply to this tree, or empty when it does.
  std::string (*unsuitable)(const Topology&) = nullptr;
  // A note on what the builder will do on this tree ("falls back to the ring"), or empty.
  std::string (*note)(const Topology&) = nullptr;
  bool pipelines = false;  // its steps load different links, so slices can overlap them
  uint32_t max_slices = 256;  // the most slices the planner tries
  // A model of the price for trees too big to build and without an exact closed form (the
  // paper's Eq. 6 for FlexReduce), with its name; returns a negative time where it does not
  // apply.
  double (*model)(const Topology&, double bytes, const CostParams&) = nullptr;
  std::string_view model_name = {};
  // Rows the planner skips unless asked for by name (they exist to be compared against).
  bool on_request_only = false;
  // Priced by its critical path (critical_path.hpp: each rank starts a step when its own part
  // of the one before is done, as the runtime runs it) instead of as the sum of its steps. The
  // latency rows, whose pipelined trees overlap their slices' latencies (docs/cost-model.md).
  bool critical_path = false;
  // The plan summary reports the paper's reduce calls (ReduceCallStats, Eq. 12) from this
  // row's unpipelined schedule: FlexReduce's.
  bool reports_reduce_calls = false;
  // A kept row (kept_row): the table row whose schedule, from an earlier plan, it races again as
  // it is. It builds nothing: the planner holds its schedule (plan_builder.hpp, KeptSchedule).
  const AlgorithmRow* kept_from = nullptr;
};

std::span<const AlgorithmRow> algorithm_table();

// The row under which the planner races the `nth` (from 0) kept schedule of `original`'s again
// (plan_builder.hpp, KeptSchedule): named "kept:<name>" ("kept2:<name>" for the second, ...),
// with the original's pipelining and pricing flags and no builder, estimate or closed form.
// Rows live as long as the program; the same (original, nth) gives the same row.
const AlgorithmRow& kept_row(const AlgorithmRow& original, size_t nth = 0);

// An algorithm as the planner races it: a row, and its slice count (1: not pipelined).
struct AlgorithmChoice {
  const AlgorithmRow* row = nullptr;
  uint32_t slices = 1;
  std::string name() const;  // "flexreduce", "flexreduce@4"
  // With the cost model the plan is priced with (AlgorithmRow::build_for_cost).
  ir::Schedule build(const Topology&, const CostParams& = {}) const;
  // The same schedule, a pipeline held compact (ir/pipeline_form.hpp): for code that takes
  // both forms (the evaluator, link traffic, the verifier, the encoder).
  ir::Schedule build_compact(const Topology&, const CostParams& = {}) const;
  // The pipelined variant of an already built unpipelined schedule.
  ir::Schedule from_base(const ir::Schedule& base) const;
  // Null when the row has no estimate.
  std::optional<ScheduleSize> estimate(const Topology&) const;
  // The size of this many slices of an unpipelined schedule of `base` size (saturating).
  ScheduleSize sliced(const ScheduleSize& base) const;
  std::optional<ScheduleCost> closed_form(const Topology&, const CostParams&) const;
};

// A row's unpipelined schedule, built for the cost model (AlgorithmRow::build_for_cost).
ir::Schedule build_base(const AlgorithmRow&, const Topology&, const CostParams&);

// "flexreduce@8" -> {"flexreduce", 8}; "ring" -> {"ring", 1}. Throws std::invalid_argument for a
// slice count that is not a whole number from 1 to 1024.
struct SlicedName {
  std::string_view base;
  uint32_t slices = 1;
};
SlicedName split_slices(std::string_view name);

// "ring", "flexreduce@8": throws std::invalid_argument naming the word and the known
// algorithms (never listing the unknown one among them).
AlgorithmChoice find_algorithm(std::string_view name);

// The base names in table order (the order build_plan prefers on ties).
std::vector<std::string> algorithm_names();
// Slice counts the planner tries for a pipelining algorithm.
inline constexpr uint32_t kPipelineSlices[] = {2, 4, 8, 16, 32, 64, 128, 256};

// Convenience for tests and tools: build by name (base or pipelined).
ir::Schedule plan_algorithm(const Topology&, std::string_view name);

}  // namespace flexplan
