// Checks of reduce-scatter, all-gather, broadcast and reduce on device buffers shared by the
// emulated tests (CI) and the real-device tests: the same bodies run against the NCCL/CUDA
// emulation and against libcudart on a GPU.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "planner/plan_builder.hpp"
#include "runtime/gpu/staged_communicator.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {

struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(size_t bytes) { gpu::check_cuda(cudaMalloc(&data, std::max<size_t>(bytes, 1)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct Stream {
  cudaStream_t handle = nullptr;
  Stream() { cudaStreamCreate(&handle); }
  ~Stream() { cudaStreamDestroy(handle); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

constexpr std::array<ir::Collective, 4> kOtherCollectives{ir::Collective::ReduceScatter, ir::Collective::AllGather,
                                                          ir::Collective::Broadcast, ir::Collective::Reduce};

// One reduce-scatter, all-gather, broadcast or reduce of n int32 per rank on device buffers,
// issued by `run(send, recv, n)` (which also waits), checked exactly against every rank's input.
// Returns the mismatching ranks, summed over all ranks.
template <typename Run>
inline uint64_t device_collective_and_check(ir::Collective collective, int root, size_t n, uint64_t salt, Run run) {
  const int world = world_size(), rank = world_rank();
  const size_t total = n * static_cast<size_t>(world);
  const size_t in_elements = collective == ir::Collective::ReduceScatter ? total : n;
  const size_t out_elements = collective == ir::Collective::AllGather ? total : n;
  std::vector<int32_t> input(in_elements), output(out_elements, -3);
  fill_input(input.data(), in_elements, DataType::Int32, ReduceOp::Sum, rank, salt);
  DeviceBuffer send(in_elements * 4), recv(out_elements * 4);
  gpu::check_cuda(cudaMemcpy(send.data, input.data(), in_elements * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  gpu::check_cuda(cudaMemcpy(recv.data, output.data(), out_elements * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  run(send.data, recv.data, n);
  gpu::check_cuda(cudaMemcpy(output.data(), recv.data, out_elements * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  const auto input_of = [&](int r, size_t count) {
    std::vector<int32_t> v(count);
    fill_input(v.data(), count, DataType::Int32, ReduceOp::Sum, r, salt);
    return v;
  };
  std::vector<int32_t> expected(out_elements, -3);  // a reduce's receive buffer off the root: untouched
  if (collective == ir::Collective::AllGather) {
    for (int r = 0; r < world; ++r) {
      const auto v = input_of(r, n);
      std::copy(v.begin(), v.end(), expected.begin() + static_cast<ptrdiff_t>(n) * r);
    }
  } else if (collective == ir::Collective::Broadcast) {
    expected = input_of(root, n);
  } else if (collective == ir::Collective::ReduceScatter || rank == root) {
    std::fill(expected.begin(), expected.end(), 0);
    const size_t first = collective == ir::Collective::ReduceScatter ? n * static_cast<size_t>(rank) : 0;
    for (int r = 0; r < world; ++r) {
      const auto v = input_of(r, in_elements);
      for (size_t i = 0; i < out_elements; ++i) expected[i] += v[first + i];
    }
  }
  return sum_over_ranks(output != expected ? 1 : 0);
}

// With `Host` arithmetic the staged path has no CUDA arithmetic; with `Device`, every local
// reduction ran in its operation's fold server (none by the plain kernels, none on the host),
// and some did where two ranks or more reduce.
inline void expect_folds_as_asked(const gpu::StagedCommunicator& comm, gpu::StagedArithmetic arithmetic) {
  const gpu::DeviceArithmetic* device = comm.device_arithmetic();
  if (arithmetic == gpu::StagedArithmetic::Host) {
    EXPECT_EQ(device, nullptr);
    return;
  }
  ASSERT_NE(device, nullptr);
  const auto counters = device->counters();
  EXPECT_EQ(counters.served_folds, counters.device_folds);
  if (world_size() >= 2) {
    EXPECT_GT(counters.served_folds, 0u);
  }
  EXPECT_EQ(counters.host_folds, 0u) << "scratch fell outside pinned memory";
}

// Every collective but all-reduce through the staged UCX path (host collectives on pinned
// staging memory), on a random tree with the last rank as root; with `Device` arithmetic every
// local reduction must run in the operations' fold servers, none on the host.
inline void staged_every_collective(gpu::StagedArithmetic arithmetic) {
  if (world_size() < 2) GTEST_SKIP() << "the planner plans for two learners and more";
  const int world = world_size(), root = world - 1;
  const Topology topology = random_tree(world, 17);
  PlanOptions options;
  options.collectives = {ir::Collective::AllReduce, ir::Collective::ReduceScatter, ir::Collective::AllGather,
                         ir::Collective::Broadcast, ir::Collective::Reduce};
  options.roots = {root};
  gpu::StagedCommunicator comm(build_plan(topology, options), MPI_COMM_WORLD, Options::from_env(), arithmetic);
  Stream stream;
  uint64_t salt = 800;
  for (const ir::Collective collective : kOtherCollectives) {
    for (const size_t n : {size_t{1}, size_t{4099}, size_t{70001}}) {
      const auto run = [&](void* send, void* recv, size_t count) {
        switch (collective) {
          case ir::Collective::ReduceScatter:
            comm.reduce_scatter(send, recv, count, DataType::Int32, ReduceOp::Sum, stream.handle);
            break;
          case ir::Collective::AllGather: comm.allgather(send, recv, count, DataType::Int32, stream.handle); break;
          case ir::Collective::Broadcast: comm.broadcast(send, recv, count, DataType::Int32, root, stream.handle); break;
          case ir::Collective::Reduce:
            comm.reduce(send, recv, count, DataType::Int32, ReduceOp::Sum, root, stream.handle);
            break;
          case ir::Collective::AllReduce: break;
        }
        gpu::check_cuda(cudaStreamSynchronize(stream.handle), "cudaStreamSynchronize");
        comm.synchronize();
      };
      EXPECT_EQ(device_collective_and_check(collective, root, n, salt++, run), 0u)
          << "staged " << ir::to_string(collective) << ", count " << n;
    }
  }
  DeviceBuffer buffer(64 * 4 * static_cast<size_t>(world));
  EXPECT_THROW(comm.broadcast(buffer.data, buffer.data, 64, DataType::Int32, world, stream.handle), InputError);
  // Reduce-scatter's and reduce's folds, every one by its operation's server.
  expect_folds_as_asked(comm, arithmetic);
}

}  // namespace flexplan::mpitest
