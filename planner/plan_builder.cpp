// build_plan: price the candidates, find the cheapest per size range, build the winners,
// assemble the plan.
#include "planner/plan_builder.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <atomic>
#include <exception>
#include <functional>
#include <iterator>
#include <future>
#include <mutex>
#include <optional>

#include <fmt/core.h>
#include <fmt/format.h>

#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/verify.hpp"
#include "planner/critical_path.hpp"
#include "planner/pipeline.hpp"
#include "planner/schedule_floors.hpp"
#include "planner/size_format.hpp"

namespace flexplan {
namespace {

using Clock = std::chrono::steady_clock;

// Message sizes are compared on a grid from 1 B to 1 PiB, four points per doubling: where
// cheapest_pieces looks for changes of winner, and where pipelines are pruned.
constexpr int kGridPerDoubling = 4, kGridDoublings = 50;
// A closed form's price is checked against the evaluator on the built winner below this size.
constexpr uint64_t kClosedFormCheckOps = 1'000'000;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Prices agree when they are within a relative 1e-9 at sizes spanning every regime.
bool same_price(const ScheduleCost& a, const ScheduleCost& b) {
  for (double n = 0; n < 1e13; n = n == 0 ? 1 : n * 7.3) {
    const double x = a.at(n), y = b.at(n);
    if (std::abs(x - y) > 1e-9 * std::max(std::abs(x), std::abs(y))) return false;
  }
  return true;
}

// Adds `base`, used with `slices` slices, to what a re-plan races again (KeptSchedule): each
// base once, its slice counts ascending. Returns its index.
size_t add_kept(std::vector<KeptSchedule>& kept, ir::Schedule base, uint32_t slices) {
  base.min_bytes = 0;
  base.max_bytes.reset();
  auto found = std::find_if(kept.begin(), kept.end(), [&](const KeptSchedule& k) { return k.base == base; });
  KeptSchedule& entry = found != kept.end() ? *found : kept.emplace_back(KeptSchedule{std::move(base), {}});
  if (slices > 1 && std::find(entry.slices.begin(), entry.slices.end(), slices) == entry.slices.end())
    entry.slices.insert(std::upper_bound(entry.slices.begin(), entry.slices.end(), slices), slices);
  return static_cast<size_t>(&entry - kept.data());
}

class PlanBuilder {
 public:
  PlanBuilder(const Topology& topo, const PlanOptions& options)
      : topo_(topo), options_(options) {}

  // Whether the bases built add up to enough to free on a thread of their own
  // (PlanOptions::free_beside_from_ops).
  bool large() const {
    uint64_t ops = 0;
    for (const auto& [row, state] : rows_)
      if (state.base)
        for (const auto& step : state.base->steps) ops += step.ops.size();
    return ops >= options_.free_beside_from_ops;
  }

  PlanReport run() {
    report_.floor = cost_floor(topo_);
    const auto choices = requested();
    report_.candidates.resize(choices.size());
    schedules_.resize(choices.size());
    // Unpipelined candidates first, except the bases priced from their windows (pipelining rows
    // without a closed form): pricing a base of long chains is the planner's costliest step,
    // and a base that cannot win is left out on its steps' floors alone. Then the rows that
    // pipeline, the one whose base moves bytes fastest first, each row's base (if not priced
    // yet) before its variants (most slices first, as listed): a bound can skip those, and the
    // cheaper the prices found before them, the more it skips.
    if (options_.prepare_bases_in_parallel) prepare_window_bases(choices);
    std::vector<size_t> pipelining;
    for (size_t i = 0; i < choices.size(); ++i) {
      const AlgorithmRow& row = *choices[i].row;
      if (choices[i].slices > 1 || (window_base(row) && floors(row) != nullptr))
        pipelining.push_back(i);
      else
        price(i, choices[i]);
    }
    for (const size_t i : pipelining) base_pace(*choices[i].row);  // (computed once per row)
    std::stable_sort(pipelining.begin(), pipelining.end(), [&](size_t a, size_t b) {
      const double pa = base_pace(*choices[a].row), pb = base_pace(*choices[b].row);
      if (pa != pb) return pa < pb;
      return choices[a].slices == 1 && choices[b].slices > 1;
    });
    for (const size_t i : pipelining) price(i, choices[i]);
    auto pieces = winning_pieces();
    for (const auto& [index, piece] : pieces)
      report_.ranges.push_back({index, piece.min_bytes, piece.max_bytes, std::nullopt});
    keep_winners(pieces);
    if (options_.build_winners) assemble(pieces);
    return std::move(report_);
  }

 private:
  void note(const std::string& text) const {
    if (options_.progress) options_.progress(text);
  }
  void note_base_built(const AlgorithmRow& row, const ir::Schedule& base, double seconds) const {
    if (row.kept_from != nullptr)
      note(fmt::format("{}: base schedule of {} ops, kept from the plan re-planned from", row.name, measured_size(base).ops));
    else
      note(fmt::format("{}: base schedule of {} ops built in {:.3f} s", row.name, measured_size(base).ops, seconds));
  }
  void note_floors_found(const AlgorithmRow& row, const ScheduleFloors& floors, double seconds) const {
    note(fmt::format("{}: floors found in {:.3f} s ({} link directions walked)", row.name, seconds,
                     floors.links_walked));
  }

  // The requested algorithms in order, without repeats; by default every suitable row and the
  // pipelined variants of those that pipeline.
  std::vector<AlgorithmChoice> requested() {
    std::vector<AlgorithmChoice> choices;
    if (options_.algorithms.empty()) {
      for (const auto& row : algorithm_table()) {
        const std::string why = row.unsuitable ? row.unsuitable(topo_) : std::string();
        if (!why.empty()) {
          report_.unsuitable.push_back(fmt::format("{}: {}", row.name, why));
          continue;
        }
        if (row.on_request_only) continue;
        if (std::find(options_.leave_out.begin(), options_.leave_out.end(), row.name) !=
            options_.leave_out.end())
          continue;
        choices.push_back({&row, 1});
        // Most slices first: they share their windows (pipeline.hpp), so the pricing budget
        // goes to the deep pipelines before the shallow ones.
        if (row.pipelines)
          for (auto it = std::rbegin(kPipelineSlices); it != std::rend(kPipelineSlices); ++it)
            if (*it <= row.max_slices) choices.push_back({&row, *it});
      }
      add_kept_rows(choices);
      return choices;
    }
    for (const auto& name : options_.algorithms) {
      const auto choice = find_algorithm(name);
      const std::string why = choice.row->unsuitable ? choice.row->unsuitable(topo_) : "";
      if (!why.empty())
        throw std::invalid_argument(fmt::format("algorithm '{}' does not suit topology '{}': {}",
                                                name, topo_.name(), why));
      const bool repeat = std::any_of(choices.begin(), choices.end(), [&](const auto& c) {
        return c.row == choice.row && c.slices == choice.slices;
      });
      if (!repeat) choices.push_back(choice);
    }
    return choices;
  }

  // The earlier plan's schedules (PlanOptions::kept), each under a kept row holding it as its
  // base, raced unpipelined and at the slice counts that plan used, most slices first.
  void add_kept_rows(std::vector<AlgorithmChoice>& choices) {
    std::map<const AlgorithmRow*, size_t> per_row;
    for (size_t k = 0; k < options_.kept.size(); ++k) {
      const KeptSchedule& kept = options_.kept[k];
      const auto fail = [&](const std::string& why) {
        throw std::invalid_argument(fmt::format("kept schedule {} ({}): {}", k, kept.base.algorithm, why));
      };
      AlgorithmChoice named;
      try {
        named = find_algorithm(kept.base.algorithm);
      } catch (const std::invalid_argument& e) {
        fail(e.what());
      }
      const AlgorithmRow* original = named.row;
      if (kept.base.collective != ir::Collective::AllReduce || kept.base.slices != 1 || named.slices != 1)
        fail("not an unpipelined all-reduce schedule");
      if (original->closed_form != nullptr)
        fail("its row builds from the tree's shape alone (it has a closed form), so the race builds it again: "
             "not kept (kept_schedules)");
      for (const uint32_t slices : kept.slices)
        if (slices < 2 || slices > 1024 || !original->pipelines)
          fail(fmt::format("{} slices: not a pipeline of this algorithm", slices));
      try {
        ir::verify_schedule(kept.base, topo_.num_learners());
      } catch (const std::exception& e) {
        fail(fmt::format("not an all-reduce among the {} learners of '{}': {}", topo_.num_learners(),
                         topo_.name(), e.what()));
      }
      if (std::find(options_.leave_out.begin(), options_.leave_out.end(), original->name) !=
          options_.leave_out.end())
        continue;
      const AlgorithmRow& row = kept_row(*original, per_row[original]++);
      RowState& state = state_of(row);
      state.base = kept.base;
      state.base->min_bytes = 0;
      state.base->max_bytes.reset();
      choices.push_back({&row, 1});
      for (auto it = kept.slices.rbegin(); it != kept.slices.rend(); ++it) choices.push_back({&row, *it});
    }
  }

  // What a re-plan from this plan races again (PlanReport::kept): the winners' bases, of rows
  // without a closed form, as kept_schedules finds them in the plan.
  void keep_winners(const std::vector<std::pair<size_t, EnvelopePiece>>& pieces) {
    for (size_t p = 0; p < pieces.size(); ++p) {
      const size_t index = pieces[p].first;
      const AlgorithmChoice& choice = report_.candidates[index].choice;
      const AlgorithmRow& original = choice.row->kept_from != nullptr ? *choice.row->kept_from : *choice.row;
      if (original.closed_form != nullptr) continue;
      const RowState& state = state_of(*choice.row);
      const ir::Schedule* base = state.base ? &*state.base
                                 : choice.slices == 1 && schedules_[index] ? &*schedules_[index]
                                                                           : nullptr;
      if (base == nullptr) continue;  // (every winner without a closed form has one)
      report_.ranges[p].kept = add_kept(report_.kept, *base, choice.slices);
    }
  }

  // Seconds per message byte on the busiest link of the busiest step of a row's priced base
  // (while unpriced, its floors' pace; infinite without floors): what its pipelines approach
  // for large messages at best.
  double base_pace(const AlgorithmRow& row) {
    RowState& state = state_of(row);
    if (state.pace) return *state.pace;
    if (state.pricer) return *(state.pace = state.pricer->busiest_total());
    const Candidate* base = base_candidate(row);
    if (base != nullptr && base->priced) {  // priced without windows (a closed form): the busiest
      double pace = 0;                      // step, a weaker bound
      for (const StepCost& step : base->cost.steps) pace = std::max(pace, step.per_byte);
      return *(state.pace = pace);
    }
    // Not priced yet: its floors' pace, a lower bound (not kept: pricing gives a better one).
    if (const ScheduleFloors* found = floors_found(row)) return found->busiest_total;
    return std::numeric_limits<double>::infinity();
  }

  const Candidate* base_candidate(const AlgorithmRow& row) const {
    for (const auto& candidate : report_.candidates)
      if (candidate.choice.row == &row && candidate.choice.slices == 1) return &candidate;
    return nullptr;
  }

  // The sizes at which prices are compared for pruning: 0, then cheapest_pieces' span.
  static const std::vector<double>& grid() {
    static const std::vector<double> sizes = [] {
      std::vector<double> s{0};
      for (int i = 0; i <= kGridPerDoubling * kGridDoublings; ++i)
        s.push_back(std::exp2(static_cast<double>(i) / kGridPerDoubling));
      return s;
    }();
    return sizes;
  }

  // Folds a priced candidate into the cheapest price bound so far at each grid size.
  void record_price(const Candidate& candidate) {
    // Only prices that stay in the race: a candidate too big to build leaves it if it wins.
    if (!candidate.racing() || too_big_to_build(candidate)) return;
    if (cheapest_.empty()) cheapest_.assign(grid().size(), std::numeric_limits<double>::infinity());
    for (size_t g = 0; g < grid().size(); ++g)
      cheapest_[g] = std::min(cheapest_[g], price_upper_bound(candidate.cost, grid()[g]));
  }

  // Whether a pipelined variant of `row` cannot win any size. Prices need not grow with the
  // size (a range cut into one more chunk can finish sooner), but both bounds do: for sizes
  // between grid points a and b its price is at least its lower bound at a, and some racing
  // price at most its upper bound at b (price_upper_bound); the first above the second, for
  // every neighbouring pair, rules out every size in between. A margin of 1% covers the chain
  // thinning at probe sizes (schedule_cost.cpp) and rounding.
  // The base itself (slices 1) is the pipeline of one slice. A base not priced (left out by
  // this test) stands in by its floors, a weaker bound.
  bool cannot_win(const AlgorithmRow& row, uint32_t slices) {
    if (!options_.prune_unwinnable || cheapest_.empty()) return false;
    // A critical-path row's variant is priced as the sum of its steps where its critical path is
    // not priced (past the row's budget): then the bound below holds for it as for any row.
    if (row.critical_path && (critical_path_priced_base(row) || !critical_path_out_of_budget(row, slices)))
      return critical_path_cannot_win(row);
    const Candidate* base = base_candidate(row);
    const ScheduleCost* base_cost = base != nullptr && base->priced ? &base->cost : nullptr;
    if (const ScheduleFloors* found = floors_found(row); base_cost == nullptr && found != nullptr) base_cost = &found->cost;
    if (base_cost == nullptr) return false;
    const double pace = base_pace(row);
    const auto& sizes = grid();
    for (size_t g = 0; g + 1 < sizes.size(); ++g) {
      if (pipeline_lower_bound(*base_cost, pace, slices, sizes[g]) <= 1.01 * cheapest_[g + 1])
        return false;
    }
    return true;
  }

  // pipeline_lower_bound adds up steps, which a critical-path price can be below. Its own bound:
  // every pipeline of the base takes at least the base's critical path at zero bytes (slice 0
  // alone goes through every base step, each hop at least its latency), and at least the
  // busiest link direction under all the steps' loads plus the slowest hop.
  bool critical_path_priced_base(const AlgorithmRow& row) const {
    const Candidate* base = base_candidate(row);
    return base != nullptr && base->priced && base->priced_by == PricedBy::CriticalPath;
  }
  bool critical_path_cannot_win(const AlgorithmRow& row) {
    if (!critical_path_priced_base(row)) return false;
    const Candidate* base = base_candidate(row);
    const StepCost& bound = base->cost.steps.at(0);
    const double latency = base->cost.at(0);
    const auto& sizes = grid();
    for (size_t g = 0; g + 1 < sizes.size(); ++g)
      if (std::max(latency, bound.per_byte * sizes[g] + bound.hop_latency) <= 1.01 * cheapest_[g + 1])
        return false;
    return true;
  }

  // The work of pricing a variant (PipelinePricer::work): from the pricer, or, for a base left
  // out on its floors and not priced yet, from the floors, which count the same work per step;
  // then no window is priced yet. A base priced from its windows prices its one-step windows,
  // unless it was left out: they are not counted either way, so the budget leaves out the same
  // variants.
  uint64_t pricing_work(const AlgorithmRow& row, uint32_t slices) {
    const bool single_steps = !window_base(row);
    if (const auto* before = work_before_without_pricer(row))
      return pipeline_windows_work(*before, slices, single_steps, [](const auto&) { return false; });
    return pricer(row).work(slices, single_steps);
  }
  uint64_t base_pricing_work(const AlgorithmRow& row) {
    if (const auto* before = work_before_without_pricer(row)) return before->back();
    return pricer(row).base_work();
  }
  // The floors' lower bound of a variant's pricing work, where it alone shows the variant over
  // the budget (then the budget is the cap whatever the exact work): for a base left out on its
  // floors whose exact work is not counted yet, counting it walks every hop again. The same
  // variants are left out either way; null where the exact count must decide.
  std::optional<uint64_t> work_over_budget_at_least(const AlgorithmRow& row, uint32_t slices, uint64_t spent) {
    if (!window_base(row) || state_of(row).pricer || state_of(row).work_before) return std::nullopt;
    const ScheduleFloors* found = floors_found(row);
    if (found == nullptr) return std::nullopt;
    const auto& at_least = found->work_before_at_least;
    if (kPipelineWorkPerBase * at_least.back() + kPipelineWorkFloor < kPipelinePricingBudget) return std::nullopt;
    const uint64_t work = pipeline_windows_work(at_least, slices, false, [](const auto&) { return false; });
    if (spent + work <= kPipelinePricingBudget) return std::nullopt;
    return work;
  }

  // For a base left out on its floors and not priced from its windows yet: pricing_work_before.
  const std::vector<uint64_t>* work_before_without_pricer(const AlgorithmRow& row) {
    if (!window_base(row) || state_of(row).pricer || floors(row) == nullptr) return nullptr;
    auto& before = state_of(row).work_before;
    if (!before || before->empty()) before = pricing_work_before(topo_, base_schedule(row), options_.cost);
    return &*before;
  }

  // A pipelining row without a closed form: its base is built and priced from its windows.
  static bool window_base(const AlgorithmRow& row) { return row.pipelines && row.closed_form == nullptr; }

  // A window base whose pricer is built with it, its floors taken from the pricer instead of a
  // walk of their own (at 16k learners that walk took 0.01 s beside the pricer's 0.017 s): the
  // base without a size estimate, flexreduce-bw's, the bandwidth-optimal base, priced first on
  // nearly every tree. Its schedule has star ops only, so its pricer costs little more than its
  // floors' walk where it is left out after all.
  static bool floored_by_pricer(const AlgorithmRow& row) {
    const AlgorithmRow& built_by = row.kept_from != nullptr ? *row.kept_from : row;  // (a kept row has no estimate)
    return window_base(row) && built_by.estimate == nullptr;
  }

  // Whether pricing a base from its windows costs enough to leave it out on its floors when it
  // cannot win. Cheaper bases are priced anyway, so that the plan summary shows their curves.
  bool costly_to_price(const AlgorithmRow& row) {
    const ScheduleFloors* found = floors(row);
    return found != nullptr && costly(*found);
  }
  bool costly(const ScheduleFloors& found) const { return found.links_walked >= options_.costly_base_links; }

  // Builds and floors, before anything is priced, every base that run() then asks the floors of
  // (its first loop: the bases priced from their windows, whose floors order the pipelines), as
  // floors() would, on this thread and one more: they are independent of each other and of the
  // prices, and on a big tree they are most of the planner's time (at 16k learners the paper's
  // base and its floors 0.1 s, flexreduce-bw's share LP 0.09 s). Beside each base go the pieces
  // pricing would otherwise find on this thread later: its pipeline footprint, its pricer where
  // it is priced for sure, and the unpipelined rows' closed forms. Only one base is built per
  // thread at a time, so at most one share LP is solved at once. The notes come in row order,
  // from this thread, and everything found is what the lazy paths find, so the plan is the same.
  void prepare_window_bases(const std::vector<AlgorithmChoice>& choices) {
    struct Prepared {
      const AlgorithmRow* row = nullptr;
      bool closed_form_only = false;  // a row priced by its closed form: only that is found
      bool kept = false;              // a kept row: `base` is given, not built
      std::optional<ScheduleCost> closed;
      std::optional<ir::Schedule> base;
      std::optional<ScheduleSize> beyond;  // the build stopped past the limits, at this size
      double build_seconds = 0;
      std::optional<ScheduleFloors> floors;
      double floors_seconds = 0;
      // For rows whose variants are raced: beyond_pipeline_limits needs it for each of them.
      bool wants_footprint = false;
      std::optional<ir::PipelineFootprint> footprint;
      std::unique_ptr<PipelinePricer> pricer;  // floored_by_pricer rows, and cheap ones (below)
      std::exception_ptr error;
      std::atomic<bool> done{false};
    };
    std::deque<Prepared> work;
    for (const auto& choice : choices)
      if (choice.slices == 1 && window_base(*choice.row) && !state_of(*choice.row).floors &&
          std::none_of(work.begin(), work.end(), [&](const Prepared& p) { return p.row == choice.row; }))
      {
        Prepared& p = work.emplace_back();
        p.row = choice.row;
        if (const auto& given = state_of(*choice.row).base; choice.row->kept_from != nullptr && given) {
          p.base = *given;  // (shares its steps)
          p.kept = true;
        }
      }
    // The closed forms of the unpipelined candidates run() prices first: cheap, but on the
    // planning thread they came after every base (16k learners: about 5 ms).
    const size_t bases = work.size();
    for (const auto& choice : choices)
      if (choice.slices == 1 && choice.row->closed_form != nullptr && !state_of(*choice.row).closed_form &&
          std::none_of(work.begin(), work.end(), [&](const Prepared& p) { return p.row == choice.row; })) {
        Prepared& p = work.emplace_back();
        p.row = choice.row;
        p.closed_form_only = true;
      }
    for (Prepared& p : work)
      p.wants_footprint = !p.closed_form_only &&
                          std::any_of(choices.begin(), choices.end(), [&](const AlgorithmChoice& c) {
                            return c.row == p.row && c.slices > 1;
                          });
    // Taken longest first, so that the two threads finish close together: a base without an
    // estimate first (flexreduce-bw's, which solves its share LP), then by group members (the
    // hops walked for the floors), most first. Installed in row order all the same.
    std::vector<size_t> take_order(work.size());
    std::iota(take_order.begin(), take_order.end(), size_t{0});
    const auto expected_work = [&](size_t i) {
      const AlgorithmRow& row = *work[i].row;
      if (i >= bases) return uint64_t{0};  // closed forms last
      return row.estimate == nullptr ? std::numeric_limits<uint64_t>::max() : base_size(row).group_members;
    };
    std::stable_sort(take_order.begin(), take_order.end(),
                     [&](size_t a, size_t b) { return expected_work(a) > expected_work(b); });
    const bool helped = work.size() >= 2 && std::thread::hardware_concurrency() >= 2;
    const auto prepare = [&](Prepared& p) {
      try {
        const AlgorithmRow& row = *p.row;
        if (p.closed_form_only) {
          p.closed = row.closed_form(topo_, options_.cost);
          return;
        }
        if (row.estimate != nullptr && !schedule_fits_limits(row.estimate(topo_))) return;
        auto start = Clock::now();
        if (!p.kept) {
          try {
            p.base = build_base(row, topo_, options_.cost);
          } catch (const ScheduleBeyondLimits& beyond) {
            p.beyond = beyond.size;
            p.build_seconds = seconds_since(start);
            return;
          }
        }
        p.build_seconds = seconds_since(start);
        if (!schedule_fits_limits(measured_size(*p.base))) return;
        start = Clock::now();
        if (floored_by_pricer(row)) {
          p.pricer = std::make_unique<PipelinePricer>(topo_, *p.base, options_.cost);
          p.floors = floors_from_pricer(*p.pricer, options_.cost);
        } else {
          p.floors = schedule_floors(topo_, *p.base, options_.cost);
        }
        p.floors_seconds = seconds_since(start);
        // A base cheap to price is priced whether or not it can win (costly_to_price): its pricer
        // is built here too, off the planning thread (16k learners: rd-leader's and
        // binomial-tree's, 7 ms), and taken by pricer() when asked for.
        if (!p.pricer && !costly(*p.floors))
          p.pricer = std::make_unique<PipelinePricer>(topo_, *p.base, options_.cost);
        if (p.wants_footprint) p.footprint = ir::pipeline_footprint(*p.base, topo_.num_learners());
      } catch (...) {
        p.error = std::current_exception();
      }
    };
    std::atomic<size_t> next{0};
    const auto take_one = [&]() -> bool {
      const size_t taken = next.fetch_add(1);
      if (taken >= work.size()) return false;
      const size_t i = take_order[taken];
      prepare(work[i]);
      work[i].done.store(true, std::memory_order_release);
      work[i].done.notify_one();
      return true;
    };
    // Installs a prepared base and its floors, with the notes floors() gives.
    const auto install = [&](Prepared& p) {
      if (p.error) {
        next.store(work.size());  // the helper takes no more; it is joined before `work` goes
        std::rethrow_exception(p.error);
      }
      RowState& state = state_of(*p.row);
      if (p.closed_form_only) {
        state.closed_form = std::move(p.closed);
        return;
      }
      auto& floors = state.floors.emplace();  // none, unless found below
      if (p.beyond) {
        stopped(*p.row, *p.beyond, p.build_seconds);
        return;
      }
      if (!p.base) return;  // too big to build, by its estimate: no floors
      note_base_built(*p.row, *p.base, p.build_seconds);
      state.base = std::move(p.base);
      if (p.footprint) state.footprint = p.footprint;
      if (p.pricer) (floored_by_pricer(*p.row) ? state.pricer : state.early_pricer) = std::move(p.pricer);
      if (!p.floors) return;
      note_floors_found(*p.row, *p.floors, p.floors_seconds);
      floors = std::move(p.floors);
    };
    std::optional<std::jthread> helper;
    if (helped)
      helper.emplace([&] { while (take_one()) {} });
    // This thread takes work too, and installs in row order whatever is ready after each piece.
    size_t installed = 0;
    for (bool more = true; installed < work.size();) {
      more = more && take_one();
      // With nothing left to take, sleep until the helper finishes the next base in order.
      if (!more) work[installed].done.wait(false, std::memory_order_acquire);
      for (; installed < work.size() && work[installed].done.load(std::memory_order_acquire); ++installed)
        install(work[installed]);
    }
  }

  // The floors of a pipelining row's base (schedule_floors), building the base; null where the
  // base is too big to build.
  const ScheduleFloors* floors(const AlgorithmRow& row) {
    auto& found = state_of(row).floors;
    if (!found) {
      found.emplace();
      if (schedule_fits_limits(base_size(row))) {
        const auto start = Clock::now();
        *found = floored_by_pricer(row) ? floors_from_pricer(pricer(row), options_.cost)
                                        : schedule_floors(topo_, base_schedule(row), options_.cost);
        note_floors_found(row, **found, seconds_since(start));
      }
    }
    return floors_found(row);
  }

  void price(size_t index, const AlgorithmChoice& choice) {
    price_candidate(index, choice);
    auto& candidate = report_.candidates[index];
    // (A closed form may carry its own, the ring's where it is too big to build.)
    if (candidate.priced) candidate.cost.busy_floor = std::max(candidate.cost.busy_floor, busy_floor(choice));
    record_price(candidate);
  }

  void price_candidate(size_t index, const AlgorithmChoice& choice) {
    auto& candidate = report_.candidates[index];
    candidate.choice = choice;
    candidate.algorithm = choice.name();
    candidate.note = choice.row->note ? choice.row->note(topo_) : std::string();
    // The estimate, or only building tells: the unpipelined schedule, built once, sliced for
    // the variants.
    candidate.size = choice.sliced(base_size(*choice.row));
    if (auto closed = closed_form(choice)) {
      candidate.priced = true;
      candidate.priced_by = PricedBy::ClosedForm;
      candidate.cost = std::move(*closed);
    } else if (choice.slices > 1 && !(candidate.left_out_because = beyond_pipeline_limits(candidate)).empty()) {
      note(fmt::format("{}: left out: {}", candidate.algorithm, candidate.left_out_because));
    } else if (choice.slices > 1 && cannot_win(*choice.row, choice.slices)) {
      candidate.left_out_because =
          "cannot win: a lower bound of its price is above the cheapest price at every size";
      note(fmt::format("{}: not priced: {}", candidate.algorithm, candidate.left_out_because));
    } else if (auto by_path = critical_path_price(choice)) {
      candidate.cost = std::move(*by_path);
      candidate.priced = true;
      candidate.priced_by = PricedBy::CriticalPath;
    } else if (choice.slices > 1 && schedule_fits_limits(base_size(*choice.row)) &&
               2 * base_size(*choice.row).group_members <= kPipelinePricingBudget) {
      // Priced from the base schedule's windows (pipeline.hpp); built only if it wins.
      auto& spent = state_of(*choice.row).pricing_spent;
      if (const auto at_least = work_over_budget_at_least(*choice.row, choice.slices, spent)) {
        candidate.left_out_because = fmt::format(
            "pricing it would take at least {} more units of work (chain hops walked, link loads "
            "added; budget {} for this algorithm)", *at_least, kPipelinePricingBudget);
        note(fmt::format("{}: left out: {}", candidate.algorithm, candidate.left_out_because));
        return;
      }
      const uint64_t work = pricing_work(*choice.row, choice.slices);
      const uint64_t budget = std::min(kPipelinePricingBudget,
                                       kPipelineWorkPerBase * base_pricing_work(*choice.row) + kPipelineWorkFloor);
      if (spent + work > budget) {
        candidate.left_out_because = fmt::format(
            "pricing it would take {} more units of work (chain hops walked, link loads added; "
            "budget {} for this algorithm)", work, budget);
        note(fmt::format("{}: left out: {}", candidate.algorithm, candidate.left_out_because));
        return;
      }
      spent += work;
      const auto start = Clock::now();
      candidate.cost = pricer(*choice.row).cost(choice.slices);
      candidate.priced = true;
      candidate.priced_by = PricedBy::PipelineWindows;
      note(fmt::format("{}: priced from the base schedule in {:.3f} s", candidate.algorithm,
                       seconds_since(start)));
    } else if (choice.slices == 1 && window_base(*choice.row) && costly_to_price(*choice.row) &&
               cannot_win(*choice.row, 1)) {
      candidate.left_out_because =
          "cannot win: a lower bound of its price (its steps' floors) is above the cheapest price "
          "at every size";
      note(fmt::format("{}: not priced: {}", candidate.algorithm, candidate.left_out_because));
      // The paper's reduce calls are reported from its schedule, built for the floors.
      if (reports_reduce_calls(candidate.choice))
        report_.flexreduce_calls = reduce_call_stats(topo_, base_schedule(*choice.row));
    } else if (schedule_fits_limits(candidate.size)) {
      build(index);
    } else {
      candidate.left_out_because = too_big(candidate);
      note(fmt::format("{}: left out: {}", candidate.algorithm, candidate.left_out_because));
    }
  }

  // A critical-path row's variant priced so, within what is left of the row's budget
  // (PlanOptions::critical_path_budget); null otherwise, and it is priced as the sum of its steps, an upper
  // bound of the same run.
  // Whether a critical-path row's variant is past what is left of the row's budget before its
  // critical path is begun (critical_path_price then prices it step by step without trying).
  bool critical_path_out_of_budget(const AlgorithmRow& row, uint32_t slices) {
    if (!schedule_fits_limits(base_size(row))) return true;
    return state_of(row).critical_path_spent + critical_path_least_work(row, slices) > options_.critical_path_budget;
  }
  // CostParams::host_cores' floor of a variant: its base's hops, once per slice (a slice is a
  // copy of the base on units of its own). None where the base is too big to build (not a
  // host's learners) or the cores are not priced.
  double busy_floor(const AlgorithmChoice& choice) {
    if (options_.cost.host_cores <= 0 || !schedule_fits_limits(base_size(*choice.row))) return 0;
    return host_busy_floor(base_counts(*choice.row).hops * choice.slices, options_.cost);
  }

  // What a variant's critical path costs at least (critical_path_least_work), and the links
  // lowering its base walks (as many as its floors walked, where found: at a million learners
  // that alone can pass the budget). Counted as 2 units a hop until 2026-11-30, when every
  // attempt at a million learners ran 0.3-1.6 s into the budget and failed (three on the flat
  // and the wide tree, one on the generated one).
  uint64_t critical_path_least_work(const AlgorithmRow& row, uint32_t slices) {
    const ScheduleFloors* found = floors_found(row);
    const uint64_t walked = found != nullptr ? found->links_walked : 0;
    return flexplan::critical_path_least_work(base_counts(row), slices, options_.cost) + walked;
  }
  const CriticalPathCounts& base_counts(const AlgorithmRow& row) {
    auto& counted = state_of(row).base_counts;
    if (!counted) counted = critical_path_counts(base_schedule(row), topo_.num_learners());
    return *counted;
  }

  std::optional<ScheduleCost> critical_path_price(const AlgorithmChoice& choice) {
    if (!choice.row->critical_path || !schedule_fits_limits(base_size(*choice.row))) return std::nullopt;
    auto& spent = state_of(*choice.row).critical_path_spent;
    const uint64_t least = critical_path_least_work(*choice.row, choice.slices);
    if (spent + least > options_.critical_path_budget) {
      note(fmt::format("{}: priced step by step: its critical path would take at least {} units of work "
                       "(envelope lines compared, links walked; {} left of {})", choice.name(), least,
                       options_.critical_path_budget - std::min(spent, options_.critical_path_budget),
                       options_.critical_path_budget));
      return std::nullopt;
    }
    const auto start = Clock::now();
    uint64_t work = 0;
    auto cost = critical_path_cost_within(topo_, base_schedule(*choice.row), choice.slices, options_.cost,
                                          options_.critical_path_budget - spent, work);
    spent += work;
    if (cost)
      note(fmt::format("{}: priced by its critical path in {:.3f} s", choice.name(), seconds_since(start)));
    else
      note(fmt::format("{}: priced step by step: its critical path passed the budget ({} units of work: envelope lines compared, links walked; "
                       "at least {} were foreseen) after {:.3f} s", choice.name(), options_.critical_path_budget, least,
                       seconds_since(start)));
    return cost;
  }

  std::string too_big(const Candidate& candidate) const { return too_big(candidate.choice, candidate.size); }
  std::string too_big(const AlgorithmChoice& choice, const ScheduleSize& size) const {
    if (const auto found = rows_.find(choice.row); found != rows_.end() && found->second.stopped)
      return fmt::format("its {}schedule passed the limits while being built (it stopped at {} ops "
                         "and {} group members; limits {} and {})",
                         choice.slices > 1 ? "base " : "", found->second.stopped->ops,
                         found->second.stopped->group_members, kMaxScheduleOps, kMaxScheduleGroupMembers);
    return fmt::format("its schedule would have ~{} ops and {} group members (limits {} and {})",
                       size.ops, size.group_members, kMaxScheduleOps, kMaxScheduleGroupMembers);
  }

  // A base whose builder stopped past the limits (ScheduleBeyondLimits): its size is at least
  // what was built, which is beyond the limits, so every variant is left out by size.
  void stopped(const AlgorithmRow& row, const ScheduleSize& size, double seconds) {
    state_of(row).stopped = size;
    state_of(row).base_size = size;
    note(fmt::format("{}: base schedule passed the limits while being built ({} ops, {} group "
                     "members), stopped after {:.3f} s", row.name, size.ops, size.group_members, seconds));
  }

  // Builds the candidate's schedule and prices it with the evaluator; a closed-form price
  // must agree.
  void build(size_t index) {
    auto& candidate = report_.candidates[index];
    auto start = Clock::now();
    const AlgorithmRow& row = *candidate.choice.row;
    auto schedule = compact(candidate.choice) ? ir::compact_pipeline(base_schedule(row), candidate.choice.slices)
                    : row.estimate == nullptr || row.pipelines ? candidate.choice.from_base(base_schedule(row))
                                                                : candidate.choice.build(topo_, options_.cost);
    candidate.size = measured_size(schedule);
    note(fmt::format("{}: {} steps, {} ops built in {:.3f} s", candidate.algorithm,
                     ir::expanded_step_count(schedule, schedule.slices), candidate.size.ops,
                     seconds_since(start)));
    if (candidate.priced_by == PricedBy::PipelineWindows || candidate.priced_by == PricedBy::CriticalPath) {
      // Its windows or its critical path priced exactly this schedule
      // (tests/unit/planner_pipeline_test.cpp, planner_critical_path_test.cpp).
      candidate.built = true;
      schedules_[index] = std::move(schedule);
      return;
    }
    start = Clock::now();
    // A pipelining row's base is priced step by step by its pricer, whose one-step windows its
    // pipelined variants share; a closed form is checked against the general evaluator.
    const bool by_windows = row.pipelines && candidate.choice.slices == 1 && !candidate.priced;
    // The check of a closed form is skipped on schedules of kClosedFormCheckOps ops or more
    // (hierarchical's leader ring on 1,000 machines: 2 million ops, 2.2 s of a 1M-learner plan);
    // the closed forms are tested equal to the evaluator (tests/unit), and the winner is still
    // verified before it is written.
    if (candidate.priced && candidate.size.ops >= kClosedFormCheckOps) {
      candidate.built = true;
      schedules_[index] = std::move(schedule);
      return;
    }
    auto cost = by_windows ? pricer(row).cost(1) : evaluate_schedule(topo_, schedule, options_.cost);
    // The closed form is checked on its steps (the cores' floor, set where the candidate was
    // priced, would hide a disagreement at small sizes), then keeps the floor.
    const double floor = candidate.cost.busy_floor;
    candidate.cost.busy_floor = 0;
    note(fmt::format("{}: priced in {:.3f} s", candidate.algorithm, seconds_since(start)));
    if (candidate.priced && !same_price(cost, candidate.cost))
      throw std::logic_error(fmt::format(
          "cost model: the closed form of {} ({} s at 1 MiB) disagrees with the evaluator ({} s)",
          candidate.algorithm, candidate.cost.at(1 << 20), cost.at(1 << 20)));
    if (reports_reduce_calls(candidate.choice))
      report_.flexreduce_calls = reduce_call_stats(topo_, schedule);
    // A closed form checked equal keeps its price, the one it raced with: the plan's times are
    // then the same whether or not the winners are built (PlanOptions::build_winners).
    if (!candidate.priced) candidate.cost = std::move(cost);
    candidate.cost.busy_floor = floor;
    candidate.priced = true;
    candidate.built = true;
    if (candidate.priced_by == PricedBy::Unpriced) candidate.priced_by = PricedBy::Evaluator;
    schedules_[index] = std::move(schedule);
  }

  // The cheapest pieces over the racing candidates, after building every winner; a winner too
  // big to build leaves the race and the pieces are found again without it.
  std::vector<std::pair<size_t, EnvelopePiece>> winning_pieces() {
    for (;;) {
      std::vector<size_t> racing;
      std::vector<PriceCurve> curves;
      for (size_t i = 0; i < report_.candidates.size(); ++i)
        if (report_.candidates[i].racing()) {
          racing.push_back(i);
          const ScheduleCost* cost = &report_.candidates[i].cost;
          curves.push_back([cost](double n) { return cost->at(n); });
        }
      if (racing.empty())
        throw std::runtime_error("no algorithm could be built for topology '" + topo_.name() +
                                 "': every requested schedule exceeds the size limits");
      std::vector<std::pair<size_t, EnvelopePiece>> pieces;
      bool dropped = false;
      for (const auto& piece : cheapest_pieces(curves)) {
        const size_t index = racing[piece.curve];
        auto& candidate = report_.candidates[index];
        if (!candidate.built) {
          if (too_big_to_build(candidate)) {
            candidate.left_out_because = fmt::format(
                "would win messages of {} and up, but {}",
                format_bytes(static_cast<double>(piece.min_bytes)), too_big(candidate));
            note(fmt::format("{}: left out: {}", candidate.algorithm,
                             candidate.left_out_because));
            dropped = true;
            break;
          }
          if (options_.build_winners) build(index);
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
    plan.rank_names = topo_.learner_names();
    for (size_t p = 0; p < pieces.size(); ++p) {
      const size_t index = pieces[p].first;  // not a structured binding: clang 14 cannot capture one
      const EnvelopePiece& piece = pieces[p].second;
      // A candidate may win two separate ranges: the last of them takes the built schedule,
      // earlier ones a copy.
      const bool wins_later = std::any_of(pieces.begin() + static_cast<std::ptrdiff_t>(p) + 1,
                                          pieces.end(), [&](const auto& later) {
                                            return later.first == index;
                                          });
      ir::Schedule schedule = wins_later ? *schedules_[index] : std::move(*schedules_[index]);
      schedule.min_bytes = piece.min_bytes;
      schedule.max_bytes = piece.max_bytes;
      plan.schedules.push_back(std::move(schedule));
    }
  }

  // The unpipelined schedule of a row without a size estimate, built on first use.
  const ir::Schedule& base_schedule(const AlgorithmRow& row) {
    auto& base = state_of(row).base;
    if (!base) {
      const auto start = Clock::now();
      base = build_base(row, topo_, options_.cost);
      note_base_built(row, *base, seconds_since(start));
    }
    return *base;
  }

  // Whether a priced candidate, unbuilt, would leave the race if it won: its schedule is
  // beyond the size limits (a compact pipeline was checked against plan.bin's before pricing).
  bool too_big_to_build(const Candidate& candidate) const {
    return !candidate.built && !compact(candidate.choice) && !schedule_fits_limits(candidate.size);
  }

  // Whether the choice is built as a compact pipeline: its base alone is held in memory.
  bool compact(const AlgorithmChoice& choice) const {
    return options_.compact_pipelines && choice.slices > 1;
  }

  // Why a pipeline is left out before pricing, or empty: beyond what plan.bin allows
  // (ir/pipeline_form.hpp), or, built whole, beyond the schedule limits. The size estimate
  // settles most cases without building the base.
  std::string beyond_pipeline_limits(const Candidate& candidate) {
    const uint64_t slices = candidate.choice.slices;
    if (!compact(candidate.choice) && !schedule_fits_limits(candidate.size)) return too_big(candidate);
    const ir::PipelineFootprint estimate{candidate.size.ops / slices, candidate.size.group_members / slices, 0};
    std::string why = ir::pipeline_beyond_limits(estimate, slices);
    if (!why.empty() || !schedule_fits_limits(base_size(*candidate.choice.row))) return why;
    auto& footprint = state_of(*candidate.choice.row).footprint;
    if (!footprint) footprint = ir::pipeline_footprint(base_schedule(*candidate.choice.row), topo_.num_learners());
    return ir::pipeline_beyond_limits(*footprint, slices);
  }

  // A choice's closed-form price (none for a pipeline): found beside the bases where
  // prepare_window_bases ran, else here.
  std::optional<ScheduleCost> closed_form(const AlgorithmChoice& choice) {
    if (choice.slices != 1) return std::nullopt;
    if (const auto& found = state_of(*choice.row).closed_form) return *found;
    return choice.closed_form(topo_, options_.cost);
  }

  // The size of a row's unpipelined schedule (its estimate, or the built base), found once:
  // both walk the tree or the schedule, and every variant of the row asks.
  ScheduleSize base_size(const AlgorithmRow& row) {
    auto& size = state_of(row).base_size;
    if (size) return *size;
    if (row.estimate != nullptr) return *(size = row.estimate(topo_));
    const auto start = Clock::now();
    try {
      const ScheduleSize measured = measured_size(base_schedule(row));
      return *(size = measured);
    } catch (const ScheduleBeyondLimits& beyond) {
      stopped(row, beyond.size, seconds_since(start));
      return beyond.size;
    }
  }

  PipelinePricer& pricer(const AlgorithmRow& row) {
    RowState& state = state_of(row);
    auto& pricer = state.pricer;
    if (!pricer && state.early_pricer) pricer = std::move(state.early_pricer);
    if (!pricer) pricer = std::make_unique<PipelinePricer>(topo_, base_schedule(row), options_.cost);
    return *pricer;
  }

  const Topology& topo_;
  const PlanOptions& options_;
  PlanReport report_;
  // What the race has found of one row, shared by its variants; each field is found once, when
  // first asked for (an empty optional: not yet).
  struct RowState {
    std::optional<ir::Schedule> base;  // its unpipelined schedule (base_schedule)
    std::optional<ScheduleSize> base_size;  // base_size
    std::optional<ScheduleSize> stopped;    // its build stopped past the limits: what was built
    std::optional<CriticalPathCounts> base_counts;  // of the base, once counted
    std::optional<ir::PipelineFootprint> footprint;  // of the base
    // The closed form's price (none: it has none here), found beside the bases or on first use.
    std::optional<std::optional<ScheduleCost>> closed_form;
    // Its floors (floors(); none: the base is too big to build).
    std::optional<std::optional<ScheduleFloors>> floors;
    std::unique_ptr<PipelinePricer> pricer;  // over the base
    // Built beside the base for a base priced whatever its floors say, and moved to `pricer`
    // only when pricing asks (`pricer` alone decides what base_pace and the work counts read).
    std::unique_ptr<PipelinePricer> early_pricer;
    std::optional<double> pace;                    // base_pace, once exact
    std::optional<std::vector<uint64_t>> work_before;  // pricing_work_before
    uint64_t pricing_spent = 0;        // of kPipelinePricingBudget, over its variants
    uint64_t critical_path_spent = 0;  // of PlanOptions::critical_path_budget
  };
  RowState& state_of(const AlgorithmRow& row) { return rows_[&row]; }
  static bool reports_reduce_calls(const AlgorithmChoice& choice) {
    return choice.row->reports_reduce_calls && choice.slices == 1;
  }
  // The row's floors where already found and the base could be floored; null otherwise (this
  // looks, it does not find them: floors() does).
  const ScheduleFloors* floors_found(const AlgorithmRow& row) {
    const auto& found = state_of(row).floors;
    return found && *found ? &**found : nullptr;
  }

  std::map<const AlgorithmRow*, RowState> rows_;
  std::vector<std::optional<ir::Schedule>> schedules_;  // by candidate index, once built
  // By grid() size: the least price_upper_bound of the racing candidates so far.
  std::vector<double> cheapest_;
};

constexpr double kRelativeTie = 1e-9;

}  // namespace

std::vector<KeptSchedule> kept_schedules(const ir::Plan& plan) {
  std::vector<KeptSchedule> kept;
  for (const ir::Schedule& schedule : plan.schedules) {
    if (schedule.collective != ir::Collective::AllReduce) continue;
    AlgorithmChoice named;
    try {
      named = find_algorithm(schedule.algorithm);
    } catch (const std::invalid_argument&) {
      continue;  // not a name this version plans
    }
    if (named.slices != schedule.slices) continue;  // a pipeline held whole, or a name without its "@"
    if (named.row->closed_form != nullptr) continue;
    ir::Schedule base = schedule;
    base.algorithm = std::string(named.row->name);
    base.slices = 1;
    add_kept(kept, std::move(base), named.slices);
  }
  return kept;
}

std::string_view to_string(PricedBy priced_by) {
  switch (priced_by) {
    case PricedBy::Unpriced: return "";
    case PricedBy::Evaluator: return "evaluator";
    case PricedBy::ClosedForm: return "closed form";
    case PricedBy::PipelineWindows: return "pipeline windows";
    case PricedBy::CriticalPath: return "critical path";
  }
  return "";
}

double price_upper_bound(const ScheduleCost& cost, double bytes) {
  // ChainCost::at is latency + chunk * first_chunk + (range - chunk) * steady, at most
  // latency + range * max(first_chunk, steady) since chunk <= range: nondecreasing in bytes.
  double total = 0;
  for (const StepCost& step : cost.steps) {
    double time = step.per_byte * bytes + step.hop_latency;
    for (const ChainCost& chain : step.chains)
      time = std::max(time, chain.latency + chain.share * bytes * std::max(chain.first_chunk, chain.steady));
    total += static_cast<double>(step.repeat) * time;
  }
  return std::max(total, cost.busy_floor);
}

double pipeline_lower_bound(const ScheduleCost& base, double busiest_total, uint32_t slices, double bytes) {
  // The first slice's run: each base step at bytes / slices, each step's price at least its
  // bandwidth term and its chains' floors, which grow with the size as prices need not.
  // ChainCost::at is latency + chunk (first_chunk - steady) + range steady, with the chunk
  // range / ceil(range / c) at least range c / (range + c) (at most range); with first_chunk
  // below steady, at least latency + range first_chunk.
  const double slice = bytes / slices;
  const double c = base.chunk_bytes;
  const auto chain_floor = [&](const ChainCost& chain) {
    const double range = chain.share * slice;
    if (chain.first_chunk < chain.steady) return chain.latency + range * chain.first_chunk;
    const double chunk = range > 0 ? range * c / (range + c) : 0;
    return chain.latency + chunk * (chain.first_chunk - chain.steady) + range * chain.steady;
  };
  double first_slice = 0, hops = 0;
  std::vector<double> floors;  // by base step, while there are few
  uint64_t steps = 0;
  for (const StepCost& step : base.steps) steps += step.repeat;
  const bool by_window = steps <= kWindowBoundSteps;
  for (const StepCost& step : base.steps) {
    double time = step.per_byte * slice + step.hop_latency;
    for (const ChainCost& chain : step.chains) time = std::max(time, chain_floor(chain));
    const double times = static_cast<double>(step.repeat);
    first_slice += times * time;
    hops += times * step.hop_latency;
    if (by_window) floors.insert(floors.end(), step.repeat, time);
  }
  if (by_window && slices > 1) {
    // Every window of the pipeline, not just the first slice's: window t holds base steps
    // max(0, t - slices + 1) .. min(t, m - 1), so it costs at least the largest of their floors.
    // (The S - 1 windows after the first slice's run are what a deep pipeline of long chains
    // pays for; the first-slice bound left them out.)
    // Both ends of the window only move forward: a sliding maximum (indices of decreasing
    // floors, the front the window's largest) keeps this linear in m + S.
    const size_t m = floors.size();
    double windows = 0;
    std::deque<size_t> largest;
    for (size_t t = 0; t + 1 < m + slices; ++t) {
      const size_t first = t + 1 > slices ? t + 1 - slices : 0;
      if (t < m) {
        while (!largest.empty() && floors[largest.back()] <= floors[t]) largest.pop_back();
        largest.push_back(t);
      }
      while (largest.front() < first) largest.pop_front();
      windows += floors[largest.front()];
    }
    first_slice = std::max(first_slice, windows);
  }
  return std::max(first_slice, hops + busiest_total * bytes);
}

namespace {

// Index of the cheapest curve at n; ties within kRelativeTie go to the lower index.
size_t cheapest_at(std::span<const PriceCurve> curves, double n, std::vector<double>& prices) {
  prices.resize(curves.size());
  size_t best = 0;
  for (size_t i = 0; i < curves.size(); ++i) {
    prices[i] = curves[i](n);
    if (prices[i] < prices[best] * (1 - kRelativeTie)) best = i;
  }
  return best;
}

}  // namespace

std::vector<EnvelopePiece> cheapest_pieces(std::span<const PriceCurve> curves) {
  if (curves.empty()) throw std::invalid_argument("cheapest_pieces: no curves");
  std::vector<double> prices;
  const auto winner_at = [&](uint64_t n) {
    return cheapest_at(curves, static_cast<double>(n), prices);
  };
  std::vector<EnvelopePiece> pieces;
  // Every change of winner between sizes lo and hi (winners known), to the byte: halve the
  // interval while its ends disagree.
  const auto refine = [&](auto&& self, uint64_t lo, size_t at_lo, uint64_t hi, size_t at_hi) -> void {
    if (at_lo == at_hi) return;
    if (hi - lo == 1) {
      pieces.back().max_bytes = hi;
      pieces.push_back({at_hi, hi, std::nullopt});
      return;
    }
    const uint64_t mid = lo + (hi - lo) / 2;
    const size_t at_mid = winner_at(mid);
    self(self, lo, at_lo, mid, at_mid);
    self(self, mid, at_mid, hi, at_hi);
  };
  uint64_t previous = 1;
  size_t previous_winner = winner_at(previous);
  pieces.push_back({previous_winner, 0, std::nullopt});
  for (int k = 1; k <= kGridPerDoubling * kGridDoublings; ++k) {
    const auto n = static_cast<uint64_t>(std::round(std::exp2(static_cast<double>(k) / kGridPerDoubling)));
    if (n <= previous) continue;
    const size_t winner = winner_at(n);
    refine(refine, previous, previous_winner, n, winner);
    previous = n;
    previous_winner = winner;
  }
  return pieces;
}

const Candidate& PlanReport::chosen(uint64_t bytes) const {
  for (const PlanRange& range : ranges)
    if (bytes >= range.min_bytes && (!range.max_bytes || bytes < *range.max_bytes))
      return candidates.at(range.candidate);
  throw std::logic_error(fmt::format("plan report: no all-reduce range holds {} bytes", bytes));
}

const Candidate* PlanReport::find(std::string_view algorithm) const {
  for (const auto& candidate : candidates)
    if (candidate.algorithm == algorithm) return &candidate;
  return nullptr;
}

PlanReport build_plan_report(const Topology& topo, const PlanOptions& options) {
  // --algorithms narrows each collective that has the names given: all-reduce takes its own
  // (and all of its rows when none of the names is one of them).
  // Held as long as the builder, which keeps a reference to it (and may be freed on a thread).
  auto all_reduce_options = std::make_shared<PlanOptions>(options);
  PlanOptions& all_reduce = *all_reduce_options;
  std::erase_if(all_reduce.algorithms, [](const std::string& name) {
    try {
      find_algorithm(name);
      return false;
    } catch (const std::invalid_argument& unknown) {
      // A name no collective has is an error, in all-reduce's words.
      for (size_t c = 1; c < ir::kCollectiveCount; ++c) {
        try {
          plan_collective_algorithm_name_check(static_cast<ir::Collective>(c), name);
          return true;
        } catch (const std::invalid_argument&) {
        }
      }
      throw;
    }
  });
  const auto asked = [&](ir::Collective c) {
    return std::find(options.collectives.begin(), options.collectives.end(), c) !=
           options.collectives.end();
  };
  const bool others_asked = std::any_of(options.collectives.begin(), options.collectives.end(),
                                        [](ir::Collective c) { return c != ir::Collective::AllReduce; });
  // The other collectives' races beside all-reduce's on a large tree (PlanOptions::
  // plan_collectives_beside_from_learners), their progress lines kept whole by one lock.
  const bool beside = others_asked && std::thread::hardware_concurrency() >= 2 &&
                      topo.num_learners() >= options.plan_collectives_beside_from_learners;
  // Beside it, the sharded collectives' race (all-gather, and reduce-scatter its transpose) and
  // the rooted ones' (broadcast and reduce) each on a thread of its own: the all-gather race is
  // the longest at a million learners, and the rooted races would otherwise wait for it while
  // all-reduce's thread has finished (generated tree: 1.8 s with one core idle).
  struct OtherRaces {
    PlanOptions options;  // the group's collectives, with the progress lock where told
    std::vector<std::string> left_out;
    std::future<std::vector<CollectivePlan>> plans;
  };
  std::mutex progress_lock;  // (before the races: their futures wait in their destructors)
  // A race that ends while another still runs verifies its schedules on its own thread, where
  // a core would otherwise idle, until no race runs; the writer verifies the rest beside its
  // encoder (ir/verify.hpp). `racing` counts the races not yet ended.
  auto verified = std::make_shared<ir::VerifiedSchedules>();
  std::atomic<int> racing{1};
  const auto verify_while_others_race = [&racing, &verified](const std::vector<ir::Schedule>& schedules,
                                                             int32_t world_size) {
    if (racing.fetch_sub(1) <= 1) return;  // the last race to end
    std::vector<const ir::Schedule*> done;
    for (const ir::Schedule& schedule : schedules) {
      // Once no other race runs, the writer verifies the rest beside its encoder.
      if (!done.empty() && racing.load() == 0) break;
      // Pipelines of one base share its steps, which verify once (as verify_plan does).
      if (std::any_of(done.begin(), done.end(), [&](const ir::Schedule* d) { return d->steps.shares(schedule.steps); }))
        continue;
      if (verified->verify_and_keep(schedule, world_size)) done.push_back(&schedule);
    }
  };
  std::vector<std::unique_ptr<OtherRaces>> beside_races;
  if (beside) {
    std::function<void(std::string_view)> locked;
    if (options.progress) {
      locked = [&progress_lock, say = options.progress](std::string_view what) {
        const std::lock_guard<std::mutex> hold(progress_lock);
        say(what);
      };
      all_reduce.progress = locked;
    }
    for (const bool sharded : {true, false}) {
      auto races = std::make_unique<OtherRaces>();
      races->options = options;
      if (options.progress) races->options.progress = locked;
      std::erase_if(races->options.collectives, [&](ir::Collective c) {
        return c == ir::Collective::AllReduce || ir::has_shards(c) != sharded;
      });
      if (races->options.collectives.empty()) continue;
      racing.fetch_add(1);
      races->plans = std::async(std::launch::async, [&topo, &racing, &verify_while_others_race, group = races.get()] {
        std::vector<CollectivePlan> plans;
        try {
          plans = plan_other_collectives(topo, group->options, &group->left_out);
        } catch (...) {
          racing.fetch_sub(1);
          throw;
        }
        // The copies (all-gather, broadcast): their transposes are proven through them.
        std::vector<ir::Schedule> copies;
        for (const CollectivePlan& plan : plans)
          if (!ir::combines(plan.collective)) copies.insert(copies.end(), plan.schedules.begin(), plan.schedules.end());
        verify_while_others_race(copies, topo.num_learners());
        return plans;
      });
      beside_races.push_back(std::move(races));
    }
  }
  // (A throw from all-reduce's race waits for the races beside in their destructors: they hold references.)
  auto builder = std::make_unique<PlanBuilder>(topo, all_reduce);
  PlanReport report;
  try {
    report = builder->run();
  } catch (...) {
    racing.fetch_sub(1);
    throw;
  }
  if (beside) all_reduce.progress = options.progress;  // the lock goes with this frame
  if (builder->large())
    report.freeing = std::make_shared<std::jthread>(
        [gone = std::move(builder), all_reduce_options]() mutable { gone.reset(); });
  // All-reduce is planned always (the plan's other fields come with it) and kept when asked.
  if (!asked(ir::Collective::AllReduce)) report.plan.schedules.clear();
  if (beside) {
    verify_while_others_race(report.plan.schedules, report.plan.world_size);
    report.verified = verified;
  }
  // A copying collective and its transpose share one race (collective_planner.hpp). The
  // groups planned beside come in collective order, sharded first, as one call lists them.
  std::vector<CollectivePlan> other_plans;
  if (beside) {
    for (auto& races : beside_races) {
      std::vector<CollectivePlan> plans = races->plans.get();
      std::move(plans.begin(), plans.end(), std::back_inserter(other_plans));
      report.collectives_left_out.insert(report.collectives_left_out.end(), races->left_out.begin(),
                                         races->left_out.end());
    }
  } else if (others_asked) {
    other_plans = plan_other_collectives(topo, options, &report.collectives_left_out);
  }
  for (CollectivePlan& planned : other_plans) {
    // Copies share their steps (ir/shared_vector.hpp): the report keeps its own.
    report.plan.schedules.insert(report.plan.schedules.end(), planned.schedules.begin(),
                                 planned.schedules.end());
    report.collectives.push_back(std::move(planned));
  }
  return report;
}

ir::Plan build_plan(const Topology& topo, const PlanOptions& options) {
  return build_plan_report(topo, options).plan;
}

}  // namespace flexplan
