// The main job, `flexplan TOPOLOGY.json -o plan.bin [--algorithms A,B] [--collectives C,D]`:
// plan every candidate algorithm of every collective, keep for each message-size range the one
// the cost model predicts fastest, verify and write plan.bin, and print what was decided and
// what it should buy (--verbose: the candidates too; --format json: all of it as JSON).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/algorithm_option.hpp"
#include "cli/arguments.hpp"
#include "cli/cost_options.hpp"
#include "cli/command.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_load.hpp"
#include "planner/algorithms.hpp"
#include "planner/plan_builder.hpp"
#include "planner/plan_price.hpp"
#include "planner/prediction.hpp"
#include "planner/size_format.hpp"

namespace flexplan::cli {
namespace {

// Progress lines go to stderr only for topologies big enough to take a while.
constexpr int kProgressLearners = 10'000;

struct PlanCommand {
  std::string topology_path;
  std::string output = "plan.bin";
  std::vector<std::string> algorithms;
  // Every collective the runtime runs; --collectives narrows the set.
  std::vector<std::string> collectives{"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"};
  bool collectives_named = false;  // --collectives given: what it names must all be planned
  std::vector<int32_t> roots{0};
  std::string from;  // --from: an earlier plan of the same learners to re-plan from
  CostOptions cost;
  std::string format = "text";
  bool verbose = false;
};

// Elapsed time since the command started, loading the topology included.
class Progress {
 public:
  Progress() : start_(Clock::now()) {}
  void enable(bool enabled) { enabled_ = enabled; }
  void operator()(std::string_view what) const {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    fmt::print(stderr, "flexplan: [{:7.3f} s] {}\n", elapsed, what);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_ = false;
  Clock::time_point start_;
};

// Size ranges that start above this hold no real message (a GPU holds well under 1 TiB); the
// planner still places them where two prices cross, which for a tiny cluster can be tens of TiB.
constexpr uint64_t kLargestRealMessage = uint64_t{1} << 40;

// The sizes the tables and the candidates' comparison use.
constexpr uint64_t kReportSizes[] = {8, uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{16} << 20,
                                     uint64_t{256} << 20};

// "< 476 KiB", "476 KiB - 1.57 MiB", ">= 84 MiB", "every size". `last` closes the list: the
// ranges after it (above kLargestRealMessage) are not shown.
std::string range_text(uint64_t min_bytes, std::optional<uint64_t> max_bytes, bool last) {
  const auto min = format_bytes(static_cast<double>(min_bytes));
  if (last || !max_bytes)
    return min_bytes > 0 ? ">= " + min : max_bytes ? "every real size" : "every size";
  const auto max = format_bytes(static_cast<double>(*max_bytes));
  return min_bytes == 0 ? "< " + max : min + " - " + max;
}
std::string range_text(const ir::Schedule& schedule, bool last) {
  return range_text(schedule.min_bytes, schedule.max_bytes, last);
}

// How many of one collective's ranges (in order) are shown: by default those that start at a
// real size; with --verbose all.
template <typename Schedules, typename Start>
size_t shown_ranges(const Schedules& schedules, Start start, bool verbose) {
  size_t shown = 0;
  for (const auto& s : schedules)
    if (verbose || shown == 0 || start(s) < kLargestRealMessage) ++shown;
  return shown;
}

std::string note_text(const Candidate& candidate) {
  return candidate.note.empty() ? "" : "  (" + candidate.note + ")";
}

// Whether the all-reduce plan uses candidate `index` for some size (by the race's ranges: a
// kept schedule, "kept:switch-tree@4", is written under its row's name).
bool is_chosen(const PlanReport& report, size_t index) {
  return std::any_of(report.ranges.begin(), report.ranges.end(),
                     [&](const PlanRange& range) { return range.candidate == index; });
}

// A candidate not chosen against the plan at the report sizes: its closest approach, as
// "1.04x the plan at 16 MiB". Always at or above 1, so it agrees with the choice.
struct Closest {
  double ratio = 0;
  uint64_t bytes = 0;
};
Closest closest_to_plan(const PlanPrice& price, const Candidate& candidate) {
  Closest best;
  for (const uint64_t bytes : kReportSizes) {
    const double n = static_cast<double>(bytes);
    const double plan = price.time(bytes);
    const double ratio = plan > 0 ? candidate.cost.at(n) / plan : 1.0;
    if (best.bytes == 0 || ratio < best.ratio) best = {ratio, bytes};
  }
  return best;
}

void print_schedules(const PlanReport& report, const std::string& output, bool all_reduce,
                     bool verbose) {
  const auto& plan = report.plan;
  fmt::print("plan: {} schedule{} written to {} (verified, {})\n", plan.schedules.size(),
             plan.schedules.size() == 1 ? "" : "s", output,
             format_bytes(static_cast<double>(std::filesystem::file_size(output))));
  if (!all_reduce) return;
  const auto& ranges = report.ranges;
  const size_t shown = shown_ranges(ranges, [](const PlanRange& r) { return r.min_bytes; }, verbose);
  fmt::print("allreduce, by message size:\n");
  for (size_t i = 0; i < shown; ++i) {
    const Candidate& candidate = report.candidates.at(ranges[i].candidate);
    fmt::print("  {:<22} {}{}\n", range_text(ranges[i].min_bytes, ranges[i].max_bytes, i + 1 == shown),
               candidate.algorithm, note_text(candidate));
  }
  if (shown < ranges.size())
    fmt::print("  (and {} more range{} above {}, beyond any real message: --verbose)\n",
               ranges.size() - shown, ranges.size() - shown == 1 ? "" : "s",
               format_bytes(static_cast<double>(kLargestRealMessage)));
  size_t others = 0;
  for (size_t c = 0; c < report.candidates.size(); ++c) others += !is_chosen(report, c);
  if (!verbose) {
    if (others + report.unsuitable.size() > 0)
      fmt::print("  ({} other candidate{} raced or left out, {} not suited: --verbose lists them)\n",
                 others, others == 1 ? "" : "s", report.unsuitable.size());
    return;
  }
  const PlanPrice price = plan_price(report);
  for (size_t c = 0; c < report.candidates.size(); ++c) {
    const Candidate& candidate = report.candidates[c];
    if (is_chosen(report, c)) continue;
    if (!candidate.left_out_because.empty()) {
      fmt::print("  left out:   {:<18} {}{}\n", candidate.algorithm, candidate.left_out_because,
                 note_text(candidate));
    } else if (candidate.priced) {
      const Closest closest = closest_to_plan(price, candidate);
      fmt::print("  not chosen: {:<18} at best {:.2f}x the plan's time (at {}; {}){}\n",
                 candidate.algorithm, closest.ratio, format_bytes(static_cast<double>(closest.bytes)),
                 to_string(candidate.priced_by), note_text(candidate));
    } else {
      fmt::print("  not chosen: {:<18} not priced{}\n", candidate.algorithm, note_text(candidate));
    }
  }
  for (const auto& why : report.unsuitable) fmt::print("  not suited: {}\n", why);
}

void print_predictions(const Topology& topo, const PlanReport& report, const CostParams& params) {
  const auto ring = ring_cost(topo, params);  // exact for the depth-first ring
  const int learners = topo.num_learners();
  const auto& floor = report.floor;
  fmt::print("predicted all-reduce (float32):\n");
  fmt::print("  {:>10} {:>12} {:>10} {:>12}  {:<18} {:>8} {:>7}\n", "size", "count", "time",
             "busbw", "algorithm", "vs ring", "/floor");
  const PlanPrice price = plan_price(report);  // what predict and whatif price too
  for (const uint64_t bytes : kReportSizes) {
    const auto& candidate = price.at(bytes);
    const double n = static_cast<double>(bytes);
    const double time = price.time(bytes);
    const double ring_time = ring.at(n);
    const double bound = floor.at(n);
    fmt::print("  {:>10} {:>12} {:>10} {:>12}  {:<18} {:>7.1f}% {:>7}\n", format_bytes(n),
               bytes / 4, format_seconds(time), format_gbps(bus_bandwidth(n, time, learners)),
               candidate.algorithm, ring_time > 0 ? 100 * (1 - time / ring_time) : 0.0,
               bound > 0 ? fmt::format("{:.2f}", time / bound) : std::string("-"));
  }
  if (floor.per_byte > 0)
    fmt::print("  vs ring: time saved over the depth-first ring. /floor: over the larger of the\n"
               "  bandwidth floor n / {} (set by {})\n  and the latency floor {} (docs/cost-model.md)\n",
               format_gbps(1 / floor.per_byte), floor.bound_by, format_seconds(floor.latency));
}

// nccl-tests' bus-bandwidth factor: (P - 1) / P for all-gather and reduce-scatter, 1 for
// broadcast and reduce.
double bus_factor(ir::Collective collective, int learners) {
  return ir::has_shards(collective) ? (learners - 1.0) / learners : 1.0;
}

// The other collectives, one line each by default (the algorithms by size and the largest
// reported size's time against the floor); --verbose gives each its table.
void print_collectives_briefly(const PlanReport& report) {
  if (report.collectives.empty()) return;
  fmt::print("other collectives (--verbose: their size ranges and predictions):\n");
  constexpr uint64_t kLargest = uint64_t{256} << 20;
  for (const CollectivePlan& planned : report.collectives) {
    std::string ranges;
    const size_t shown = shown_ranges(
        planned.schedules, [](const ir::Schedule& s) { return s.min_bytes; }, false);
    for (size_t i = 0; i < shown; ++i) {
      const ir::Schedule& s = planned.schedules[i];
      ranges += i == 0 ? s.algorithm
                       : fmt::format(", {} from {}", s.algorithm, format_bytes(static_cast<double>(s.min_bytes)));
    }
    const auto& candidate = planned.chosen(kLargest);
    const double n = static_cast<double>(kLargest);
    const double time = candidate.cost.at(n), bound = planned.floor.at(n);
    const std::string name = fmt::format("{}{}", ir::to_string(planned.collective),
                                         ir::has_root(planned.collective) ? fmt::format(" (root {})", planned.root) : "");
    fmt::print("  {:<20} {}; 256 MiB in {}{}\n", name, ranges, format_seconds(time),
               bound > 0 ? fmt::format(" ({:.2f}x floor)", time / bound) : "");
  }
}

void print_collectives(const Topology& topo, const PlanReport& report, bool verbose) {
  if (!verbose) return print_collectives_briefly(report);
  for (const CollectivePlan& planned : report.collectives) {
    fmt::print("{}{}, by message size:\n", ir::to_string(planned.collective),
               ir::has_root(planned.collective) ? fmt::format(" (root {})", planned.root) : "");
    const size_t shown = shown_ranges(
        planned.schedules, [](const ir::Schedule& s) { return s.min_bytes; }, verbose);
    for (size_t i = 0; i < shown; ++i)
      fmt::print("  {:<22} {}\n", range_text(planned.schedules[i], i + 1 == shown),
                 planned.schedules[i].algorithm);
    if (shown < planned.schedules.size())
      fmt::print("  (and {} more above {}: --verbose)\n", planned.schedules.size() - shown,
                 format_bytes(static_cast<double>(kLargestRealMessage)));
    fmt::print("  {:>10} {:>10} {:>12}  {:<18} {:>7}\n", "size", "time", "busbw", "algorithm",
               "/floor");
    for (const uint64_t bytes : kReportSizes) {
      const auto& candidate = planned.chosen(bytes);
      const double n = static_cast<double>(bytes);
      const double time = candidate.cost.at(n);
      const double bound = planned.floor.at(n);
      fmt::print("  {:>10} {:>10} {:>12}  {:<18} {:>7}\n", format_bytes(n), format_seconds(time),
                 format_gbps(time > 0 ? n * bus_factor(planned.collective, topo.num_learners()) / time
                                      : 0),
                 candidate.algorithm, bound > 0 ? fmt::format("{:.2f}", time / bound) : "-");
    }
  }
}

void print_calls(const ReduceCallStats& calls) {
  fmt::print("flexreduce reduce calls per learner: top step avg {:.2f}, max {} (Eq. 12 bound {});\n"
             "  taking part over the reduce-scatter: avg {:.2f}, max {}\n",
             calls.top_rooted_avg, calls.top_rooted_max, calls.eq12_bound,
             calls.taking_part_avg, calls.taking_part_max);
}

// --format json: what the text says, every range and candidate included (docs/planner.md,
// "The plan command's output").
nlohmann::json range_json(const ir::Schedule& schedule) {
  return {{"min_bytes", schedule.min_bytes},
          {"max_bytes", schedule.max_bytes ? nlohmann::json(*schedule.max_bytes) : nlohmann::json(nullptr)},
          {"algorithm", schedule.algorithm}};
}

void print_json(const Topology& topo, const PlanCommand& command, const PlanReport& report,
                const CostParams& params, bool all_reduce) {
  using nlohmann::json;
  const int learners = topo.num_learners();
  json schedules = json::array();
  for (const auto& schedule : report.plan.schedules) {
    json entry = range_json(schedule);
    entry["collective"] = ir::to_string(schedule.collective);
    if (ir::has_root(schedule.collective)) entry["root"] = schedule.root;
    schedules.push_back(std::move(entry));
  }
  json document{{"format", "flexplan-plan"},
                {"topology", {{"name", topo.name()},
                              {"learners", learners},
                              {"description", describe_topology(topo)},
                              {"hash", topo.hash_hex()}}},
                {"output", command.output},
                {"file_bytes", std::filesystem::file_size(command.output)},
                {"hop_overhead_seconds", params.hop_overhead},
                {"hop_overhead_from", command.cost.hop_overhead_source(topo)},
                {"schedules", schedules}};
  if (all_reduce) {
    const auto ring = ring_cost(topo, params);
    json ranges = json::array(), predictions = json::array(), candidates = json::array();
    for (const PlanRange& range : report.ranges)
      ranges.push_back({{"min_bytes", range.min_bytes},
                        {"max_bytes", range.max_bytes ? json(*range.max_bytes) : json(nullptr)},
                        {"algorithm", report.candidates.at(range.candidate).algorithm}});
    const PlanPrice price = plan_price(report);  // as the text table
    for (const uint64_t bytes : kReportSizes) {
      const auto& candidate = price.at(bytes);
      const double n = static_cast<double>(bytes);
      const double time = price.time(bytes);
      predictions.push_back({{"bytes", bytes},
                             {"count", bytes / 4},
                             {"seconds", time},
                             {"busbw_bytes_per_second", bus_bandwidth(n, time, learners)},
                             {"algorithm", candidate.algorithm},
                             {"ring_seconds", ring.at(n)},
                             {"floor_seconds", report.floor.at(n)}});
    }
    for (size_t c = 0; c < report.candidates.size(); ++c) {
      const Candidate& candidate = report.candidates[c];
      json entry{{"algorithm", candidate.algorithm},
                 {"chosen", is_chosen(report, c)},
                 {"priced_by", candidate.priced ? json(std::string(to_string(candidate.priced_by))) : json(nullptr)},
                 {"left_out_because", candidate.left_out_because.empty() ? json(nullptr)
                                                                         : json(candidate.left_out_because)},
                 {"note", candidate.note.empty() ? json(nullptr) : json(candidate.note)}};
      if (candidate.priced) {
        json seconds = json::object();
        for (const uint64_t bytes : kReportSizes)
          seconds[std::to_string(bytes)] = candidate.cost.at(static_cast<double>(bytes));
        entry["seconds"] = seconds;
      }
      candidates.push_back(std::move(entry));
    }
    document["allreduce"] = {{"ranges", ranges},
                             {"predictions", predictions},
                             {"floor", {{"seconds_per_byte", report.floor.per_byte},
                                        {"bound_by", report.floor.bound_by},
                                        {"latency_seconds", report.floor.latency}}},
                             {"candidates", candidates},
                             {"unsuitable", report.unsuitable}};
  }
  json collectives = json::array();
  for (const CollectivePlan& planned : report.collectives) {
    json ranges = json::array(), predictions = json::array();
    for (const auto& schedule : planned.schedules) ranges.push_back(range_json(schedule));
    for (const uint64_t bytes : kReportSizes) {
      const auto& candidate = planned.chosen(bytes);
      const double n = static_cast<double>(bytes);
      predictions.push_back({{"bytes", bytes},
                             {"seconds", candidate.cost.at(n)},
                             {"algorithm", candidate.algorithm},
                             {"floor_seconds", planned.floor.at(n)}});
    }
    json entry{{"collective", ir::to_string(planned.collective)},
               {"ranges", ranges},
               {"predictions", predictions}};
    if (ir::has_root(planned.collective)) entry["root"] = planned.root;
    collectives.push_back(std::move(entry));
  }
  document["collectives"] = collectives;
  document["collectives_left_out"] = report.collectives_left_out;
  if (report.flexreduce_calls) {
    const auto& calls = *report.flexreduce_calls;
    document["flexreduce_calls"] = {{"top_step_avg", calls.top_rooted_avg},
                                    {"top_step_max", calls.top_rooted_max},
                                    {"eq12_bound", calls.eq12_bound},
                                    {"taking_part_avg", calls.taking_part_avg},
                                    {"taking_part_max", calls.taking_part_max}};
  }
  fmt::print("{}\n", document.dump(2));
}

// --from: the earlier plan's schedules the race takes again (KeptSchedule), after checking that
// the plan is for this topology's learners, rank by rank.
std::vector<KeptSchedule> schedules_to_keep(const std::string& path, const Topology& topo) {
  const ir::Plan earlier = ir::load_plan_file(path);  // verified: a plan that fails exits 1
  if (earlier.world_size != topo.num_learners())
    throw std::invalid_argument(fmt::format("--from {}: the plan is for {} learners, topology '{}' has {}",
                                            path, earlier.world_size, topo.name(), topo.num_learners()));
  if (earlier.rank_names.empty())  // (optional in a plan: the text form may leave them out)
    fmt::print(stderr, "flexplan: warning: --from {}: the plan names no ranks, so only its world size ({}) "
               "was checked against topology '{}'\n", path, earlier.world_size, topo.name());
  const std::vector<std::string> here = topo.learner_names();
  if (!earlier.rank_names.empty() && earlier.rank_names != here) {
    const auto [there, ours] = std::mismatch(earlier.rank_names.begin(), earlier.rank_names.end(), here.begin());
    throw std::invalid_argument(fmt::format("--from {}: rank {} is '{}' in the plan and '{}' in topology '{}'", path,
                                            there - earlier.rank_names.begin(), *there, *ours, topo.name()));
  }
  return kept_schedules(earlier);
}

void run(const PlanCommand& command, CostParams cost) {
  Progress progress;
  const auto topo = load_topology(command.topology_path);
  command.cost.apply_topology(cost, topo);
  progress.enable(topo.num_learners() >= kProgressLearners);
  progress(fmt::format("topology loaded: {}", describe_topology(topo)));

  PlanOptions options;
  options.algorithms = command.algorithms;
  options.collectives.clear();
  for (const std::string& name : command.collectives)
    options.collectives.push_back(ir::collective_from_string(name));
  for (const int32_t root : command.roots)
    if (root < 0 || root >= topo.num_learners())
      throw CLI::ValidationError(fmt::format("--roots: root {} is not among the {} learners", root,
                                             topo.num_learners()));
  options.roots = command.roots;
  options.cost = cost;
  options.progress = [&](std::string_view what) { progress(what); };
  options.compact_pipelines = true;  // the plan is only verified and written: no need to expand
  // By default every collective: one that cannot be built at this size is left out, and said so.
  options.leave_out_unbuildable = !command.collectives_named;
  if (!command.from.empty()) options.kept = schedules_to_keep(command.from, topo);
  const auto report = build_plan_report(topo, options);
  for (const std::string& why : report.collectives_left_out)
    fmt::print(stderr, "flexplan: warning: not planned, {}\n", why);
  progress("verifying and writing the plan");
  ir::write_plan_file(command.output, report.plan, report.verified.get());
  progress("done");

  const bool all_reduce = std::find(options.collectives.begin(), options.collectives.end(),
                                   ir::Collective::AllReduce) != options.collectives.end();
  if (command.format == "json") return print_json(topo, command, report, options.cost, all_reduce);
  fmt::print("flexplan: topology {} ({}), hash {}\n", topo.name(), describe_topology(topo),
             topo.hash_hex());
  // Which hop overhead priced the plan: said with -v, and always where it is not the default.
  const std::string hop_source = command.cost.hop_overhead_source(topo);
  if (command.verbose || hop_source != "the default")
    fmt::print("flexplan: priced with a hop overhead of {} (from {})\n", format_latency(options.cost.hop_overhead), hop_source);
  print_schedules(report, command.output, all_reduce, command.verbose);
  if (all_reduce) print_predictions(topo, report, options.cost);
  if (report.flexreduce_calls) print_calls(*report.flexreduce_calls);
  print_collectives(topo, report, command.verbose);
}

void setup(CLI::App& app) {
  auto command = std::make_shared<PlanCommand>();
  app.add_option("TOPOLOGY", command->topology_path,
                 "topology JSON file (docs/topology.md); plans it when no subcommand is given");
  app.add_option("-o,--output", command->output, "where to write the plan")
      ->capture_default_str();
  app.add_option("-a,--algorithms", command->algorithms,
                 algorithm_help("algorithms to choose among (default: every one that suits the "
                                "tree, with pipelined variants); one alone forces it:"))
      ->delimiter(',')
      ->allow_extra_args(false)  // one word, a comma list: positional arguments may follow
      ->check(algorithm_validator());
  app.add_option("--collectives", command->collectives,
                 "collectives to plan, of allreduce, reduce_scatter, allgather, broadcast, reduce "
                 "(default: all five)")
      ->delimiter(',')
      ->check(CLI::IsMember({"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}));
  app.add_option("--roots", command->roots,
                 "roots to plan broadcast and reduce for (default 0); the runtime derives a "
                 "schedule for a root not planned")
      ->delimiter(',');
  app.add_option("--from", command->from,
                 "re-plan from an earlier plan of the same learners (after a link changed): its "
                 "all-reduce schedules race again as they are, shown as kept:NAME, so that the new "
                 "plan is not predicted slower than they are on the new links")
      ->check(CLI::ExistingFile)
      ->excludes("--algorithms");
  command->cost.add_to(app);
  add_format_option(app, command->format);
  app.add_flag("-v,--verbose", command->verbose,
               "also list the candidates not chosen, left out or not suited, and every size range");
  app.callback([&app, command] {
    if (!app.get_subcommands().empty()) return;  // a subcommand did the work
    command->collectives_named = app.count("--collectives") > 0;
    if (command->topology_path.empty())
      throw CLI::RequiredError("TOPOLOGY (flexplan TOPOLOGY.json -o plan.bin, or a subcommand)");
    CostParams cost;
    try {
      cost = command->cost.parse();
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
    run(*command, cost);
  });
}

const Registration registration("plan", setup);

}  // namespace
}  // namespace flexplan::cli
