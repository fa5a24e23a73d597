// Times verify_schedule, encode_plan and decode_plan on synthetic hierarchical all-reduce
// plans (local reduce in groups of 8, ring among the leaders, local broadcast) and on flat
// rings, for growing world sizes. Prints processor time (and wall time for verification).
// Usage: verify_bench [max_world_size]   (default 16384)
#include <fmt/core.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>

#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace {

using namespace flexplan::ir;
using Clock = std::chrono::steady_clock;

struct Timing {
  double wall_ms, cpu_ms;  // cpu: this process's processor time, steadier on a shared machine
};

template <typename Fn>
Timing measure_ms(Fn&& fn) {
  const auto start = Clock::now();
  const std::clock_t cpu_start = std::clock();
  fn();
  return {std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
          static_cast<double>(std::clock() - cpu_start) * 1000.0 / CLOCKS_PER_SEC};
}

size_t op_count(const Schedule& schedule) {
  size_t ops = 0;
  for (const Step& step : schedule.steps) ops += step.ops.size();
  return ops;
}

void measure(const std::string& shape, Schedule schedule, int32_t world_size) {
  const Plan plan = testing::plan_of({std::move(schedule)}, world_size);
  const Schedule& s = plan.schedules[0];
  std::vector<uint8_t> bytes;
  const Timing verify = measure_ms([&] { verify_schedule(s, world_size); });
  const Timing encode = measure_ms([&] { bytes = encode_plan(plan); });
  const Timing decode = measure_ms([&] { (void)decode_plan_unverified(bytes, "bench"); });
  fmt::print("{:<14} {:>7} {:>6} {:>9} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.2f}\n",
             shape, world_size, s.steps.size(), op_count(s), verify.cpu_ms, verify.wall_ms,
             encode.cpu_ms, decode.cpu_ms, verify.cpu_ms * 1e6 / static_cast<double>(op_count(s)),
             bytes.size() / 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  const int32_t max_world = argc > 1 ? std::atoi(argv[1]) : 16384;
  fmt::print("{:<14} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "plan", "ranks",
             "steps", "ops", "verify", "(wall)", "encode", "decode", "ns/op", "plan MiB");
  fmt::print("{:<14} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "", "", "", "",
             "cpu ms", "ms", "cpu ms", "cpu ms", "verify", "");
  for (int32_t p = 1024; p <= max_world; p *= 2) {
    measure("hierarchical/8", testing::hierarchical_schedule(p, 8), p);
  }
  if (max_world >= 10'000)
    measure("hierarchical/8", testing::hierarchical_schedule(10'000, 8), 10'000);
  for (int32_t p = 256; p <= std::min(max_world, 2048); p *= 2) {
    measure("ring", testing::ring_schedule(p), p);
  }
  return 0;
}
