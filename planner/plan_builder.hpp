// From a topology to a plan: price every candidate algorithm (pipelined variants included) as a
// function of the message size, and keep for each size range the cheapest (the lower envelope of
// the price curves, cheapest_pieces).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/plan.hpp"
#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/collective_planner.hpp"
#include "planner/cost_model.hpp"
#include "planner/flexreduce.hpp"
#include "planner/floor.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// PlanOptions::critical_path_budget's default.
inline constexpr uint64_t kCriticalPathBudget = 16'000'000;

// A schedule of an earlier plan for the same learners, raced again as it is. Re-planning from a
// plan (the plan command's --from, whatif's varied points and upgrades) then writes a plan priced
// no dearer, at any size, than that plan's own schedules priced on the new links (to within the
// race's relative 1e-9 for ties, and where they are priced at all: rows left out, and variants
// past the pricing budgets or plan.bin's limits, are not); and where only links got faster, no
// dearer than the plan was, as far as a fixed schedule is priced no dearer on faster links
// (CriticalPath.AFixedScheduleNeverGetsSlowerWithAFasterLink for the critical path; the what-if
// property test, 0 pairs on its trees, for every row). Without it a faster link can move a
// choice the builders make from the link figures (a switch tree's root, flexreduce-bw's shares)
// to a schedule priced dearer at some sizes (docs/whatif.md, "Faster links, slower plans"). Each is raced under its own row,
// "kept:<row>" (kept_row), after the table's rows, so that ties go to the schedules built afresh.
struct KeptSchedule {
  ir::Schedule base;              // unpipelined, all-reduce, named by its row ("switch-tree")
  std::vector<uint32_t> slices;   // the pipelines of it the plan used (ascending), besides itself
  friend bool operator==(const KeptSchedule&, const KeptSchedule&) = default;
};
// What a re-plan from `plan` races again: its all-reduce schedules of rows without a closed form
// (those rows build from the tree's shape alone, the same schedule whatever the link figures),
// each base once (a compact pipeline by its base), in plan order. Pipelines stored expanded
// (none that this version writes) are not kept.
std::vector<KeptSchedule> kept_schedules(const ir::Plan&);

struct PlanOptions {
  // Empty: every algorithm of the table that suits the tree, each pipelining one also with
  // kPipelineSlices slices. Otherwise exactly these ("flexreduce@4" names a pipelined one);
  // one name alone forces it for every size.
  std::vector<std::string> algorithms;
  // Rows (base names) the default race leaves out, for benchmarks that compare with and
  // without them; ignored when `algorithms` names the candidates.
  std::vector<std::string> leave_out{};
  CostParams cost{};
  // Told about each phase as it ends ("flexreduce: 1.2M ops built in 0.4 s") and about
  // algorithms skipped for size.
  std::function<void(std::string_view)> progress{};
  // Keep the plan's pipelines compact (ir::Schedule::slices; ir/pipeline_form.hpp) instead of
  // expanding them: for a plan that is only verified and written, as `flexplan plan` does.
  // Code that reads a schedule's steps as the whole schedule needs ir::materialize first.
  bool compact_pipelines = false;
  // Skip pricing a candidate that cannot win any size: a lower bound of its price is above the
  // cheapest price found so far at every size. Pipelined variants are bounded from their base's
  // steps (pipeline_lower_bound), and bases priced from their windows from their steps' floors
  // (schedule_floors). Same plan either way; off only to check that.
  bool prune_unwinnable = true;
  // A base is left out on its floors only where they took walking this many link directions
  // (about 0.02 s; pricing it from its windows costs several times as much): cheaper bases are
  // priced anyway, so that the plan summary shows their curves.
  uint64_t costly_base_links = 1'000'000;
  // Envelope lines a critical-path row may compare or sort, and links of its base's hops it may
  // walk, over all its variants (critical_path_cost_within): about 0.2 s on this host (13 ns a
  // line, 16k learners); beyond it the rest of its variants are priced step by step, and pruned
  // on their steps' floors like any row's. Lower only for tests of that fallback.
  uint64_t critical_path_budget = kCriticalPathBudget;
  // Build and floor the bases priced from their windows on two threads before pricing
  // (plan_builder.cpp, prepare_window_bases). Same plan either way; off only to check that.
  bool prepare_bases_in_parallel = true;
  // Plan the collectives other than all-reduce on a thread of their own, beside all-reduce's
  // race (build_plan_report), on trees of at least this many learners: their races share
  // nothing with it, and at a million learners each takes seconds. Same plan either way.
  int plan_collectives_beside_from_learners = 4096;
  // Where the bases built hold at least this many ops, they are freed on a thread of their own
  // (PlanReport::freeing): a thread costs tens of microseconds, freeing a million ops 10 ms.
  uint64_t free_beside_from_ops = 100'000;
  // The collectives to plan: all-reduce alone by default (the plan command takes --collectives).
  std::vector<ir::Collective> collectives{ir::Collective::AllReduce};
  // The roots to plan broadcast and reduce for.
  std::vector<int32_t> roots{0};
  // False: run the race and find its size ranges (PlanReport::ranges) without building the
  // winners' schedules, for questions about the plan's time (plan_price.hpp, `whatif`). The
  // ranges and prices are the same either way: building a winner only checks its price.
  bool build_winners = true;
  // A collective other than all-reduce none of whose rows fits the schedule limits is left out
  // (PlanReport::collectives_left_out says why) instead of failing the plan: the plan command's
  // default set of collectives, where the user named none.
  bool leave_out_unbuildable = false;
  // Schedules of an earlier plan for the same learners, raced again beside the default race's
  // rows (KeptSchedule; ignored where `algorithms` names the candidates). Each must be a valid
  // all-reduce among this topology's learners: build_plan_report throws std::invalid_argument
  // otherwise.
  std::vector<KeptSchedule> kept{};
};

// A lower bound of the price of `base` cut into `slices` slices (pipeline.hpp), nondecreasing
// in the size: each of the pipeline's m + slices - 1 windows holds some base steps, each at
// bytes / slices, and its price is at least each of theirs (a window adds loads, hops and
// chains), so the windows cost at least the sum over windows of their steps' largest floor
// (for bases of at most kWindowBoundSteps steps; beyond, the first slice's run alone: each
// base step once); and every link carries the load of all base steps in all, `busiest_total`
// seconds per message byte on the busiest (PipelinePricer::busiest_total; the busiest step's
// per_byte is a weaker stand-in) besides the windows' hop latencies.
double pipeline_lower_bound(const ScheduleCost& base, double busiest_total, uint32_t slices, double bytes);
inline constexpr uint64_t kWindowBoundSteps = 4096;
// An upper bound of cost.at(n) for every n <= bytes (cost.at itself may fall where a range
// gets one more chunk; this does not).
double price_upper_bound(const ScheduleCost& cost, double bytes);

ir::Plan build_plan(const Topology&, const PlanOptions&);

// How a candidate's price was found.
enum class PricedBy : uint8_t {
  Unpriced,
  Evaluator,        // its schedule built and evaluated step by step (evaluate_schedule)
  ClosedForm,       // the row's exact closed form, without building
  PipelineWindows,  // from its base's step windows (pipeline.hpp), without building
  CriticalPath,     // by its critical path (critical_path.hpp)
};
// "evaluator", "closed form", "pipeline windows", "critical path"; "" where unpriced.
std::string_view to_string(PricedBy);

// What build_plan weighed, for the command line's summary. Algorithms with an exact closed form
// are priced without building and built only when they win a size range (the evaluator then
// re-prices them as a check); the others are built and priced by the evaluator.
struct Candidate {
  AlgorithmChoice choice;
  std::string algorithm;  // choice.name()
  bool priced = false;    // has a price (false: too big to build and no closed form)
  bool built = false;     // its schedule was built
  PricedBy priced_by = PricedBy::Unpriced;
  std::string left_out_because;  // non-empty: not in the race although it might have won
  std::string note;       // from the row (BlueConnect's fallback)
  ScheduleSize size;      // actual when built, estimated otherwise
  ScheduleCost cost;      // when priced
  bool racing() const { return priced && left_out_because.empty(); }
};

// One size range of the all-reduce plan: the candidate (index into PlanReport::candidates)
// whose schedule serves messages of [min_bytes, max_bytes).
struct PlanRange {
  size_t candidate = 0;
  uint64_t min_bytes = 0;
  std::optional<uint64_t> max_bytes;
  std::optional<size_t> kept;  // its schedule's base in PlanReport::kept, where kept
};

struct PlanReport {
  ir::Plan plan;  // without all-reduce schedules where PlanOptions::build_winners is false
  std::vector<PlanRange> ranges;  // the all-reduce's, in order; the last is unbounded
  std::vector<Candidate> candidates;                // in the order raced
  std::vector<std::string> unsuitable;              // "torus-2d: the machines differ in size"
  std::optional<ReduceCallStats> flexreduce_calls;  // when FlexReduce was built
  CostFloor floor;
  // The other collectives' races (collective_planner.hpp), one per collective and root, in the
  // order their schedules follow the all-reduce's in the plan.
  std::vector<CollectivePlan> collectives;
  // Collectives asked for but left out (PlanOptions::leave_out_unbuildable): "allgather: why".
  std::vector<std::string> collectives_left_out;
  // The planner's working memory where it was large (the bases it built, a million ops at 16k
  // learners: about 10 ms to free), freed on a thread of its own while the caller goes on
  // (verifies and writes the plan); that thread is joined when the last copy of the report goes.
  std::shared_ptr<void> freeing;
  // Schedules of the plan verified already, on a race's thread that had finished while another
  // race ran (planning beside all-reduce): ir::verify_plan takes them as verified. Null when
  // none were.
  std::shared_ptr<const ir::VerifiedSchedules> verified;
  // What a re-plan from this plan races again: kept_schedules of its all-reduce, found from the
  // race, so also where the winners were not built (PlanOptions::build_winners).
  std::vector<KeptSchedule> kept;

  // The narrow query: the candidate whose schedule the plan uses for an n-byte all-reduce
  // (from `ranges`, so also where the winners were not built).
  const Candidate& chosen(uint64_t bytes) const;
  const Candidate* find(std::string_view algorithm) const;
};
PlanReport build_plan_report(const Topology&, const PlanOptions&);

// The cheapest of several price curves over message sizes n >= 0 in whole bytes: the pieces
// [min_bytes, max_bytes) on which each curve is lowest, in order; the last is unbounded. Curves
// within a relative 1e-9 of each other count as equal, and ties go to the lower index. The
// curves are compared on a geometric grid of sizes (four per doubling, 1 B to 1 PiB) and each
// change of winner is placed to the byte by bisection between grid points.
struct EnvelopePiece {
  size_t curve = 0;
  uint64_t min_bytes = 0;
  std::optional<uint64_t> max_bytes;
};
using PriceCurve = std::function<double(double bytes)>;
std::vector<EnvelopePiece> cheapest_pieces(std::span<const PriceCurve> curves);

}  // namespace flexplan
