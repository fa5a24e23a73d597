// Call checks under mpirun: ranks issuing different calls of the same byte size (op, type,
// count, collective, root) must all fail fast with a message naming both calls, never hang and
// never return a result; FLEXPLAN_CHECK_CALLS must agree across ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/communicator.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

using Clock = std::chrono::steady_clock;

// Long enough that a rank which only learns of the mismatch by waiting would be caught by
// the 3 s limit below: failures must travel by the runtime's abort notices.
Options long_timeout() {
  Options options = Options::from_env();
  options.timeout = std::chrono::milliseconds(20000);
  return options;
}

ir::Plan ring() { return hand_ring_plan(world_size()); }
ir::Plan tree() { return plan_for(random_tree(world_size(), 7), "flexreduce"); }

// One call of this rank: the all-reduce arguments and what it stands for.
struct Call {
  size_t count = 1024;
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  CallInfo info;
};

// Every rank makes two matching calls (so the mismatched one is call 2), then its own `call`;
// rank 0's differs from the others'. Every rank must throw within 3 s, naming `mine` and
// `theirs` (the descriptions of rank 0's call and the others', "allreduce max of 1024 float32")
// and the call number.
void expect_mismatch_fails_everywhere(const ir::Plan& plan, Options options, const Call& rank0, const Call& others,
                                      const std::string& rank0_text, const std::string& others_text) {
  Communicator comm(plan, MPI_COMM_WORLD, options);
  std::vector<std::byte> warm(64);
  for (int i = 0; i < 2; ++i) comm.allreduce(warm.data(), warm.data(), warm.size(), DataType::UInt8, ReduceOp::Sum);
  const Call& call = world_rank() == 0 ? rank0 : others;
  std::vector<std::byte> data(call.count * size_of(call.type), std::byte{1});
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  std::string message;
  try {
    comm.allreduce(data.data(), data.data(), call.count, call.type, call.op, call.info);
    ADD_FAILURE() << "rank " << world_rank() << " returned from a mismatched call";
  } catch (const RuntimeError& e) {
    message = e.what();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(seconds, 3.0) << message;
  EXPECT_NE(message.find(rank0_text + ", call 2"), std::string::npos) << message;
  EXPECT_NE(message.find(others_text + ", call 2"), std::string::npos) << message;
  EXPECT_NE(message.find("belongs to another call"), std::string::npos) << message;
  // Later calls refuse at once: the communicator is broken on every rank.
  EXPECT_THROW(comm.allreduce(warm.data(), warm.data(), warm.size(), DataType::UInt8, ReduceOp::Sum), RuntimeError);
  MPI_Barrier(MPI_COMM_WORLD);
}

void on_both_plans(const std::function<void(const ir::Plan&)>& body) {
  SCOPED_TRACE("hand ring");
  body(ring());
  SCOPED_TRACE("flexreduce tree");
  body(tree());
}

TEST(CallChecks, OpMismatchSumAgainstMax) {
  on_both_plans([](const ir::Plan& plan) {
    Call sum, max;
    max.op = ReduceOp::Max;
    expect_mismatch_fails_everywhere(plan, long_timeout(), max, sum, "allreduce max of 1024 float32",
                                     "allreduce sum of 1024 float32");
  });
}

TEST(CallChecks, TypeMismatchOfTheSameByteSize) {
  on_both_plans([](const ir::Plan& plan) {
    Call f32, i32;
    i32.type = DataType::Int32;
    expect_mismatch_fails_everywhere(plan, long_timeout(), i32, f32, "allreduce sum of 1024 int32",
                                     "allreduce sum of 1024 float32");
  });
}

// One element more on rank 0: its messages are longer than its peers expect, and theirs
// shorter than it expects; both must still be read far enough to name the calls.
TEST(CallChecks, CountMismatch) {
  on_both_plans([](const ir::Plan& plan) {
    Call small, large;
    large.count = 1025;
    expect_mismatch_fails_everywhere(plan, long_timeout(), large, small, "allreduce sum of 1025 float32",
                                     "allreduce sum of 1024 float32");
  });
}

// Past a chunk (1 MiB): the first chunks have equal lengths, the signatures differ.
TEST(CallChecks, CountMismatchOfSeveralChunks) {
  Call small, large;
  small.count = 600000;
  large.count = 600001;
  expect_mismatch_fails_everywhere(ring(), long_timeout(), large, small, "allreduce sum of 600001 float32",
                                   "allreduce sum of 600000 float32");
}

// Every chunk by single copy: the signature travels with the descriptor.
TEST(CallChecks, CountMismatchAcrossSingleCopy) {
  Options options = long_timeout();
  options.single_copy = SingleCopy::On;
  options.single_copy_min_bytes = 1;
  Call small, large;
  small.count = 20000;
  large.count = 20001;
  expect_mismatch_fails_everywhere(ring(), options, large, small, "allreduce sum of 20001 float32",
                                   "allreduce sum of 20000 float32");
}

// The PyTorch backend's broadcast is an all-reduce of the same size: named as broadcast, it
// must not match an all-reduce.
TEST(CallChecks, CollectiveMismatchBroadcastAgainstAllReduce) {
  on_both_plans([](const ir::Plan& plan) {
    Call allreduce, broadcast;
    broadcast.info.collective = UserCollective::Broadcast;
    broadcast.info.root = 0;
    expect_mismatch_fails_everywhere(plan, long_timeout(), broadcast, allreduce,
                                     "broadcast (root 0) of 1024 float32", "allreduce sum of 1024 float32");
  });
}

TEST(CallChecks, RootMismatch) {
  Call root0, root1;
  root0.info.collective = root1.info.collective = UserCollective::Broadcast;
  root0.info.root = 0;
  root1.info.root = 1;
  expect_mismatch_fails_everywhere(ring(), long_timeout(), root1, root0, "broadcast (root 1) of 1024 float32",
                                   "broadcast (root 0) of 1024 float32");
}

// A collective carried out on bytes names the caller's type and count.
TEST(CallChecks, CallersTypeAndCountAreCompared) {
  Call f32, i32;
  f32.count = i32.count = 4096;
  f32.type = i32.type = DataType::UInt8;
  f32.info.collective = i32.info.collective = UserCollective::AllGather;
  f32.info.type = DataType::Float32;
  i32.info.type = DataType::Int32;
  f32.info.count = i32.info.count = 1024;
  expect_mismatch_fails_everywhere(ring(), long_timeout(), i32, f32, "allgather of 1024 int32",
                                   "allgather of 1024 float32");
}

// Matching calls of every kind still give right results (the signature costs no data).
TEST(CallChecks, MatchingCallsGiveRightResults) {
  Communicator comm(tree(), MPI_COMM_WORLD, long_timeout());
  std::string detail;
  for (size_t count : {size_t{0}, size_t{1}, size_t{57}, size_t{70000}, size_t{300001}}) {
    for (bool in_place : {true, false}) {
      EXPECT_EQ(allreduce_and_check(comm, count, DataType::Float32, ReduceOp::Sum, in_place, count, &detail), 0u)
          << count << ": " << detail;
    }
  }
  std::vector<float> data(1000, static_cast<float>(world_rank() == 1 ? 5 : 0));
  CallInfo broadcast;
  broadcast.collective = UserCollective::Broadcast;
  broadcast.root = 1 % world_size();
  comm.allreduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum, broadcast);
  EXPECT_EQ(data[999], world_size() > 1 ? 5.0f : 0.0f);
}

TEST(CallChecks, RootOutOfRangeIsRefusedLocally) {
  Communicator comm(ring(), MPI_COMM_WORLD, long_timeout());
  std::vector<float> data(8);
  CallInfo broadcast;
  broadcast.collective = UserCollective::Broadcast;
  broadcast.root = world_size();
  EXPECT_THROW(comm.allreduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum, broadcast),
               RuntimeError);
  // Nothing was issued: the communicator goes on.
  comm.allreduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum);
}

// With FLEXPLAN_CHECK_CALLS set as given on rank 0 only, creation must fail on every rank
// saying `why`.
void expect_creation_fails(const char* rank0_value, const std::string& why) {
  if (world_rank() == 0) setenv("FLEXPLAN_CHECK_CALLS", rank0_value, 1);
  std::string message;
  try {
    Communicator comm(ring(), MPI_COMM_WORLD, long_timeout());
    ADD_FAILURE() << "creation succeeded";
  } catch (const InputError& e) {
    message = e.what();
  }
  unsetenv("FLEXPLAN_CHECK_CALLS");
  EXPECT_NE(message.find(why), std::string::npos) << message;
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CallChecks, SettingMustAgree) {
  if (world_size() < 2) GTEST_SKIP();
  expect_creation_fails("off", "the ranks disagree on FLEXPLAN_CHECK_CALLS: on at ranks 1");
  expect_creation_fails("maybe", "FLEXPLAN_CHECK_CALLS='maybe' is not on, off, 1 or 0");
}

// Off everywhere: messages carry no signature and results stay right.
TEST(CallChecks, OffEverywhereRuns) {
  setenv("FLEXPLAN_CHECK_CALLS", "off", 1);
  {
    Communicator comm(tree(), MPI_COMM_WORLD, long_timeout());
    std::string detail;
    for (size_t count : {size_t{0}, size_t{13}, size_t{300001}})
      EXPECT_EQ(allreduce_and_check(comm, count, DataType::Int32, ReduceOp::Max, false, count, &detail), 0u) << detail;
  }
  unsetenv("FLEXPLAN_CHECK_CALLS");
  MPI_Barrier(MPI_COMM_WORLD);
}

// A sparse all-reduce of another count on rank 0 names both calls too.
TEST(CallChecks, SparseCountMismatchNamesBothCalls) {
  ir::Plan plan = ring();
  Communicator comm(plan, MPI_COMM_WORLD, long_timeout());
  const size_t count = world_rank() == 0 ? 20002 : 20001;
  std::vector<float> data(count, 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  std::string message;
  try {
    comm.sparse_allreduce(data.data(), count, DataType::Float32, 0.5);
    ADD_FAILURE() << "returned";
  } catch (const RuntimeError& e) {
    message = e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0) << message;
  EXPECT_NE(message.find("sparse_allreduce of 20002 float32, call 0"), std::string::npos) << message;
  EXPECT_NE(message.find("sparse_allreduce of 20001 float32, call 0"), std::string::npos) << message;
  MPI_Barrier(MPI_COMM_WORLD);
}

void register_nothing() {}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_nothing);
}
