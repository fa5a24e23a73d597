// Loading a plan at job start under mpirun: each rank verifies its slice of the units
// (ir/job_plan.hpp), and a fault that only one rank's slice shows still fails every rank;
// a plan for another world size is refused on every rank without being verified. A plan
// written verified (format 7's flag, as write_plan_file writes it) is checked by parts: each
// rank reads and checks its own (ir/plan_slice.hpp), and a corrupted block fails every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "ir/plan_binary.hpp"
#include "runtime/communicator.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

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

std::string write_bytes(const std::string& what, const std::vector<uint8_t>& bytes) {
  const std::string path =
      fmt::format("/tmp/flexplan-mpi-load-{}-{}-{}.bin", getpid(), world_rank(), what);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// A binary tree over every rank with one unit per rank: reduce to rank 0, broadcast back.
ir::Plan tree_plan(int world) {
  ir::Plan plan;
  plan.world_size = world;
  plan.topology_name = "tree";
  ir::Schedule schedule;
  schedule.algorithm = "tree";
  schedule.units = static_cast<uint64_t>(world);
  std::vector<ir::Step> down;
  for (int distance = 1; distance < world; distance *= 2) {
    ir::Step up{ir::Phase::Reduce, 0, {}}, back{ir::Phase::Broadcast, 0, {}};
    for (int root = 0; root + distance < world; root += 2 * distance) {
      up.ops.push_back({ir::OpKind::Reduce, 0, schedule.units, root, {root, root + distance}});
      back.ops.push_back({ir::OpKind::Broadcast, 0, schedule.units, root, {root, root + distance}});
    }
    schedule.steps.push_back(up);
    down.insert(down.begin(), back);
  }
  for (auto& step : down) schedule.steps.push_back(step);
  plan.schedules = {schedule};
  return plan;
}

TEST(SlicedLoad, GoodPlanLoadsAndRuns) {
  const std::string path = write_bytes("good", ir::encode_plan(tree_plan(world_size())));
  Communicator comm(path, MPI_COMM_WORLD);
  std::vector<int32_t> data(1000, world_rank() + 1);
  comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
  EXPECT_EQ(data[999], world_size() * (world_size() + 1) / 2);
  std::remove(path.c_str());
}

// Written verified: each rank checks its own part, and the job runs. A block of ops corrupted
// fails every rank: those that read it by name in their part, the others in the whole plan.
TEST(SlicedLoad, VerifiedPlanIsCheckedByParts) {
  const ir::Plan plan = tree_plan(world_size());
  const std::vector<uint8_t> good = ir::encode_verified_plan(plan);
  ASSERT_TRUE(ir::verified_when_written(good, "good"));
  const std::string path = write_bytes("verified", good);
  {
    Communicator comm(path, MPI_COMM_WORLD);
    EXPECT_EQ(comm.plan(), ir::decode_plan(good, "good"));
    std::vector<int32_t> data(1000, world_rank() + 1);
    comm.allreduce(data.data(), data.data(), data.size(), DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(data[999], world_size() * (world_size() + 1) / 2);
  }
  std::remove(path.c_str());
  // The last byte of the blocks: in the last step's ops (the broadcast from rank 0 to rank 1).
  std::vector<uint8_t> bad = good;
  uint64_t blocks_at = 100, blocks_length = 0;
  for (size_t at : {60, 68, 76})
    for (int i = 0; i < 8; ++i) blocks_at += static_cast<uint64_t>(good[at + i]) << (8 * i);
  for (int i = 0; i < 8; ++i) blocks_length |= static_cast<uint64_t>(good[84 + i]) << (8 * i);
  bad[blocks_at + blocks_length - 1] ^= 0x04;
  const std::string bad_path = write_bytes("corrupt", bad);
  const std::string message = error_of([&] { Communicator comm(bad_path, MPI_COMM_WORLD); });
  std::remove(bad_path.c_str());
  EXPECT_NE(message.find("loading the plan failed"), std::string::npos) << message;
  EXPECT_NE(message.find("fails its checksum"), std::string::npos) << message;
  EXPECT_NE(message.find("read by rank "), std::string::npos) << message;
}

// Pipelines written to plan.bin load compact (ir/pipeline_form.hpp) and run to the right
// results, in place and out, at sizes with fewer elements than units and many more, with every
// dtype and op at one size.
TEST(SlicedLoad, PipelinesLoadCompactAndRun) {
  const Topology topo = random_tree(world_size(), 20261124);
  // Slices fewer and far more than the steps (receive indices shifted across many slices).
  for (const char* algorithm : {"flexreduce@3", "flexreduce-bw@4", "flexreduce-bw@64", "rabenseifner@2", "binomial-tree@4"}) {
    SCOPED_TRACE(algorithm);
    const ir::Plan plan = plan_for(topo, algorithm);
    const std::string path = write_bytes("piped", ir::encode_plan(plan));
    const std::string name = algorithm;
    const auto slices = static_cast<uint32_t>(std::stoul(name.substr(name.find('@') + 1)));
    if (!plan.schedules.at(0).steps.empty()) {  // (one rank: no steps, nothing to hold compact)
      ASSERT_EQ(ir::read_plan_file(path).schedules.at(0).slices, slices) << "loaded compact";
    }
    Communicator comm(path, MPI_COMM_WORLD);
    std::string detail;
    for (size_t count : {size_t{1}, size_t{7}, size_t{100003}})
      for (bool in_place : {true, false})
        EXPECT_EQ(allreduce_and_check(comm, count, DataType::Float32, ReduceOp::Sum, in_place, count, &detail), 0u)
            << "count " << count << (in_place ? " in place: " : ": ") << detail;
    for (DataType type : {DataType::Int32, DataType::Float64})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
        EXPECT_EQ(allreduce_and_check(comm, 4099, type, op, false, 11, &detail), 0u) << detail;
    std::remove(path.c_str());
  }
}

// The broadcast to the last rank stops one unit short: only the last rank's slice of the
// units shows it, and every rank fails naming it.
TEST(SlicedLoad, FaultInOneSliceFailsEveryRank) {
  const int world = world_size();
  ir::Plan plan = tree_plan(world);
  for (ir::Step& step : plan.schedules[0].steps.edit()) {
    for (ir::Op& op : step.ops) {
      if (op.kind == ir::OpKind::Broadcast && op.group.back() == world - 1)
        op.end = static_cast<uint64_t>(world - 1);
    }
  }
  const std::string path = write_bytes("fault", ir::encode_plan(plan));
  const std::string message = error_of([&] { Communicator comm(path, MPI_COMM_WORLD); });
  std::remove(path.c_str());
  EXPECT_NE(message.find("loading the plan failed"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("MPI rank {}: plan '/tmp/", world - 1)), std::string::npos)
      << message;
  EXPECT_NE(message.find(fmt::format("after the last step rank {} holds 1 of {} contributions on "
                                     "units [{},{})",
                                     world - 1, world, world - 1, world)),
            std::string::npos)
      << message;
  for (int r = 0; r + 1 < world; ++r)
    EXPECT_EQ(message.find(fmt::format("MPI rank {}:", r)), std::string::npos) << message;
}

// A small file claiming 2^31 - 1 ranks is refused by the world-size check, on every rank, at
// once: nothing sized by its world size is built.
TEST(SlicedLoad, HostileWorldSizeIsRefusedBeforeVerifying) {
  ir::Plan plan = tree_plan(world_size());
  plan.world_size = 2147483647;
  const std::string path = write_bytes("huge", ir::encode_plan(plan));
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { Communicator comm(path, MPI_COMM_WORLD); });
  std::remove(path.c_str());
  EXPECT_NE(message.find("world size 2147483647"), std::string::npos) << message;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

void register_nothing() {}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_nothing);
}
