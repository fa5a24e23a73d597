// The GPU backend (runtime/gpu) under mpirun, linked to the NCCL/CUDA emulation: the same
// backend code a GPU runs, on 1 to 8 ranks, every algorithm and dtype, with real data checks;
// stream semantics, several outstanding operations, the plan-load checks across ranks, and the
// emulation's own ordering rules (a mismatched issue order deadlocks and is named).
// Every rank runs the same tests in the same order; verdicts are summed over ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "ir/plan_binary.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/collective_planner.hpp"
#include "planner/plan_builder.hpp"
#include "runtime/gpu/device_communicator.hpp"
#include "runtime/gpu/staged_communicator.hpp"
#include "runtime/scratch_pool.hpp"
#include "tests/gpu/device_collective_checks.hpp"
#include "tests/gpu/fold_server_checks.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

using gpu::DeviceCommunicator;
using gpu::DeviceOptions;


// One all-reduce of (count, type, op) on device buffers through `stream`, checked on the host.
uint64_t device_allreduce_and_check(DeviceCommunicator& comm, size_t count, DataType type, ReduceOp op,
                                    bool in_place, uint64_t salt, cudaStream_t stream, std::string* detail) {
  const size_t bytes = count * size_of(type);
  std::vector<std::byte> host(std::max<size_t>(bytes, 1));
  fill_input(host.data(), count, type, op, comm.rank(), salt);
  DeviceBuffer send(bytes), recv(bytes);
  gpu::check_cuda(cudaMemcpy(send.data, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (in_place) {
    comm.allreduce(send.data, send.data, count, type, op, stream);
  } else {
    cudaMemsetAsync(recv.data, 0x5a, bytes, stream);
    comm.allreduce(send.data, recv.data, count, type, op, stream);
  }
  // Stream order: the copy back runs after the all-reduce, without any host wait before it.
  std::vector<std::byte> result(std::max<size_t>(bytes, 1));
  cudaMemcpyAsync(result.data(), in_place ? send.data : recv.data, bytes, cudaMemcpyDeviceToHost, stream);
  gpu::check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return verify_everywhere(result.data(), count, type, op, salt, detail);
}


std::vector<std::pair<std::string, ir::Plan>> plans_for_world(int world) {
  std::vector<std::pair<std::string, ir::Plan>> plans;
  if (world < 2) {
    plans.emplace_back("hand_ring", hand_ring_plan(world));
    return plans;
  }
  std::vector<Topology> topologies{random_tree(world, 11)};
  for (const std::string& path : bundled_topologies_with(world)) topologies.push_back(load_topology(path));
  for (const Topology& topology : topologies)
    for (const AlgorithmRow& row : algorithm_table()) {
      if (row.unsuitable && !row.unsuitable(topology).empty()) continue;
      plans.emplace_back(topology.name() + "/" + std::string(row.name), plan_for(topology, std::string(row.name)));
      if (row.pipelines)
        plans.emplace_back(topology.name() + "/" + std::string(row.name) + "@2",
                           plan_for(topology, std::string(row.name) + "@2"));
    }
  return plans;
}

TEST(DeviceAlgorithms, EveryAlgorithmRealData) {
  Stream stream;
  for (const auto& [name, plan] : plans_for_world(world_size())) {
    SCOPED_TRACE(name);
    DeviceCommunicator comm(plan, MPI_COMM_WORLD);
    uint64_t salt = 1;
    const size_t w = static_cast<size_t>(comm.size());
    for (size_t i = 0; const size_t count : {size_t{0}, size_t{1}, w + 1, size_t{1009}, size_t{65521}}) {
      const bool in_place = i++ % 2 == 0;
      std::string detail;
      EXPECT_EQ(device_allreduce_and_check(comm, count, DataType::Int32, ReduceOp::Sum, in_place, salt++,
                                           stream.handle, &detail),
                0u)
          << "int32 sum, count " << count << (in_place ? " in place: " : " out of place: ") << detail;
    }
    for (DataType type : {DataType::Float32, DataType::BFloat16}) {
      std::string detail;
      EXPECT_EQ(device_allreduce_and_check(comm, 1009, type, ReduceOp::Sum, false, salt++, stream.handle, &detail), 0u)
          << to_string(type) << " sum, count 1009: " << detail;
    }
  }
}


// Reduce-scatter, all-gather, broadcast and reduce on device buffers through NCCL: every
// algorithm of each (planner/collective_planner.hpp) on a random tree, a middle root.
TEST(DeviceCollectives, EveryAlgorithmOfEachCollective) {
  if (world_size() < 2) GTEST_SKIP() << "the planner plans for two learners and more";
  const int world = world_size(), root = world / 2;
  const Topology topology = random_tree(world, 13);
  Stream stream;
  uint64_t salt = 500;
  for (const ir::Collective collective : kOtherCollectives) {
    for (const std::string& algorithm : collective_algorithm_names(collective)) {
      DeviceCommunicator comm(single_schedule_plan(topology, collective, algorithm, root), MPI_COMM_WORLD);
      for (const size_t n : {size_t{1}, size_t{13}, size_t{4099}}) {
        const auto run = [&](void* send, void* recv, size_t count) {
          gpu::DeviceRequest request;
          switch (collective) {
            case ir::Collective::ReduceScatter:
              request = comm.ireduce_scatter(send, recv, count, DataType::Int32, ReduceOp::Sum, stream.handle);
              break;
            case ir::Collective::AllGather:
              request = comm.iallgather(send, recv, count, DataType::Int32, stream.handle);
              break;
            case ir::Collective::Broadcast:
              request = comm.ibroadcast(send, recv, count, DataType::Int32, root, stream.handle);
              break;
            case ir::Collective::Reduce:
              request = comm.ireduce(send, recv, count, DataType::Int32, ReduceOp::Sum, root, stream.handle);
              break;
            case ir::Collective::AllReduce: break;
          }
          request.wait();
        };
        EXPECT_EQ(device_collective_and_check(collective, root, n, salt++, run), 0u)
            << ir::to_string(collective) << " " << algorithm << ", count " << n;
      }
    }
  }
  // A collective the plan lacks, and a bad root, fail before anything is enqueued.
  DeviceCommunicator comm(plan_for(topology, "ring"), MPI_COMM_WORLD);
  DeviceBuffer buffer(64 * 4 * static_cast<size_t>(world));
  EXPECT_THROW(comm.iallgather(buffer.data, buffer.data, 64, DataType::Int32, stream.handle), InputError);
  EXPECT_THROW(comm.ibroadcast(buffer.data, buffer.data, 64, DataType::Int32, world, stream.handle), InputError);
}

// The same through the staged UCX path (host collectives on pinned staging memory).
TEST(StagedUcx, EveryCollective) { staged_every_collective(gpu::StagedArithmetic::Host); }
TEST(StagedUcx, EveryCollectiveFoldedByKernels) { staged_every_collective(gpu::StagedArithmetic::Device); }

TEST(DeviceTypes, EveryTypeAndOp) {
  if (world_size() < 2) GTEST_SKIP() << "covered by the plans with two ranks or more";
  const ir::Plan plan = plan_for(random_tree(world_size(), 5), "flexreduce");
  DeviceCommunicator comm(plan, MPI_COMM_WORLD);
  Stream stream;
  uint64_t salt = 100;
  for (DataType type : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps)
      for (bool in_place : {true, false}) {
        std::string detail;
        EXPECT_EQ(device_allreduce_and_check(comm, 4099, type, op, in_place, salt++, stream.handle, &detail), 0u)
            << to_string(type) << " " << to_string(op) << (in_place ? " in place: " : " out of place: ") << detail;
      }
}

// The call returns while the caller's stream is still blocked behind earlier work: it only
// enqueues. Work enqueued after it on that stream sees the result.
TEST(DeviceStreams, EnqueueReturnsWithoutWaiting) {
  const ir::Plan plan = world_size() < 2 ? hand_ring_plan(1) : plan_for(random_tree(world_size(), 3), "ring");
  DeviceCommunicator comm(plan, MPI_COMM_WORLD);
  Stream stream;
  const size_t count = 10007;
  std::vector<std::byte> host(count * 4), result(count * 4);
  fill_input(host.data(), count, DataType::Int32, ReduceOp::Sum, comm.rank(), 77);
  DeviceBuffer buffer(count * 4);
  cudaMemcpy(buffer.data, host.data(), count * 4, cudaMemcpyHostToDevice);
  static std::atomic<bool> release{false};
  release = false;
  cudaLaunchHostFunc(stream.handle, [](void*) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }, nullptr);
  comm.allreduce(buffer.data, buffer.data, count, DataType::Int32, ReduceOp::Sum, stream.handle);
  gpu::DeviceRequest request = comm.iallreduce(buffer.data, buffer.data, 0, DataType::Int32, ReduceOp::Sum, stream.handle);
  cudaMemcpyAsync(result.data(), buffer.data, count * 4, cudaMemcpyDeviceToHost, stream.handle);
  // Still blocked: nothing can have completed.
  EXPECT_FALSE(request.test());
  EXPECT_EQ(cudaStreamQuery(stream.handle), cudaErrorNotReady);
  release = true;
  request.wait();
  cudaStreamSynchronize(stream.handle);
  std::string detail;
  EXPECT_EQ(verify_everywhere(result.data(), count, DataType::Int32, ReduceOp::Sum, 77, &detail), 0u) << detail;
}

// Several outstanding operations from two streams: they complete in issue order on every rank
// (an operation is never done before an earlier one), and every result is right.
TEST(DeviceStreams, OutstandingCompleteInIssueOrder) {
  const ir::Plan plan = world_size() < 2 ? hand_ring_plan(1) : plan_for(random_tree(world_size(), 9), "flexreduce");
  DeviceCommunicator comm(plan, MPI_COMM_WORLD);
  Stream a, b;
  constexpr int kOps = 8;
  std::vector<size_t> counts;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<gpu::DeviceRequest> requests;
  for (int i = 0; i < kOps; ++i) {
    const size_t count = 1000 + 7919 * static_cast<size_t>(kOps - i);  // later ones smaller
    std::vector<std::byte> host(count * 8);
    fill_input(host.data(), count, DataType::Int64, ReduceOp::Sum, comm.rank(), 500 + static_cast<uint64_t>(i));
    buffers.push_back(std::make_unique<DeviceBuffer>(count * 8));
    cudaMemcpy(buffers.back()->data, host.data(), count * 8, cudaMemcpyHostToDevice);
    counts.push_back(count);
    requests.push_back(comm.iallreduce(nullptr, buffers.back()->data, count, DataType::Int64, ReduceOp::Sum,
                                       i % 2 ? a.handle : b.handle));
    EXPECT_EQ(requests.back().sequence(), static_cast<uint64_t>(i));
  }
  // Poll from the newest: whenever one is done, all earlier ones are.
  int violations = 0;
  for (bool all = false; !all;) {
    all = true;
    for (int i = kOps - 1; i >= 0; --i) {
      if (!requests[static_cast<size_t>(i)].test()) {
        all = false;
        continue;
      }
      for (int j = 0; j < i; ++j) violations += !requests[static_cast<size_t>(j)].test();
    }
  }
  EXPECT_EQ(violations, 0);
  for (int i = 0; i < kOps; ++i) {
    std::vector<std::byte> result(counts[static_cast<size_t>(i)] * 8);
    cudaMemcpy(result.data(), buffers[static_cast<size_t>(i)]->data, result.size(), cudaMemcpyDeviceToHost);
    std::string detail;
    EXPECT_EQ(verify_everywhere(result.data(), counts[static_cast<size_t>(i)], DataType::Int64, ReduceOp::Sum,
                                500 + static_cast<uint64_t>(i), &detail),
              0u)
        << "operation " << i << ": " << detail;
  }
}

TEST(DeviceCommunicators, SplitOnceAndCounted) {
  if (world_size() < 2) GTEST_SKIP() << "no sub-communicators with one rank";
  const ir::Plan plan = plan_for(random_tree(world_size(), 4), "hierarchical");
  DeviceCommunicator comm(plan, MPI_COMM_WORLD);
  EXPECT_GE(comm.plan_communicators(), 1u);
  EXPECT_LE(comm.split_calls(), comm.plan_communicators());
  EXPECT_GE(comm.local_communicators(), 2u);  // the parent and at least one group
  EXPECT_GT(comm.init_seconds(), 0.0);
  if (world_rank() == 0)
    fmt::print("hierarchical on {} ranks: {} communicators from {} split calls, init {:.3f} s on rank 0\n",
               world_size(), comm.plan_communicators(), comm.split_calls(), comm.init_seconds());
}

// --- the UCX host runtime on device buffers, staged through pinned memory ---------------------

// Every rank on one device (which NCCL would refuse): the staged path needs no NCCL. Local
// reductions in (emulated) CUDA kernels on the pinned memory the chunks land in, then on the CPU.
void staged_every_type_and_op(gpu::StagedArithmetic arithmetic) {
  const ir::Plan plan = world_size() < 2 ? hand_ring_plan(1) : plan_for(random_tree(world_size(), 21), "flexreduce");
  gpu::StagedCommunicator comm(plan, MPI_COMM_WORLD, Options::from_env(), arithmetic);
  Stream stream;
  uint64_t salt = 900;
  for (DataType type : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps)
      for (bool in_place : {true, false}) {
        if (!in_place && op != ReduceOp::Sum) continue;
        const size_t count = 3001, bytes = count * size_of(type);
        std::vector<std::byte> host(bytes), result(bytes);
        fill_input(host.data(), count, type, op, comm.host().rank(), salt);
        DeviceBuffer send(bytes), recv(bytes);
        cudaMemcpy(send.data, host.data(), bytes, cudaMemcpyHostToDevice);
        comm.allreduce(send.data, in_place ? send.data : recv.data, count, type, op, stream.handle);
        cudaMemcpyAsync(result.data(), in_place ? send.data : recv.data, bytes, cudaMemcpyDeviceToHost, stream.handle);
        cudaStreamSynchronize(stream.handle);
        comm.synchronize();
        std::string detail;
        EXPECT_EQ(verify_everywhere(result.data(), count, type, op, salt++, &detail), 0u)
            << to_string(type) << " " << to_string(op) << (in_place ? " in place: " : " out of place: ") << detail;
      }
  // Every rank of this plan reduces something when there are two or more; avg divides everywhere.
  expect_folds_as_asked(comm, arithmetic);
  if (comm.device_arithmetic() == nullptr) return;
  const auto counters = comm.device_arithmetic()->counters();
  EXPECT_EQ(counters.device_divides, std::size(kAllDataTypes));
  EXPECT_EQ(counters.host_divides, 0u);
}

TEST(StagedUcx, DeviceBuffersReducedByKernels) { staged_every_type_and_op(gpu::StagedArithmetic::Device); }
TEST(StagedUcx, DeviceBuffersReducedOnTheHost) { staged_every_type_and_op(gpu::StagedArithmetic::Host); }

// The fold server's arithmetic through the host stand-in (the CUDA kernel runs the same checks
// in RealDevice.FoldServerMatchesTheHost): long folds split into requests, aliasing, avg's
// division, unordered min/max; and the same outside an operation, by the plain kernels.
TEST(StagedUcx, FoldServerMatchesTheHost) {
  if (world_rank() != 0) GTEST_SKIP() << "one rank's local arithmetic";
  gpu::DeviceArithmetic arithmetic(size_t{8} << 20);
  within_a_served_operation(arithmetic, [&] {
    check_folds_match_the_host(arithmetic, 3001, true);
    check_unordered_min_max(arithmetic);
  });
  // Outside an operation, the plain kernels: the same results.
  check_folds_match_the_host(arithmetic, 3001, false);
  check_unordered_min_max(arithmetic);
}

// A fold server that does not reply in time fails the fold, naming the operation and the
// request, instead of waiting for ever (here a deadline of 0 ms: the first look at the clock,
// after some 4,000 spins and one yield, comes long before a fold of 16 x 8 MiB is done).
TEST(StagedUcx, FoldServerReplyTimesOut) {
  if (world_rank() != 0) GTEST_SKIP() << "one rank's local arithmetic";
  gpu::DeviceArithmetic arithmetic(size_t{160} << 20, std::chrono::milliseconds(0));
  const size_t n = size_t{2} << 20, bytes = n * 4, count = 16;
  std::vector<std::byte*> parts(count);
  for (auto& part : parts) {
    part = arithmetic.allocate(bytes);
    std::memset(part, 0, bytes);
  }
  std::vector<const std::byte*> in(parts.begin(), parts.end());
  std::string why;
  within_a_served_operation(arithmetic, [&] {
    why = arithmetic.fold(parts[0], parts[0], in.data(), count, n, DataType::Float32, ReduceOp::Sum);
  });
  EXPECT_NE(why.find("no reply within 0 ms"), std::string::npos) << "[" << why << "]";
  EXPECT_NE(why.find("operation 2, request 1"), std::string::npos) << why;  // (1 was the loading run)
  for (auto* part : parts) arithmetic.release(part, bytes);
}

// A server told to stop before it started returns when the stream reaches it, and operation
// numbers go on: the worker lets go of the servers of operations it skips after a failure.
TEST(StagedUcx, FoldServerStoppedBeforeItStarts) {
  if (world_rank() != 0) GTEST_SKIP() << "one rank's local arithmetic";
  gpu::DeviceArithmetic arithmetic(1 << 20);
  Stream stream;
  static std::atomic<bool> release{false};
  release = false;
  cudaLaunchHostFunc(stream.handle, [](void*) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }, nullptr);
  gpu::DeviceArithmetic::Served first = arithmetic.serve(stream.handle);
  gpu::DeviceArithmetic::Served second = arithmetic.serve(stream.handle);
  EXPECT_EQ(second.operation, first.operation + 1);
  arithmetic.end(first);
  arithmetic.end(second);
  EXPECT_EQ(cudaStreamQuery(stream.handle), cudaErrorNotReady);
  release = true;
  EXPECT_EQ(cudaStreamSynchronize(stream.handle), cudaSuccess);
  // Operations after them are served.
  within_a_served_operation(arithmetic, [&] { check_unordered_min_max(arithmetic); });
}

// Stream semantics with the device arithmetic: operations enqueued behind a blocked stream
// return at once, their servers start in order once it moves, and every result is right.
TEST(StagedUcx, DeviceArithmeticOperationsWaitForTheirStream) {
  const ir::Plan plan = world_size() < 2 ? hand_ring_plan(1) : plan_for(random_tree(world_size(), 23), "flexreduce");
  gpu::StagedCommunicator comm(plan, MPI_COMM_WORLD, Options::from_env(), gpu::StagedArithmetic::Device);
  Stream stream;
  constexpr int kOps = 4;
  const size_t count = 5003, bytes = count * 4;
  std::vector<std::vector<std::byte>> results(kOps, std::vector<std::byte>(bytes));
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  for (int i = 0; i < kOps; ++i) {
    std::vector<std::byte> host(bytes);
    fill_input(host.data(), count, DataType::Float32, ReduceOp::Sum, comm.host().rank(), 500 + i);
    buffers.push_back(std::make_unique<DeviceBuffer>(bytes));
    cudaMemcpy(buffers.back()->data, host.data(), bytes, cudaMemcpyHostToDevice);
  }
  cudaDeviceSynchronize();  // (the uploads land before the stream is blocked)
  static std::atomic<bool> release{false};
  release = false;
  cudaLaunchHostFunc(stream.handle, [](void*) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }, nullptr);
  for (int i = 0; i < kOps; ++i) {
    comm.allreduce(buffers[i]->data, buffers[i]->data, count, DataType::Float32, ReduceOp::Sum, stream.handle);
    cudaMemcpyAsync(results[i].data(), buffers[i]->data, bytes, cudaMemcpyDeviceToHost, stream.handle);
  }
  EXPECT_EQ(cudaStreamQuery(stream.handle), cudaErrorNotReady);
  release = true;
  ASSERT_EQ(cudaStreamSynchronize(stream.handle), cudaSuccess);
  comm.synchronize();
  for (int i = 0; i < kOps; ++i) {
    std::string detail;
    EXPECT_EQ(verify_everywhere(results[i].data(), count, DataType::Float32, ReduceOp::Sum, 500 + i, &detail), 0u)
        << "operation " << i << ": " << detail;
  }
}

TEST(StagedUcx, DeviceArithmeticUnderDeviceWideSynchronization) { check_staged_under_device_wide_synchronization(12); }

// One rank cannot get pinned memory for its CUDA arithmetic: every rank fails at creation,
// naming that rank, instead of the others waiting in the host communicator's creation.
TEST(StagedUcx, CreationFailsOnEveryRankWhenOneCannotSetUp) {
  if (world_size() < 2) GTEST_SKIP() << "needs a rank that fails and one that does not";
  const int failing = world_size() - 1;
  if (world_rank() == failing) setenv("FLEXPLAN_EMULATED_PINNED_LIMIT", "1024", 1);
  std::string reason;
  try {
    gpu::StagedCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD, Options::from_env(),
                                 gpu::StagedArithmetic::Device);
  } catch (const RuntimeError& e) {
    reason = e.what();
  }
  unsetenv("FLEXPLAN_EMULATED_PINNED_LIMIT");
  ASSERT_FALSE(reason.empty()) << "created although rank " << failing << " could not set up";
  EXPECT_NE(reason.find(fmt::format("rank {}", failing)), std::string::npos) << reason;
  if (world_rank() == failing) {
    EXPECT_NE(reason.find("cudaMallocHost"), std::string::npos) << reason;
  }
  // The job goes on: a staged communicator with the host arithmetic works afterwards.
  gpu::StagedCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD, Options::from_env(),
                               gpu::StagedArithmetic::Host);
  EXPECT_EQ(comm.device_arithmetic(), nullptr);
}

// FLEXPLAN_STAGED_ARITHMETIC: host by default, device on request, anything else refused by name.
TEST(StagedUcx, ArithmeticFromTheEnvironment) {
  unsetenv("FLEXPLAN_STAGED_ARITHMETIC");
  EXPECT_EQ(gpu::staged_arithmetic_from_env(), gpu::StagedArithmetic::Host);
  setenv("FLEXPLAN_STAGED_ARITHMETIC", "device", 1);
  EXPECT_EQ(gpu::staged_arithmetic_from_env(), gpu::StagedArithmetic::Device);
  setenv("FLEXPLAN_STAGED_ARITHMETIC", "gpu", 1);
  try {
    gpu::staged_arithmetic_from_env();
    ADD_FAILURE() << "accepted 'gpu'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("FLEXPLAN_STAGED_ARITHMETIC='gpu'"), std::string::npos) << e.what();
  }
  unsetenv("FLEXPLAN_STAGED_ARITHMETIC");
}

// The staged path's arithmetic on one rank: its fold keeps the host's order and aliasing (the
// emulated kernels are the host's arithmetic, so this checks the routing; the CUDA kernels'
// arithmetic is RealDevice.KernelsMatchTheHostArithmetic's); scratch beyond the arenas comes
// from the heap and is folded on the host, counted; grow() then adds an arena that serves it.
TEST(StagedUcx, DeviceArithmeticFallsBackAndGrows) {
  if (world_rank() != 0) GTEST_SKIP() << "one rank's local arithmetic";
  gpu::DeviceArithmetic arithmetic(16384);
  const size_t n = 1000;
  for (DataType type : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps) {
      const size_t bytes = n * size_of(type);
      std::byte* a = arithmetic.allocate(bytes);
      std::byte* b = arithmetic.allocate(bytes);
      std::vector<std::byte> want(bytes);
      fill_input(a, n, type, op, 0, 7);
      fill_input(b, n, type, op, 1, 7);
      const std::byte* parts[] = {a, b, a};
      host_arithmetic().fold(want.data(), want.data(), parts, 3, n, type, op);
      std::byte* out = arithmetic.allocate(bytes);
      ASSERT_EQ(arithmetic.fold(out, out, parts, 3, n, type, op), "");
      EXPECT_EQ(std::memcmp(out, want.data(), bytes), 0) << to_string(type) << " " << to_string(op);
      arithmetic.release(out, bytes);
      arithmetic.release(b, bytes);
      arithmetic.release(a, bytes);
    }
  auto counters = arithmetic.counters();
  // float32's pieces fit the 16 KiB arena; float64's ran short and were folded on the host.
  EXPECT_GT(counters.device_folds, 0u);
  EXPECT_GT(counters.host_folds, 0u);
  EXPECT_TRUE(arithmetic.short_of_memory());
  arithmetic.grow();
  EXPECT_FALSE(arithmetic.short_of_memory());
  EXPECT_GE(arithmetic.counters().arena_bytes, 16384u + (size_t{16} << 20));
  const size_t before = arithmetic.counters().host_folds;
  const size_t bytes = n * 8;
  std::byte* a = arithmetic.allocate(bytes);
  std::byte* b = arithmetic.allocate(bytes);
  fill_input(a, n, DataType::Float64, ReduceOp::Sum, 0, 8);
  fill_input(b, n, DataType::Float64, ReduceOp::Sum, 1, 8);
  const std::byte* parts[] = {a, b};
  ASSERT_EQ(arithmetic.fold(a, a, parts, 2, n, DataType::Float64, ReduceOp::Sum), "");
  EXPECT_EQ(arithmetic.counters().host_folds, before) << "the grown arena did not serve the scratch";
  EXPECT_FALSE(arithmetic.short_of_memory());
  arithmetic.release(b, bytes);
  arithmetic.release(a, bytes);
  // Through a scratch pool: heap scratch is freed on release, not kept, so that after grow()
  // the same size comes from an arena and folds on the device again.
  {
    gpu::DeviceArithmetic small(4096);
    ScratchPool pool(small);
    ScratchPool::Buffer big = pool.acquire(64 << 10);  // beyond the 4 KiB arena: heap
    EXPECT_TRUE(small.short_of_memory());
    pool.release(std::move(big));
    small.grow();
    ScratchPool::Buffer again = pool.acquire(64 << 10);
    std::byte* p = again.get();
    const std::byte* pair[] = {p, p};
    fill_input(p, 100, DataType::Float64, ReduceOp::Sum, 0, 9);
    ASSERT_EQ(small.fold(p, p, pair, 2, 100, DataType::Float64, ReduceOp::Sum), "");
    EXPECT_EQ(small.counters().device_folds, 1u) << "the pool kept the heap buffer";
    EXPECT_EQ(small.counters().host_folds, 0u);
  }
  // Staging memory the kernels may touch: a divide there runs as a kernel; elsewhere on the host.
  std::vector<double> heap(n, 6.0);
  ASSERT_EQ(arithmetic.divide(reinterpret_cast<std::byte*>(heap.data()), n, DataType::Float64, 3), "");
  EXPECT_EQ(heap[n - 1], 2.0);
  EXPECT_EQ(arithmetic.counters().host_divides, 1u);
  arithmetic.set_staging(heap.data(), n * 8);  // (emulated "pinned": any host memory works)
  ASSERT_EQ(arithmetic.divide(reinterpret_cast<std::byte*>(heap.data()), n, DataType::Float64, 2), "");
  EXPECT_EQ(heap[0], 1.0);
  EXPECT_EQ(arithmetic.counters().device_divides, 1u);
}

// --- plan checks at load: every rank fails, with the same reason ------------------------------

// Runs `create` on every rank; returns the reason, asserting every rank got the same one.
std::string failure_everywhere(const std::function<void()>& create) {
  std::string reason;
  try {
    create();
  } catch (const InputError& e) {
    reason = e.what();
  } catch (const std::exception& e) {
    reason = std::string("wrong exception type: ") + e.what();
  }
  std::vector<char> mine(512, 0);
  std::memcpy(mine.data(), reason.data(), std::min<size_t>(reason.size(), 511));
  std::vector<char> all(mine.size() * static_cast<size_t>(world_size()));
  MPI_Allgather(mine.data(), 512, MPI_CHAR, all.data(), 512, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 1; r < world_size(); ++r)
    EXPECT_EQ(std::string(all.data() + 512 * r), std::string(all.data())) << "rank " << r << " differs";
  return reason;
}

TEST(DeviceLoadChecks, WorldSizeMismatch) {
  const ir::Plan plan = hand_ring_plan(world_size() + 1);
  const std::string reason = failure_everywhere([&] { DeviceCommunicator comm(plan, MPI_COMM_WORLD); });
  EXPECT_NE(reason.find(fmt::format("the plan is for {} ranks, the job has {} processes", world_size() + 1,
                                    world_size())),
            std::string::npos)
      << reason;
}

TEST(DeviceLoadChecks, NcclVersionMismatch) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  if (world_rank() == 1) setenv("FLEXPLAN_EMULATED_NCCL_VERSION", "22703", 1);
  const ir::Plan plan = hand_ring_plan(world_size());
  const std::string reason = failure_everywhere([&] { DeviceCommunicator comm(plan, MPI_COMM_WORLD); });
  unsetenv("FLEXPLAN_EMULATED_NCCL_VERSION");
  EXPECT_NE(reason.find("the NCCL version differs between ranks"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rank 1 NCCL 2.27.3"), std::string::npos) << reason;
}

TEST(DeviceLoadChecks, TopologyMismatch) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  // Same world size, another cluster on rank 0.
  const ir::Plan plan = plan_for(random_tree(world_size(), world_rank() == 0 ? 1 : 2), "ring");
  const std::string reason = failure_everywhere([&] { DeviceCommunicator comm(plan, MPI_COMM_WORLD); });
  EXPECT_NE(reason.find("the topology differs between ranks"), std::string::npos) << reason;
}

TEST(DeviceLoadChecks, TopologyIsNotThisCluster) {
  const ir::Plan plan = world_size() < 2 ? hand_ring_plan(1) : plan_for(random_tree(world_size(), 1), "ring");
  DeviceOptions options = DeviceOptions::from_env();
  options.topology_hash = "0123456789abcdef";
  const std::string reason = failure_everywhere([&] { DeviceCommunicator comm(plan, MPI_COMM_WORLD, options); });
  EXPECT_NE(reason.find("this cluster's topology hash is 0123456789abcdef"), std::string::npos) << reason;
}

TEST(DeviceLoadChecks, TwoRanksOnOneDevice) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  DeviceOptions options = DeviceOptions::from_env();
  options.device = 0;
  const ir::Plan plan = hand_ring_plan(world_size());
  const std::string reason = failure_everywhere([&] { DeviceCommunicator comm(plan, MPI_COMM_WORLD, options); });
  EXPECT_NE(reason.find("ranks 0 and 1 both use device 0"), std::string::npos) << reason;
}

TEST(DeviceLoadChecks, MissingPlanFileOnOneRank) {
  const std::string path = world_rank() == world_size() - 1 ? "/nonexistent/plan.bin" : "";
  const ir::Plan plan = hand_ring_plan(world_size());
  const std::string written = fmt::format("/tmp/flexplan-gpu-test-{}-{}.bin", getpid(), world_rank());
  ir::write_plan_file(written, plan);
  const std::string reason = failure_everywhere([&] {
    DeviceCommunicator comm(path.empty() ? written : path, MPI_COMM_WORLD);
  });
  std::remove(written.c_str());
  EXPECT_NE(reason.find(fmt::format("rank {}: plan /nonexistent/plan.bin", world_size() - 1)), std::string::npos)
      << reason;
}

// A malformed device or staged setting on one rank fails creation on every rank, naming the
// rank, the variable and the value (it once threw on that rank alone, and the others waited).
TEST(DeviceSettings, MalformedOnOneRankFailsEveryRank) {
  if (world_size() < 2) GTEST_SKIP() << "needs a rank with the bad value and one without";
  const int bad = world_size() - 1;
  if (world_rank() == bad) setenv("FLEXPLAN_CHECK_ORDER_UP_TO", "lots", 1);
  const std::string device_reason = failure_everywhere([&] {
    DeviceCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD);
  });
  unsetenv("FLEXPLAN_CHECK_ORDER_UP_TO");
  EXPECT_NE(device_reason.find(fmt::format("rank {}: configuring the communicator failed: "
                                           "FLEXPLAN_CHECK_ORDER_UP_TO='lots'", bad)),
            std::string::npos)
      << device_reason;

  if (world_rank() == bad) setenv("FLEXPLAN_STAGED_ARITHMETIC", "gpu", 1);
  std::string staged_reason;
  try {
    gpu::StagedCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD);
  } catch (const InputError& e) {
    staged_reason = e.what();
  }
  unsetenv("FLEXPLAN_STAGED_ARITHMETIC");
  EXPECT_NE(staged_reason.find(fmt::format("rank {}: FLEXPLAN_STAGED_ARITHMETIC='gpu'", bad)), std::string::npos)
      << "rank " << world_rank() << ": " << staged_reason;
}

// --- the emulation's ordering rules, with raw NCCL calls -------------------------------------

struct RawComms {
  ncclComm_t parent = nullptr, a = nullptr, b = nullptr;
  RawComms() {
    ncclUniqueId id{};
    if (world_rank() == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    gpu::check_nccl(ncclCommInitRank(&parent, world_size(), id, world_rank()), "ncclCommInitRank");
    gpu::check_nccl(ncclCommSplit(parent, 0, world_rank(), &a, nullptr), "split a");
    gpu::check_nccl(ncclCommSplit(parent, 0, world_rank(), &b, nullptr), "split b");
  }
  ~RawComms() {
    ncclCommDestroy(a);
    ncclCommDestroy(b);
    ncclCommDestroy(parent);
  }
};

// The calls of one group progress together: opposite orders inside a group complete.
TEST(EmulatedNccl, GroupProgressesTogether) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  RawComms comms;
  Stream stream;
  std::vector<int32_t> x(16, world_rank() + 1), y(16, 10 * (world_rank() + 1));
  DeviceBuffer dx(64), dy(64);
  cudaMemcpy(dx.data, x.data(), 64, cudaMemcpyHostToDevice);
  cudaMemcpy(dy.data, y.data(), 64, cudaMemcpyHostToDevice);
  ncclGroupStart();
  if (world_rank() % 2 == 0) {
    ncclReduce(dx.data, dx.data, 16, ncclInt32, ncclSum, 0, comms.a, stream.handle);
    ncclBroadcast(dy.data, dy.data, 16, ncclInt32, 1, comms.b, stream.handle);
  } else {
    ncclBroadcast(dy.data, dy.data, 16, ncclInt32, 1, comms.b, stream.handle);
    ncclReduce(dx.data, dx.data, 16, ncclInt32, ncclSum, 0, comms.a, stream.handle);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.handle), cudaSuccess);
  cudaMemcpy(x.data(), dx.data, 64, cudaMemcpyDeviceToHost);
  cudaMemcpy(y.data(), dy.data, 64, cudaMemcpyDeviceToHost);
  const int w = world_size();
  if (world_rank() == 0) {
    EXPECT_EQ(x[5], w * (w + 1) / 2);
  }
  EXPECT_EQ(y[7], 20);
}

// A communicator's calls complete in stream order and match across ranks in issue order.
TEST(EmulatedNccl, StreamOrderOnOneCommunicator) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  RawComms comms;
  Stream stream;
  std::vector<int32_t> x(8, world_rank() + 1);
  DeviceBuffer dx(32);
  cudaMemcpy(dx.data, x.data(), 32, cudaMemcpyHostToDevice);
  // Reduce to rank 0, then broadcast from rank 0: every rank ends with the sum.
  ncclReduce(dx.data, dx.data, 8, ncclInt32, ncclSum, 0, comms.a, stream.handle);
  ncclBroadcast(dx.data, dx.data, 8, ncclInt32, 0, comms.a, stream.handle);
  ASSERT_EQ(cudaStreamSynchronize(stream.handle), cudaSuccess);
  cudaMemcpy(x.data(), dx.data, 32, cudaMemcpyDeviceToHost);
  const int w = world_size();
  EXPECT_EQ(x[3], w * (w + 1) / 2);
}

// Opposite issue orders across two communicators in separate groups: a deadlock on GPUs, a
// named failure here. Run last in its own job (FLEXPLAN_EMULATION_TIMEOUT_MS short): the
// communicators are unusable afterwards.
TEST(EmulatedNcclDeadlock, OppositeOrderIsDetectedAndNamed) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  RawComms comms;
  Stream stream;
  DeviceBuffer dx(64), dy(64);
  cudaMemsetAsync(dx.data, 0, 64, stream.handle);
  cudaMemsetAsync(dy.data, 0, 64, stream.handle);
  if (world_rank() == 0) {
    ncclReduce(dx.data, dx.data, 16, ncclInt32, ncclSum, 0, comms.a, stream.handle);
    ncclReduce(dy.data, dy.data, 16, ncclInt32, ncclSum, 0, comms.b, stream.handle);
  } else {
    ncclReduce(dy.data, dy.data, 16, ncclInt32, ncclSum, 0, comms.b, stream.handle);
    ncclReduce(dx.data, dx.data, 16, ncclInt32, ncclSum, 0, comms.a, stream.handle);
  }
  const cudaError_t result = cudaStreamSynchronize(stream.handle);
  const std::string error = ncclGetLastError(comms.a);
  EXPECT_EQ(result, cudaErrorLaunchTimeout);
  EXPECT_NE(error.find("deadlock"), std::string::npos) << error;
  EXPECT_NE(error.find("ncclReduce #0"), std::string::npos) << error;
  EXPECT_NE(error.find("waits for world rank"), std::string::npos) << error;
  // The communicator this rank was stuck on (a on rank 0, b elsewhere) reports the failure.
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(world_rank() == 0 ? comms.a : comms.b, &async);
  EXPECT_NE(async, ncclSuccess);
}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "this MPI does not provide MPI_THREAD_MULTIPLE, which the emulation needs\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return flexplan::mpitest::run_all_tests(argc, argv, [] {});
}
