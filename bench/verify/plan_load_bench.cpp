// Times what one rank does with a plan.bin at job start (ir::load_job_plan: read, decode,
// fields and structure, its slice of the symbolic execution) beside the parts of it and beside
// verifying the whole plan at once, plus encoding and the fingerprint of a plan handed over in
// memory (a loaded one gets it from the decoding pass), and the rank's lowering of every
// schedule (the runtime lowers a schedule at its first call).
// Usage: plan_load_bench PLAN.bin [RANKS_TO_TIME]   (default 3: the first, middle, last rank)
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>
#include <vector>

#include "codegen/rank_program.hpp"
#include "ir/byte_io.hpp"
#include "ir/file_bytes.hpp"
#include "ir/job_plan.hpp"
#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"

namespace {

using namespace flexplan::ir;
using Clock = std::chrono::steady_clock;

struct Timing {
  double wall_s, cpu_s;  // cpu: this process's processor time, steadier on a shared machine
};

template <typename Fn>
Timing measure(Fn&& fn) {
  const auto start = Clock::now();
  const std::clock_t cpu_start = std::clock();
  fn();
  return {std::chrono::duration<double>(Clock::now() - start).count(),
          static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC};
}

void row(const std::string& what, const Timing& t) {
  fmt::print("  {:<44} {:>8.3f} s wall {:>8.3f} s cpu\n", what, t.wall_s, t.cpu_s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: plan_load_bench PLAN.bin [RANKS_TO_TIME]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int ranks_to_time = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<uint8_t> bytes;
  Plan plan;
  const Timing read = measure([&] { bytes = detail::read_file_bytes(path); });
  const Timing decode = measure([&] { plan = decode_plan_unverified(bytes, path); });
  size_t ops = 0, members = 0;
  for (const Schedule& s : plan.schedules)  // of the whole schedules (pipelines are held compact)
    for (const Step& step : s.steps)
      for (const Op& op : step.ops) ops += s.slices, members += s.slices * op.group.size();
  fmt::print("{}: {:.1f} MiB, world size {}, {} schedules, {} ops, {} group members\n", path,
             bytes.size() / 1048576.0, plan.world_size, plan.schedules.size(), ops, members);
  row("read the file", read);
  row("decode (checksum, payload)", decode);
  row("plan fields and structure of every op", measure([&] {
        check_plan_fields(plan);
        for (const Schedule& s : plan.schedules) check_structure(s, plan.world_size);
      }));
  const int32_t p = plan.world_size;
  // Evenly spread ranks, plus each schedule's rank that checks its last slice of the units:
  // where a schedule of fewer units than ranks puts its whole execution.
  std::vector<int32_t> ranks;
  for (int i = 0; i < ranks_to_time; ++i)
    ranks.push_back(ranks_to_time == 1 ? 0 : static_cast<int32_t>(int64_t{p - 1} * i / (ranks_to_time - 1)));
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const int32_t rotation = schedule_slice(i, plan.schedules.size(), 0, p);
    ranks.push_back(p - 1 - rotation);  // rotation < p
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  Timing slowest{0, 0};
  int32_t slowest_rank = 0;
  for (int32_t rank : ranks) {
    const Timing t = measure([&] { verify_plan_slice(plan, rank, p); });
    if (t.cpu_s >= slowest.cpu_s) slowest = t, slowest_rank = rank;
  }
  row(fmt::format("one rank's slice (slowest of {}: rank {})", ranks.size(), slowest_rank),
      slowest);
  // The whole of a rank's load, fingerprint included (taken in the checksum's pass).
  row(fmt::format("load_job_plan for rank {} (all of the above)", slowest_rank),
      measure([&] { (void)load_job_plan(path, p, slowest_rank); }));
  // What the runtime adds at each schedule's first call: the rank's program (pipelines
  // lowered from their base, codegen/rank_program.hpp).
  Timing slowest_lowering{0, 0};
  int32_t slowest_lowering_rank = 0;
  size_t tasks = 0;
  for (int32_t rank : ranks) {
    size_t rank_tasks = 0;
    const Timing t = measure([&] {
      for (const Schedule& s : plan.schedules)
        for (const auto& step : flexplan::codegen::lower_rank_program(s, rank).steps) rank_tasks += step.tasks.size();
    });
    if (t.cpu_s >= slowest_lowering.cpu_s) slowest_lowering = t, slowest_lowering_rank = rank, tasks = rank_tasks;
  }
  row(fmt::format("lower every schedule for rank {} ({} tasks)", slowest_lowering_rank, tasks), slowest_lowering);
  row("verify_plan (the whole plan, one process)", measure([&] { verify_plan(plan); }));
  std::vector<uint8_t> encoded;
  row("encode_plan", measure([&] { encoded = encode_plan(plan); }));
  volatile uint64_t sink = 0;  // keeps the fingerprint from being optimized away
  row("plan_fingerprint of a plan in memory", measure([&] { sink = plan_fingerprint(plan); }));
  fmt::print("  plan.bin {:.1f} MiB when written again\n", encoded.size() / 1048576.0);
  (void)sink;
  return 0;
}
