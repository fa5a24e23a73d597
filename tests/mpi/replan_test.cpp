// Following the network under mpirun over UCX (docs/runtime.md): an explicit re-plan makes the
// same plan on every rank, which all switch to at the same call, every result exact before and
// after; a process late to every call is named as one slow process and never re-planned.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ir/plan_binary.hpp"
#include "runtime/communicator.hpp"
#include "tests/mpi/test_support.hpp"
#include "topology/topology_writer.hpp"

namespace flexplan::mpitest {
namespace {

// The topology as a file every rank reads (FLEXPLAN_TOPOLOGY): one per rank, the same bytes.
std::string topology_file(const Topology& topology, const std::string& name) {
  const std::string path = fmt::format("/tmp/flexplan-mpi-replan-{}-{}-{}.json", getpid(), world_rank(), name);
  FILE* out = std::fopen(path.c_str(), "w");
  const std::string text = topology_to_json(topology);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fclose(out);
  return path;
}

Options options_with(const std::string& topology_path) {
  Options options = Options::from_env();
  options.allow_host_mismatch = true;  // one host stands in for the tree's machines
  options.topology_path = topology_path;
  options.stats_report = true;
  return options;
}

// `calls` all-reduces of int32 sums, each checked on every rank; the mismatches over all ranks.
uint64_t checked_allreduces(Communicator& comm, int calls, size_t count, uint64_t salt,
                            const std::function<void(int)>& before_call = {}) {
  uint64_t mismatches = 0;
  std::string detail;
  for (int i = 0; i < calls; ++i) {
    if (before_call) before_call(i);
    mismatches += allreduce_and_check(comm, count, DataType::Int32, ReduceOp::Sum, i % 2 == 0,
                                      salt + static_cast<uint64_t>(i), &detail);
  }
  EXPECT_EQ(mismatches, 0u) << detail;
  return mismatches;
}

TEST(Replan, ExplicitReplanSwitchesEveryRankAtOneCall) {
  const int world = world_size();
  if (world < 2) GTEST_SKIP() << "needs two ranks";
  const Topology topology = random_tree(world, 70 + static_cast<uint32_t>(world));
  const std::string path = topology_file(topology, "explicit");
  Communicator comm(plan_for(topology, "ring"), MPI_COMM_WORLD, options_with(path));
  checked_allreduces(comm, 3, 5000, 1);
  const ReplanResult result = comm.replan();
  checked_allreduces(comm, 3, 5000, 100);
  // Every rank: the same call, the same outcome, the same plan.
  EXPECT_EQ(result.call, 3u) << result.message;
  EXPECT_EQ(sum_over_ranks(result.switched ? 1 : 0), result.switched ? static_cast<uint64_t>(world) : 0u);
  const uint64_t hash = ir::plan_fingerprint(comm.plan());
  EXPECT_EQ(sum_over_ranks(hash % 1'000'003), static_cast<uint64_t>(world) * (hash % 1'000'003));
  const CommStats stats = comm.stats();
  uint64_t before = 0, after = 0;
  for (const ScheduleStats& s : stats.schedules) (s.plan_generation == 0 ? before : after) += s.calls;
  EXPECT_EQ(before, 3u);
  EXPECT_EQ(after, result.switched ? 3u : 0u);
  std::remove(path.c_str());
}

TEST(Replan, OneLateProcessIsNotTheNetwork) {
  const int world = world_size();
  if (world < 3) GTEST_SKIP() << "needs three ranks (two must see the drift)";
  const Topology topology = random_tree(world, 90 + static_cast<uint32_t>(world));
  const std::string path = topology_file(topology, "late");
  Options options = options_with(path);
  options.replan = Replan::Auto;
  options.drift_window = 5;
  Communicator comm(plan_for(topology, "ring"), MPI_COMM_WORLD, options);
  // Rank 1 computes longer before each call from call 10 on: the others wait for it. 20 ms, or
  // twice its calls' own time where they take longer (a sanitizer build on a busy host), so
  // that the lateness stands out of the calls' noise.
  std::chrono::steady_clock::time_point first_call;
  std::chrono::duration<double> late{0.020};
  checked_allreduces(comm, 20, 100, 7, [&](int i) {
    if (world_rank() != 1) return;
    if (i == 0) first_call = std::chrono::steady_clock::now();
    if (i == 10) late = std::max(late, std::chrono::duration<double>(std::chrono::steady_clock::now() - first_call) / 5.0);
    if (i >= 10) std::this_thread::sleep_for(late);
  });
  const CommStats stats = comm.stats();
  EXPECT_EQ(stats.plan_generation, 0u) << format_stats(stats);
  bool named = false;
  for (const std::string& event : stats.events) named = named || event.find("one slow process") != std::string::npos;
  EXPECT_TRUE(named) << format_stats(stats);
  std::remove(path.c_str());
}

}  // namespace

void register_nothing() {}

}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_nothing);
}
