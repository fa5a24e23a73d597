// The verifier's memory is bounded by the size of the plan, whatever world size it claims and
// however it fails: small failing plans at large world sizes are verified by `flexplan verify`
// in a child process under an address-space limit, and the child's peak memory is measured.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "ir/plan_binary.hpp"
#include "tests/unit/cli_run.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

struct LimitedRun {
  int exit_code = -1;
  std::string output;
  long peak_rss_kib = 0;
};

// Runs `flexplan ARGS...` with its address space limited to `limit_bytes` (not under
// AddressSanitizer, which reserves terabytes of address space for its shadow memory), and
// returns its exit code, its stdout+stderr and its peak resident memory.
LimitedRun run_limited(const std::vector<std::string>& args, rlim_t limit_bytes,
                       const std::string& output_path) {
  LimitedRun run;
  const pid_t child = fork();
  if (child == 0) {
    if (!kAddressSanitizer) {
      const rlimit limit{limit_bytes, limit_bytes};
      setrlimit(RLIMIT_AS, &limit);
    }
    FILE* out = std::freopen(output_path.c_str(), "w", stdout);
    if (!out) _exit(126);
    dup2(fileno(stdout), fileno(stderr));
    std::vector<char*> argv{const_cast<char*>(FLEXPLAN_BINARY)};
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(FLEXPLAN_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(child, &status, 0, &usage);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.peak_rss_kib = usage.ru_maxrss;
  std::ifstream in(output_path);
  run.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return run;
}

class IrVerifyBounds : public flexplan::testing::ScratchDirTest {};

constexpr rlim_t kAddressLimit = rlim_t{1} << 30;  // 1 GiB
constexpr long kPeakLimitKib = 400 * 1024;         // far below what P^2 bits or segments need

// A binary tree over 2^18 ranks whose very last broadcast covers one of its two units: the
// exact explanation of that fault must not keep a world-sized set per written rank
// (2^18 x 2^18 bits would be 8 GiB).
TEST_F(IrVerifyBounds, ExplainingAFaultAtLargeWorldSizeNeedsLittleMemory) {
  const int32_t p = 1 << 18;
  Schedule tree = testing::tree_schedule(p, 2);
  Op& last = tree.steps.edit().back().ops.back();
  ASSERT_EQ(last.group.back(), p - 1);
  last.end = 1;
  const auto bytes = encode_plan(testing::plan_of({tree}, p));
  std::ofstream(path("tree.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EXPECT_LT(bytes.size(), 16u << 20);

  const auto run = run_limited({"verify", path("tree.bin")}, kAddressLimit, path("out.txt"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("FAILED: schedule 0 (tree): after the last step rank 262143 holds 1 "
                            "of 262144 contributions on units [1,2)"),
            std::string::npos)
      << run.output;
  EXPECT_LT(run.peak_rss_kib, kPeakLimitKib) << run.output;
}

// One rank gets 20,000 different values on 20,000 units, then broadcasts them to 20,000 ranks
// in one op: 4 * 10^8 pieces of state if every rank kept its own copy of every piece, from a
// plan of about 200 KB. The verifier works on windows of units small enough for its budget.
TEST_F(IrVerifyBounds, AmplifyingBroadcastIsVerifiedInWindows) {
  const int32_t p = 20'000;
  const uint64_t units = 20'000;
  Schedule schedule;
  schedule.algorithm = "amplify";
  schedule.units = units;
  Step scatter{Phase::Reduce, 0, {}};
  for (uint64_t u = 0; u < units; u += 2) scatter.ops.push_back(Op{OpKind::Reduce, u, u + 1, 0, {0, 1}});
  Step spread{Phase::Broadcast, 0, {Op{OpKind::Broadcast, 0, units, 0, testing::iota_ranks(p)}}};
  schedule.steps = {scatter, spread};
  const auto bytes = encode_plan(testing::plan_of({schedule}, p));
  std::ofstream(path("amplify.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EXPECT_LT(bytes.size(), 768u << 10);  // format 7's per-rank entries: 10 bytes per rank here

  const auto run = run_limited({"verify", path("amplify.bin")}, kAddressLimit, path("out.txt"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("FAILED: schedule 0 (amplify): step 1 op 0 (broadcast [0,20000) root 0 "
                            "group 0 1 2"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("writing rank 2 on unit 0 discards the last copy of the contribution "
                            "of rank 2, held there since the start"),
            std::string::npos)
      << run.output;
  EXPECT_LT(run.peak_rss_kib, kPeakLimitKib) << run.output;
}

}  // namespace
}  // namespace flexplan::ir
