// flexplan_planning_bench: how long planning takes and how much memory it needs on big
// asymmetric trees. For each size, in a fresh child process (so peak RSS is that size's own):
// build the topology, plan FlexReduce, price it with the general evaluator, count its reduce
// calls, verify it, encode it as plan.bin, and run the whole build_plan (every algorithm that
// fits the size limits). Prints one table row per size.
//
//   flexplan_planning_bench [--sizes 1000,16000,128000] [--seed 1]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "asymmetric_trees.hpp"
#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/flexreduce.hpp"
#include "planner/plan_builder.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double seconds(F&& work) {
  const auto start = Clock::now();
  work();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;  // Linux reports KiB
}

void run_size(int target, uint64_t seed) {
  using namespace flexplan;
  bench::AsymmetricTrees trees(seed);
  std::optional<Topology> topo;
  const double t_topology = seconds([&] { topo.emplace(trees.make(target)); });

  ir::Schedule schedule;
  const double t_plan = seconds([&] { schedule = plan_flexreduce(*topo); });
  size_t ops = 0, members = 0;
  for (const auto& step : schedule.steps) {
    ops += step.ops.size();
    for (const auto& op : step.ops) members += op.group.size();
  }
  const double t_price = seconds([&] { (void)evaluate_schedule(*topo, schedule); });
  const double t_calls = seconds([&] { (void)reduce_call_stats(*topo, schedule); });
  const double t_verify =
      seconds([&] { ir::verify_schedule(schedule, topo->num_learners()); });
  ir::Plan plan;
  plan.world_size = topo->num_learners();
  plan.topology_name = topo->name();
  plan.topology_hash = topo->hash_hex();
  for (int r = 0; r < topo->num_learners(); ++r)
    plan.rank_names.push_back(topo->full_name(topo->learner_node(r)));
  plan.schedules.push_back(std::move(schedule));
  std::vector<uint8_t> bytes;
  const double t_encode = seconds([&] { bytes = ir::encode_plan(plan); });
  plan = {};
  const double rss_flexreduce = peak_rss_mib();

  size_t schedules = 0;
  const double t_build_plan = seconds([&] {
    schedules = build_plan(*topo, PlanOptions{}).schedules.size();
  });

  const double fr_total = t_plan + t_price + t_calls + t_verify + t_encode;
  fmt::print("{:>8} {:>3} {:>6} {:>9} {:>9} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} "
             "{:>8.2f} {:>8.1f} {:>9.3f} {:>3} {:>8.1f} {:>8.1f}\n",
             topo->num_learners(), topo->num_levels(), flexreduce_units(*topo).exact ? "exact" : "2^60",
             ops, members, t_topology, t_plan, t_price, t_calls, t_verify, t_encode,
             fr_total / topo->num_learners() * 1e6, static_cast<double>(bytes.size()) / (1 << 20),
             t_build_plan, schedules, rss_flexreduce, peak_rss_mib());
  std::fflush(stdout);
}

std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> sizes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    sizes.push_back(std::stoi(text.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{1000, 16000, 128000};
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--sizes" && i + 1 < argc) {
      sizes = parse_sizes(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else {
      fmt::print(stderr, "usage: {} [--sizes 1000,16000,128000] [--seed 1]\n", argv[0]);
      return 2;
    }
  }
  fmt::print("# FlexReduce planning on asymmetric trees (seed {}); times in seconds\n", seed);
  fmt::print("# ops, members = FlexReduce's ops and group members summed over ops\n");
  fmt::print("# us/lrnr = (plan + price + calls + verify + encode) per learner, in microseconds;\n"
             "# buildplan = the whole planner (every algorithm; winners built), sch = schedules\n"
             "# it kept; RSS FR / RSS all = peak resident MiB after the FlexReduce phases / after\n"
             "# build_plan too\n");
  fmt::print("{:>8} {:>3} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>3} "
             "{:>8} {:>8}\n",
             "learners", "lvl", "units", "ops", "members", "topology", "plan", "price", "calls", "verify",
             "encode", "us/lrnr", "bin MiB", "buildplan", "sch", "RSS FR", "RSS all");
  std::fflush(stdout);  // before fork, or every child prints the header again
  for (int size : sizes) {
    const pid_t child = fork();
    if (child == 0) {
      try {
        run_size(size, seed);
      } catch (const std::exception& e) {
        fmt::print(stderr, "size {}: {}\n", size, e.what());
        std::_Exit(1);
      }
      std::_Exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) fmt::print(stderr, "size {}: killed by signal {}\n", size, WTERMSIG(status));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  return 0;
}
