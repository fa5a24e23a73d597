// Times what one rank does with a plan.bin at job start beside the parts of it and beside
// verifying the whole plan at once, plus encoding and the fingerprint of a plan handed over in
// memory (a loaded one gets it from the file), and the rank's lowering of every schedule (the
// runtime lowers a schedule at its first call). For a format 7 file: one rank's part alone
// (ir::load_rank_slice: the header, the head and tables, its blocks and its chunk), for rank 0
// and for the slowest of the ranks timed, and ir::load_job_plan (its part, then the whole plan
// the runtime holds, without the other ranks' entries). For a format 6 file: load_job_plan's
// whole decode and the rank's slice of the symbolic execution, as before format 7.
// Usage: plan_load_bench PLAN.bin [RANKS_TO_TIME]   (default 3: the first, middle, last rank)
//        plan_load_bench PLAN.bin --slice RANK      (load_rank_slice alone, for /usr/bin/time -v)
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
#include "ir/plan_sections.hpp"
#include "ir/plan_slice.hpp"
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

std::string sliced_name(const std::vector<uint8_t>& bytes, const std::string& path) {
  return plan_format_version(bytes, path) == kPlanFormatVersion ? "decode (every checksum, every rank's entry)"
                                                                 : "decode (checksum, payload)";
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
  if (argc == 4 && std::string(argv[2]) == "--slice") {
    RankSlice slice;
    const Timing t = measure([&] { slice = load_rank_slice(path, std::atoi(argv[3])); });
    fmt::print("load_rank_slice rank {}: {:.3f} s wall {:.3f} s cpu; read {:.1f} KiB of {:.1f} MiB: {} of {} blocks "
               "({} ops decoded, {} its own)\n",
               slice.rank, t.wall_s, t.cpu_s, slice.cost.bytes_read / 1024.0, slice.cost.file_bytes / 1048576.0,
               slice.cost.blocks_read, slice.cost.blocks, slice.cost.ops_decoded, slice.ops);
    return 0;
  }
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
  row(sliced_name(bytes, path), decode);
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
  const bool sliced = plan_format_version(bytes, path) == kPlanFormatVersion;
  if (sliced) {
    // The rank that takes part in the most ops, beside the spread ones.
    {
      std::vector<uint32_t> taken(static_cast<size_t>(p), 0);
      for (const Schedule& s : plan.schedules)
        for (const Step& step : s.steps)
          for (const Op& op : step.ops)
            detail::for_each_participant(op, [&](int32_t r, uint64_t) {
              if (r >= 0 && r < p) ++taken[static_cast<size_t>(r)];
            });
      ranks.push_back(static_cast<int32_t>(std::max_element(taken.begin(), taken.end()) - taken.begin()));
      std::sort(ranks.begin(), ranks.end());
      ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    }
    const auto slice_row = [&](int32_t rank, const Timing& t, const RankSlice& slice, const char* which) {
      row(fmt::format("load_rank_slice, {} (rank {})", which, rank), t);
      fmt::print("      rank {}: read {:.1f} KiB of {:.1f} MiB: {} of {} blocks ({} ops decoded, {} its own)\n", rank,
                 slice.cost.bytes_read / 1024.0, slice.cost.file_bytes / 1048576.0, slice.cost.blocks_read,
                 slice.cost.blocks, slice.cost.ops_decoded, slice.ops);
    };
    RankSlice slice;
    const Timing first = measure([&] { slice = load_rank_slice(path, 0); });
    slice_row(0, first, slice, "rank 0");
    Timing slowest{0, 0};
    int32_t slowest_rank = 0;
    RankSlice slowest_slice;
    for (int32_t rank : ranks) {
      const Timing t = measure([&] { slice = load_rank_slice(path, rank); });
      if (t.cpu_s >= slowest.cpu_s) slowest = t, slowest_rank = rank, slowest_slice = slice;
    }
    slice_row(slowest_rank, slowest, slowest_slice, fmt::format("slowest of {}", ranks.size()).c_str());
    std::vector<uint8_t> again;
    row("decode_job_plan (every checksum, no entries)", measure([&] {
          again = read_plan_bytes(path);
          (void)decode_job_plan(again, path);
        }));
    row(fmt::format("load_job_plan for rank {} (its part, then the whole plan)", slowest_rank),
        measure([&] { (void)load_job_plan(path, p, slowest_rank); }));
  } else {
    Timing slowest{0, 0};
    int32_t slowest_rank = 0;
    for (int32_t rank : ranks) {
      const Timing t = measure([&] { verify_plan_slice(plan, rank, p); });
      if (t.cpu_s >= slowest.cpu_s) slowest = t, slowest_rank = rank;
    }
    row(fmt::format("one rank's slice (slowest of {}: rank {})", ranks.size(), slowest_rank), slowest);
    // The whole of a rank's load, fingerprint included (taken in the checksum's pass).
    row(fmt::format("load_job_plan for rank {} (all of the above)", slowest_rank),
        measure([&] { (void)load_job_plan(path, p, slowest_rank); }));
  }
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
