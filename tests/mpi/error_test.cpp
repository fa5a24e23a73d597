// Bad input to the runtime under mpirun: each case must give a clear RuntimeError on every
// rank concerned, naming what is wrong, and never hang (the timeouts here are short).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <fstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "ir/plan_binary.hpp"
#include "runtime/communicator.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kShortTimeout = std::chrono::milliseconds(1500);

Options short_timeout() {
  Options options = Options::from_env();
  options.timeout = kShortTimeout;
  return options;
}

// Whether `text` contains `pattern`, where each '#' in the pattern stands for one or more
// decimal digits (plain string checks: std::regex trips GCC 12's warnings under ASan).
bool contains_pattern(std::string_view text, std::string_view pattern) {
  auto matches_at = [&](size_t pos) {
    for (const char expected : pattern) {
      if (expected == '#') {
        const size_t digits_start = pos;
        while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
        if (pos == digits_start) return false;
      } else if (pos >= text.size() || text[pos++] != expected) {
        return false;
      }
    }
    return true;
  };
  for (size_t start = 0; start <= text.size(); ++start) {
    if (matches_at(start)) return true;
  }
  return false;
}

// Whether one line of `text` ends with `suffix`.
bool has_line_ending_with(std::string_view text, std::string_view suffix) {
  for (size_t pos = text.find(suffix); pos != std::string_view::npos; pos = text.find(suffix, pos + 1)) {
    const size_t end = pos + suffix.size();
    if (end == text.size() || text[end] == '\n') return true;
  }
  return false;
}

TEST(StringChecks, PatternsAndLineEnds) {
  EXPECT_TRUE(contains_pattern("x rank 12 (switch/m3/gpu0): y", "rank # (switch/m#/gpu#)"));
  EXPECT_FALSE(contains_pattern("rank  (switch/m3/gpu0)", "rank # (switch/m#/gpu#)"));
  EXPECT_FALSE(contains_pattern("rank 1 (switch/mx/gpu0)", "rank # (switch/m#/gpu#)"));
  EXPECT_TRUE(has_line_ending_with("a: MPI ranks 0\nb", ": MPI ranks 0"));
  EXPECT_TRUE(has_line_ending_with("a: MPI ranks 0", ": MPI ranks 0"));
  EXPECT_FALSE(has_line_ending_with("a: MPI ranks 0, 1\n", ": MPI ranks 0"));
}

ir::Plan good_plan(int world) { return plan_for(random_tree(world, 5), "flexreduce"); }

// Runs `body`, which must throw RuntimeError; returns its message ("" and a failure if not).
template <typename F>
std::string error_of(F body) {
  try {
    body();
  } catch (const RuntimeError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no RuntimeError";
  return "";
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A path private to this rank and test.
std::string temp_path(const std::string& what) {
  return fmt::format("/tmp/flexplan-mpi-test-{}-{}-{}.bin", getpid(), world_rank(), what);
}

TEST(Creation, WrongWorldSizeFailsOnEveryRank) {
  const auto start = Clock::now();
  const std::string message = error_of([] { Communicator comm(good_plan(world_size() + 1), MPI_COMM_WORLD); });
  EXPECT_NE(message.find(fmt::format("world size {}", world_size() + 1)), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("{} MPI ranks", world_size())), std::string::npos) << message;
  EXPECT_LT(seconds_since(start), 10.0);
}

TEST(Creation, DifferentPlansFailOnEveryRankAndNameTheHolders) {
  const int world = world_size();
  const std::string message = error_of([world] {
    Communicator comm(world_rank() == 0 ? hand_ring_plan(world) : good_plan(world), MPI_COMM_WORLD);
  });
  EXPECT_NE(message.find("different plans"), std::string::npos) << message;
  EXPECT_TRUE(has_line_ending_with(message, ": MPI ranks 0")) << message;
}

TEST(Creation, PlanFileProblemsOnSomeRanksFailEveryRank) {
  const int world = world_size();
  const std::string path = temp_path("plan");
  if (world_rank() == 0) {
    // A ring missing its last all-gather step: well formed, but verify_plan rejects it.
    ir::Plan broken = hand_ring_plan(world);
    broken.schedules[0].steps.pop_back();
    const auto bytes = ir::encode_plan(broken);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
  } else if (world_rank() == 1) {
    std::ofstream(path, std::ios::binary) << "this is not a plan";
  } else {
    ir::write_plan_file(path, hand_ring_plan(world));
  }
  const std::string message = error_of([&] { Communicator comm(path, MPI_COMM_WORLD); });
  std::remove(path.c_str());
  EXPECT_NE(message.find("loading the plan failed"), std::string::npos) << message;
  EXPECT_NE(message.find("MPI rank 0: plan '/tmp/"), std::string::npos) << message;
  EXPECT_NE(message.find("MPI rank 1: plan '/tmp/"), std::string::npos) << message;
  EXPECT_EQ(message.find("MPI rank 2:"), std::string::npos) << "rank 2's plan was fine: " << message;
}

TEST(Creation, MissingPlanFileNamesThePath) {
  const std::string message = error_of([] { Communicator comm("/nonexistent/plan.bin", MPI_COMM_WORLD); });
  EXPECT_NE(message.find("/nonexistent/plan.bin"), std::string::npos) << message;
}

TEST(Creation, PlanThatFailsVerificationInMemory) {
  ir::Plan broken = hand_ring_plan(world_size());
  broken.schedules[0].steps.edit().erase(broken.schedules[0].steps.edit().begin());  // drops contributions
  const std::string message = error_of([&] { Communicator comm(broken, MPI_COMM_WORLD); });
  EXPECT_NE(message.find("(in memory)"), std::string::npos) << message;
}

TEST(Creation, DifferentChunkSizesFailEveryRank) {
  Options options = Options::from_env();
  options.chunk_bytes = world_rank() == 0 ? 4096 : 8192;
  const std::string message = error_of([&] { Communicator comm(good_plan(world_size()), MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("chunk sizes"), std::string::npos) << message;
}

TEST(Creation, DifferentSingleCopyThresholdsFailEveryRank) {
  Options options = Options::from_env();
  options.single_copy_min_bytes = world_rank() == 0 ? 4096 : 8192;
  const std::string message = error_of([&] { Communicator comm(good_plan(world_size()), MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("single-copy thresholds"), std::string::npos) << message;
  EXPECT_NE(message.find("4096 bytes: ranks 0"), std::string::npos) << message;
}

// One host: every process can read the others, so single copy is on unless a rank turns it
// off, and a rank that requires it then fails creation everywhere, naming the rank that refused.
TEST(Creation, SingleCopyIsOnAlikeOrRefusedByName) {
  {
    Communicator comm(good_plan(world_size()), MPI_COMM_WORLD, Options::from_env());
    EXPECT_TRUE(comm.single_copy());
  }
  Options options = Options::from_env();
  options.single_copy = world_rank() == 0 ? SingleCopy::On : SingleCopy::Off;
  const std::string message = error_of([&] { Communicator comm(good_plan(world_size()), MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("FLEXPLAN_SINGLE_COPY=on) but is not possible"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1: FLEXPLAN_SINGLE_COPY=off"), std::string::npos) << message;
}

TEST(Creation, UnknownLearnerNameFailsEveryRank) {
  const ir::Plan plan = good_plan(world_size());
  Options options = Options::from_env();
  options.rank_mapping = RankMapping::Name;
  options.learner_name = world_rank() == 0 ? "no/such/gpu" : plan.rank_names[static_cast<size_t>(world_rank())];
  const std::string message = error_of([&] { Communicator comm(plan, MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("MPI rank 0: plan '(in memory)': learner name 'no/such/gpu'"), std::string::npos)
      << message;
}

// All ranks run on this host; a plan of several machines is then refused on every rank, listing
// both groupings, unless every rank allows it (the test environment allows it for the others).
TEST(Creation, PlanMachinesAgainstHosts) {
  if (world_size() < 2) GTEST_SKIP() << "one rank is one machine";
  ir::Plan plan = hand_ring_plan(world_size());
  for (int r = 0; r < world_size(); ++r)
    plan.rank_names[static_cast<size_t>(r)] = fmt::format("switch/m{}/gpu0", r % 2);
  Options options = Options::from_env();
  options.allow_host_mismatch = false;
  std::string message = error_of([&] { Communicator comm(plan, MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("the plan's machines are not the job's hosts: the plan expects 2 machines:"),
            std::string::npos) << message;
  EXPECT_NE(message.find("switch/m1: plan rank"), std::string::npos) << message;
  EXPECT_NE(message.find("the job runs on 1 host:"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("MPI ranks 0-{})", world_size() - 1)), std::string::npos) << message;
  EXPECT_NE(message.find("FLEXPLAN_ALLOW_HOST_MISMATCH=1"), std::string::npos) << message;
  // Allowed on some ranks only: still refused everywhere, naming the others.
  options.allow_host_mismatch = world_rank() != 1;
  message = error_of([&] { Communicator comm(plan, MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("but not on MPI rank 1"), std::string::npos) << message;
  // Allowed everywhere: it runs.
  options.allow_host_mismatch = true;
  {
    Communicator comm(plan, MPI_COMM_WORLD, options);
    std::vector<int32_t> data(7, world_rank() + 1);
    comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(data[0], world_size() * (world_size() + 1) / 2);
  }
  // One machine on one host matches, whatever the option.
  for (int r = 0; r < world_size(); ++r) plan.rank_names[static_cast<size_t>(r)] = fmt::format("switch/m0/gpu{}", r);
  options.allow_host_mismatch = false;
  Communicator matching(plan, MPI_COMM_WORLD, options);
}

// Mapping by name on a host the plan has no machine for names the machines it expects.
TEST(Creation, NameMappingListsTheExpectedMachines) {
  ir::Plan plan = hand_ring_plan(world_size());
  for (int r = 0; r < world_size(); ++r) plan.rank_names[static_cast<size_t>(r)] = fmt::format("switch/node{}/gpu0", r);
  Options options = Options::from_env();
  options.rank_mapping = RankMapping::Name;
  const std::string message = error_of([&] { Communicator comm(plan, MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("the plan's machines are 'node0' (1 learner)"), std::string::npos) << message;
}

TEST(Creation, TwoProcessesClaimingOneLearnerFailEveryRank) {
  const ir::Plan plan = good_plan(world_size());
  Options options = Options::from_env();
  options.rank_mapping = RankMapping::Name;
  // Rank 0 claims rank 1's learner too.
  options.learner_name = plan.rank_names[static_cast<size_t>(std::max(world_rank(), 1))];
  const std::string message = error_of([&] { Communicator comm(plan, MPI_COMM_WORLD, options); });
  EXPECT_NE(message.find("plan rank 1 is claimed by MPI ranks 0, 1"), std::string::npos) << message;
  EXPECT_NE(message.find("plan rank 0 is claimed by no process"), std::string::npos) << message;
}

TEST(Arguments, BadArgumentsAreRefusedLocally) {
  Communicator comm(good_plan(world_size()), MPI_COMM_WORLD);
  EXPECT_NE(error_of([&] { comm.allreduce(nullptr, nullptr, 10, DataType::Int32, ReduceOp::Sum); })
                .find("null receive buffer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { comm.force_algorithm("no-such-algorithm"); }).find("it has: flexreduce"),
            std::string::npos);
  // The communicator still works afterwards: nothing was started.
  std::string detail;
  EXPECT_EQ(allreduce_and_check(comm, 1009, DataType::Int32, ReduceOp::Sum, true, 1, &detail), 0u) << detail;
}

TEST(Arguments, MalformedEnvironmentNamesTheVariable) {
  setenv("FLEXPLAN_TIMEOUT_MS", "soon", 1);
  EXPECT_NE(error_of([] { Options::from_env().throw_if_invalid(); }).find("FLEXPLAN_TIMEOUT_MS='soon'"),
            std::string::npos);
  unsetenv("FLEXPLAN_TIMEOUT_MS");
  setenv("FLEXPLAN_RANK_MAPPING", "random", 1);
  EXPECT_NE(error_of([] { Options::from_env().throw_if_invalid(); }).find("FLEXPLAN_RANK_MAPPING='random'"),
            std::string::npos);
  unsetenv("FLEXPLAN_RANK_MAPPING");
}

// The last rank never joins an operation: every other rank fails within about the timeout,
// with a message naming the operation, the step, the op and the peer it waits for, and the
// communicator refuses further work.
TEST(Timeouts, PeerThatNeverJoinsFailsTheOthersWithinTheTimeout) {
  const int world = world_size();
  const bool skipper = world_rank() == world - 1;
  Communicator comm(good_plan(world), MPI_COMM_WORLD, short_timeout());
  std::vector<int32_t> data(100000, 1);
  if (!skipper) {
    const auto start = Clock::now();
    const std::string message = error_of([&] {
      comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
    });
    const double elapsed = seconds_since(start);
    EXPECT_NE(message.find("allreduce #0 (flexreduce, 100000 x int32 sum): step "), std::string::npos) << message;
    EXPECT_NE(message.find(", op "), std::string::npos) << message;
    // The peer it waits for, by rank and learner name.
    EXPECT_TRUE(contains_pattern(message, "rank # (switch/m#/gpu#)")) << message;
    EXPECT_NE(message.find("no progress for 1500 ms"), std::string::npos) << message;
    // Each rank's clock starts at its last progress, at most one timeout after the start.
    EXPECT_LT(elapsed, 3 * 1.5 + 1) << message;
    EXPECT_NE(error_of([&] {
                comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
              }).find("unusable after an earlier error"),
              std::string::npos);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The same for the sparse all-reduce, whose exchange runs outside the operation queue: every
// rank that joined fails within about the timeout, naming the step and the peer.
TEST(Timeouts, PeerThatNeverJoinsASparseAllReduce) {
  const int world = world_size();  // 2 or more (tests/mpi/CMakeLists.txt)
  const bool skipper = world_rank() == world - 1;
  Communicator comm(good_plan(world), MPI_COMM_WORLD, short_timeout());
  std::vector<float> data(100000, 1.0f);
  if (!skipper) {
    const auto start = Clock::now();
    const std::string message =
        error_of([&] { comm.sparse_allreduce(data.data(), data.size(), DataType::Float32, 0.01); });
    EXPECT_NE(message.find("flexplan sparse_allreduce: step "), std::string::npos) << message;
    EXPECT_TRUE(message.find("no progress for 1500 ms") != std::string::npos ||
                contains_pattern(message, "rank # (switch/m#/gpu#) failed: "))
        << message;
    EXPECT_LT(seconds_since(start), 3 * 1.5 + 1) << message;
    EXPECT_NE(error_of([&] { comm.sparse_allreduce(data.data(), data.size(), DataType::Float32, 0.01); })
                  .find("unusable after an earlier error"),
              std::string::npos);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A sparse all-reduce of `count` elements (which differs between ranks) must fail on every
// rank within 2 s, saying `why` or naming the peer that failed, and never wait out the 20 s
// timeout; some rank must say `why` (the others may only hear of its failure).
void expect_sparse_count_mismatch_fails(const ir::Plan& plan, Options options, size_t count, const std::string& why) {
  options.timeout = std::chrono::milliseconds(20000);
  Communicator comm(plan, MPI_COMM_WORLD, options);
  if (options.single_copy == SingleCopy::On) {
    ASSERT_TRUE(comm.single_copy());
  }
  std::vector<float> data(count, 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  const std::string message = error_of([&] { comm.sparse_allreduce(data.data(), count, DataType::Float32, 0.01); });
  EXPECT_LT(seconds_since(start), 2.0) << message;
  EXPECT_TRUE(message.find(why) != std::string::npos || message.find("failed") != std::string::npos) << message;
  EXPECT_GE(sum_over_ranks(message.find(why) != std::string::npos ? 1 : 0), 1u) << message;
  MPI_Barrier(MPI_COMM_WORLD);
}

// Rank 0 passes one element more than the others, on a plan of one machine per rank (no steps
// within machines, whose lengths would differ): no rank may finish with a result.
TEST(Timeouts, SparseCountThatDiffersOnOneRankFailsWithoutHanging) {
  ir::Plan plan = good_plan(world_size());
  plan.rank_names.clear();
  expect_sparse_count_mismatch_fails(plan, Options::from_env(), 10007 + (world_rank() == 0 ? 1 : 0),
                                     "do all ranks pass the same count");
}

// Rank 0 passes twice the others' count on a plan of one machine, with every message of the
// steps within the machine sent by single copy: each rank gets a descriptor of another length
// than it expects, and none reads past what its peer offered. (The descriptor's call signature
// tells the counts apart first; with FLEXPLAN_CHECK_CALLS=off the descriptor's length does.)
TEST(Timeouts, SparseCountThatDiffersFailsAcrossSingleCopy) {
  Options options = Options::from_env();
  options.single_copy = SingleCopy::On;
  options.single_copy_min_bytes = 1;
  const char* checks = std::getenv("FLEXPLAN_CHECK_CALLS");
  const bool checked = checks == nullptr || std::string_view(checks) == "on" || std::string_view(checks) == "1";
  expect_sparse_count_mismatch_fails(hand_ring_plan(world_size()), options, world_rank() == 0 ? 20014 : 10007,
                                     checked ? "do all ranks pass the same count" : "expected the single-copy descriptor of");
}

// Blocking mode with a timeout shorter than its sleeps: the last rank joins 2 s late, and the
// others must time out after about 150 ms all the same (the idle sleeps count as time spent
// driving the runtime, not as time the caller spent elsewhere).
TEST(Timeouts, BlockingModeHonoursAShortTimeout) {
  const int world = world_size();
  const bool late = world_rank() == world - 1;
  Options options = Options::from_env();
  options.blocking = true;
  options.timeout = std::chrono::milliseconds(150);
  Communicator comm(good_plan(world), MPI_COMM_WORLD, options);
  std::vector<int32_t> data(100000, 1);
  if (late) std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto start = Clock::now();
  const std::string message = error_of([&] {
    comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
  });
  if (!late) {
    EXPECT_NE(message.find("no progress for 150 ms"), std::string::npos) << message;
    EXPECT_LT(seconds_since(start), 1.5) << message;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Rank 0 passes one element more than the others: the runtime must not hang and must not
// report success everywhere (message lengths are checked, or the timeout fires).
TEST(Timeouts, MismatchedCountFailsWithoutHanging) {
  const int world = world_size();
  Communicator comm(good_plan(world), MPI_COMM_WORLD, short_timeout());
  const size_t count = 10007 + (world_rank() == 0 ? 1 : 0);
  std::vector<int32_t> data(count, 1);
  const auto start = Clock::now();
  uint64_t failed = 0;
  try {
    comm.allreduce(data.data(), data.data(), count, DataType::Int32, ReduceOp::Sum);
  } catch (const RuntimeError& e) {
    failed = 1;
    const std::string message = e.what();
    EXPECT_TRUE(message.find("do all ranks pass the same count") != std::string::npos ||
                message.find("no progress") != std::string::npos ||
                message.find("abandoned") != std::string::npos)
        << message;
  }
  EXPECT_LT(seconds_since(start), 3 * 1.5 + 1);
  EXPECT_GE(sum_over_ranks(failed), 1u);
  MPI_Barrier(MPI_COMM_WORLD);
}

// --- one rank's failure reaches the others (abort notices) -----------------------------------

constexpr auto kLongTimeout = std::chrono::milliseconds(20000);

Options long_timeout() {
  Options options = Options::from_env();
  options.timeout = kLongTimeout;
  return options;
}

// Rank 0 passes one element more than the others. The ranks that receive its chunks see the
// wrong length at once; every other rank must learn it from them well within the (20 s)
// timeout, with the cause.
TEST(Abort, WrongCountOnOneRankFailsEveryRankFast) {
  Communicator comm(good_plan(world_size()), MPI_COMM_WORLD, long_timeout());
  const size_t count = 100003 + (world_rank() == 0 ? 1 : 0);
  std::vector<int32_t> data(count, 1);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  const std::string message = error_of([&] {
    comm.allreduce(data.data(), data.data(), count, DataType::Int32, ReduceOp::Sum);
  });
  EXPECT_LT(seconds_since(start), 2.0) << message;
  EXPECT_NE(message.find("do all ranks pass the same count"), std::string::npos) << message;
  MPI_Barrier(MPI_COMM_WORLD);
}

// The last rank gives up on purpose (Communicator::abort) while the others wait in an
// all-reduce: they fail at once, naming it and its reason.
TEST(Abort, AbortOnOneRankFailsTheOthersFastNamingIt) {
  const int world = world_size();
  const bool quitter = world_rank() == world - 1;
  Communicator comm(good_plan(world), MPI_COMM_WORLD, long_timeout());
  std::vector<int32_t> data(100000, 1);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  if (quitter) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    comm.abort("injected failure");
    EXPECT_NE(error_of([&] {
                comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
              }).find("injected failure"),
              std::string::npos);
  } else {
    const std::string message = error_of([&] {
      comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
    });
    EXPECT_LT(seconds_since(start), 2.0) << message;
    EXPECT_TRUE(contains_pattern(message, fmt::format("rank {} (switch/m#/gpu#) failed: ", world - 1)))
        << message;
    EXPECT_NE(message.find("injected failure"), std::string::npos) << message;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// An exception leaves the last rank's scope while the others wait in an all-reduce: the
// communicator's destructor tells them.
TEST(Abort, ExceptionOnOneRankFailsTheOthersFast) {
  const int world = world_size();
  const bool thrower = world_rank() == world - 1;
  std::vector<int32_t> data(100000, 1);
  std::string message;
  double elapsed = 0;
  try {
    Communicator comm(good_plan(world), MPI_COMM_WORLD, long_timeout());
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    if (thrower) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      throw std::runtime_error("the application failed");
    }
    message = error_of([&] {
      comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
    });
    elapsed = seconds_since(start);
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(thrower) << e.what();
  }
  if (!thrower) {
    EXPECT_LT(elapsed, 2.0) << message;
    EXPECT_TRUE(contains_pattern(message, fmt::format("rank {} (switch/m#/gpu#) failed: ", world - 1)))
        << message;
    EXPECT_NE(message.find("exception"), std::string::npos) << message;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The last rank is away (outside the runtime) for longer than the timeout: the others time
// out, and when it comes back its all-reduce fails at once with their diagnosis, instead of
// waiting out a timeout of its own.
TEST(Abort, LateRankLearnsOfTheTimeoutAtOnce) {
  const int world = world_size();
  const bool late = world_rank() == world - 1;
  Communicator comm(good_plan(world), MPI_COMM_WORLD, short_timeout());
  std::vector<int32_t> data(100000, 1);
  if (late) std::this_thread::sleep_for(2 * kShortTimeout + std::chrono::milliseconds(500));
  const auto start = Clock::now();
  const std::string message = error_of([&] {
    comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
  });
  EXPECT_NE(message.find("no progress for 1500 ms"), std::string::npos) << message;
  if (late) {
    EXPECT_LT(seconds_since(start), 0.5) << message;
    EXPECT_TRUE(contains_pattern(message, "rank # (switch/m#/gpu#) failed: ")) << message;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void register_nothing() {}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_nothing);
}
