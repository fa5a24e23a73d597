// The main job, `flexplan TOPOLOGY.json -o plan.bin [--algorithms A,B] [--collectives C,D]`:
// plan every candidate algorithm of every collective, keep for each message-size range the one
// the cost model predicts fastest, verify and write plan.bin, and print what was decided and
// what it should buy.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/algorithm_option.hpp"
#include "cli/cost_options.hpp"
#include "cli/command.hpp"
#include "ir/plan_binary.hpp"
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
  // All-reduce alone until the runtime runs the others (docs/ir.md, "Collectives").
  std::vector<std::string> collectives{"allreduce"};
  std::vector<int32_t> roots{0};
  CostOptions cost;
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

std::string range_text(const ir::Schedule& schedule) {
  return fmt::format("[{}, {})", format_bytes(static_cast<double>(schedule.min_bytes)),
                     schedule.max_bytes ? format_bytes(static_cast<double>(*schedule.max_bytes))
                                        : std::string("inf"));
}

// "T(n) -> 260 us + n / 0.123 GB/s": the line the price approaches for large messages.
std::string price_text(const ScheduleCost& cost) {
  const auto line = cost.asymptote();
  return fmt::format("T(n) -> {} + n / {}", format_seconds(line.latency),
                     line.per_byte > 0 ? format_gbps(1 / line.per_byte) : std::string("inf"));
}

std::string note_text(const Candidate& candidate) {
  return candidate.note.empty() ? "" : "  (" + candidate.note + ")";
}

void print_schedules(const PlanReport& report, const std::string& output, bool all_reduce) {
  const auto& plan = report.plan;
  fmt::print("plan: {} schedule{} written to {} (verified, {})\n", plan.schedules.size(),
             plan.schedules.size() == 1 ? "" : "s", output,
             format_bytes(static_cast<double>(std::filesystem::file_size(output))));
  if (!all_reduce) return;
  fmt::print("allreduce:\n");
  for (const auto& schedule : plan.schedules) {
    if (schedule.collective != ir::Collective::AllReduce) continue;
    const auto* candidate = report.find(schedule.algorithm);
    fmt::print("  {:<22} {:<17} {}{}\n", range_text(schedule), schedule.algorithm,
               candidate ? price_text(candidate->cost) : std::string(),
               candidate ? note_text(*candidate) : std::string());
  }
  for (const auto& candidate : report.candidates) {
    bool chosen = false;
    for (const auto& schedule : plan.schedules)
      chosen = chosen || schedule.algorithm == candidate.algorithm;
    if (chosen) continue;
    const std::string price =
        candidate.priced ? fmt::format("{} ({})", price_text(candidate.cost), candidate.priced_by)
                         : std::string();
    if (!candidate.left_out_because.empty())
      fmt::print("  left out:   {:<17} {}{}\n      {}\n", candidate.algorithm, price,
                 note_text(candidate), candidate.left_out_because);
    else
      fmt::print("  not chosen: {:<17} {}{}\n", candidate.algorithm, price, note_text(candidate));
  }
  for (const auto& why : report.unsuitable) fmt::print("  not suited: {}\n", why);
}

void print_predictions(const Topology& topo, const PlanReport& report, const CostParams& params) {
  const auto ring = ring_cost(topo, params);  // exact for the depth-first ring
  const int learners = topo.num_learners();
  const auto& floor = report.floor;
  fmt::print("predicted all-reduce (float32):\n");
  fmt::print("  {:>10} {:>12} {:>10} {:>12}  {:<17} {:>8} {:>7}\n", "size", "count", "time",
             "busbw", "algorithm", "vs ring", "/floor");
  const PlanPrice price = plan_price(report);  // what predict and whatif price too
  for (const uint64_t bytes : {uint64_t{8}, uint64_t{64} << 10, uint64_t{1} << 20,
                               uint64_t{16} << 20, uint64_t{256} << 20}) {
    const auto& candidate = price.at(bytes);
    const double n = static_cast<double>(bytes);
    const double time = price.time(bytes);
    const double ring_time = ring.at(n);
    const double bound = floor.at(n);
    fmt::print("  {:>10} {:>12} {:>10} {:>12}  {:<17} {:>7.1f}% {:>7}\n", format_bytes(n),
               bytes / 4, format_seconds(time), format_gbps(bus_bandwidth(n, time, learners)),
               candidate.algorithm, ring_time > 0 ? 100 * (1 - time / ring_time) : 0.0,
               bound > 0 ? fmt::format("{:.2f}", time / bound) : std::string("-"));
  }
  if (floor.per_byte > 0)
    fmt::print("  (vs ring: the time saved over the depth-first ring; /floor: over the larger of "
               "the bandwidth floor n / {}, set by {}, and the latency floor {}, the diameter "
               "latency; docs/cost-model.md)\n",
               format_gbps(1 / floor.per_byte), floor.bound_by, format_seconds(floor.latency));
}

// nccl-tests' bus-bandwidth factor: (P - 1) / P for all-gather and reduce-scatter, 1 for
// broadcast and reduce.
double bus_factor(ir::Collective collective, int learners) {
  return ir::has_shards(collective) ? (learners - 1.0) / learners : 1.0;
}

void print_collectives(const Topology& topo, const PlanReport& report) {
  for (const CollectivePlan& planned : report.collectives) {
    fmt::print("{}{}:", ir::to_string(planned.collective),
               ir::has_root(planned.collective) ? fmt::format(" (root {})", planned.root) : "");
    for (const ir::Schedule& schedule : planned.schedules)
      fmt::print(" {} {};", range_text(schedule), schedule.algorithm);
    fmt::print("\n  {:>10} {:>10} {:>12}  {:<17} {:>7}\n", "size", "time", "busbw", "algorithm",
               "/floor");
    for (const uint64_t bytes : {uint64_t{8}, uint64_t{64} << 10, uint64_t{1} << 20,
                                 uint64_t{16} << 20, uint64_t{256} << 20}) {
      const auto& candidate = planned.chosen(bytes);
      const double n = static_cast<double>(bytes);
      const double time = candidate.cost.at(n);
      const double bound = planned.floor.at(n);
      fmt::print("  {:>10} {:>10} {:>12}  {:<17} {:>7}\n", format_bytes(n), format_seconds(time),
                 format_gbps(time > 0 ? n * bus_factor(planned.collective, topo.num_learners()) / time
                                      : 0),
                 candidate.algorithm, bound > 0 ? fmt::format("{:.2f}", time / bound) : "-");
    }
  }
}

void print_calls(const ReduceCallStats& calls) {
  fmt::print("flexreduce reduce calls per learner: top step avg {:.2f}, max {} (Eq. 12 bound {}); "
             "taking part over the reduce-scatter: avg {:.2f}, max {}\n",
             calls.top_rooted_avg, calls.top_rooted_max, calls.eq12_bound,
             calls.taking_part_avg, calls.taking_part_max);
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
  const auto report = build_plan_report(topo, options);
  progress("verifying and writing the plan");
  ir::write_plan_file(command.output, report.plan);
  progress("done");

  fmt::print("flexplan: topology {} ({}), hash {}\n", topo.name(), describe_topology(topo),
             topo.hash_hex());
  const bool all_reduce = std::find(options.collectives.begin(), options.collectives.end(),
                                   ir::Collective::AllReduce) != options.collectives.end();
  print_schedules(report, command.output, all_reduce);
  if (all_reduce) print_predictions(topo, report, options.cost);
  print_collectives(topo, report);
  if (report.flexreduce_calls) print_calls(*report.flexreduce_calls);
}

void setup(CLI::App& app) {
  auto command = std::make_shared<PlanCommand>();
  app.add_option("TOPOLOGY", command->topology_path,
                 "topology JSON file (docs/topology.md); plans it when no subcommand is given");
  app.add_option("-o,--output", command->output, "where to write the plan")
      ->capture_default_str();
  app.add_option("--algorithms", command->algorithms,
                 algorithm_help("algorithms to choose among (default: every one that suits the "
                                "tree, with pipelined variants); one alone forces it:"))
      ->delimiter(',')
      ->check(algorithm_validator());
  app.add_option("--collectives", command->collectives,
                 "collectives to plan, of allreduce, reduce_scatter, allgather, broadcast, reduce "
                 "(default: allreduce, the one the runtime runs so far)")
      ->delimiter(',')
      ->check(CLI::IsMember({"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}));
  app.add_option("--roots", command->roots,
                 "roots to plan broadcast and reduce for (default 0); the runtime derives a "
                 "schedule for a root not planned")
      ->delimiter(',');
  command->cost.add_to(app);
  app.callback([&app, command] {
    if (!app.get_subcommands().empty()) return;  // a subcommand did the work
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
