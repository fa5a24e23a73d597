// The GPU backend on a real device, through libnccl and libcudart: world size 1 (NCCL refuses
// two ranks on one GPU), every dtype and op, stream semantics; and the reduction kernels'
// bandwidth against a device-to-device copy. Without a device every test skips, saying why,
// and the program exits 77 so that CTest reports the test as skipped (docs/gpu.md).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include <fmt/format.h>

#include "runtime/gpu/device_communicator.hpp"
#include "runtime/gpu/device_kernels.hpp"
#include "runtime/gpu/staged_communicator.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

std::string no_device_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return fmt::format("no CUDA device: {}", cudaGetErrorString(e));
  if (count == 0) return "no CUDA device";
  return "";
}

#define REQUIRE_DEVICE()                                         \
  if (const std::string why = no_device_reason(); !why.empty()) \
  GTEST_SKIP() << why

TEST(RealDevice, WorldSizeOneEveryTypeThroughNccl) {
  REQUIRE_DEVICE();
  int devices = 0;
  cudaGetDeviceCount(&devices);
  if (world_size() > devices) GTEST_SKIP() << "NCCL refuses two ranks on one GPU: " << world_size() << " ranks, " << devices << " device(s)";
  gpu::DeviceCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  uint64_t salt = 1;
  for (DataType type : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps) {
      const size_t count = 1 << 20;
      const size_t bytes = count * size_of(type);
      std::vector<std::byte> host(bytes), result(bytes);
      fill_input(host.data(), count, type, op, comm.rank(), salt);
      void *send, *recv;
      cudaMalloc(&send, bytes);
      cudaMalloc(&recv, bytes);
      cudaMemcpy(send, host.data(), bytes, cudaMemcpyHostToDevice);
      comm.allreduce(send, recv, count, type, op, stream);
      cudaMemcpyAsync(result.data(), recv, bytes, cudaMemcpyDeviceToHost, stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::string detail;
      EXPECT_EQ(verify_everywhere(result.data(), count, type, op, salt++, &detail), 0u)
          << to_string(type) << " " << to_string(op) << ": " << detail;
      cudaFree(send);
      cudaFree(recv);
    }
  cudaStreamDestroy(stream);
}

// Several processes on one GPU through the UCX path, staged through pinned memory.
TEST(RealDevice, StagedUcxSharesOneGpu) {
  REQUIRE_DEVICE();
  cudaSetDevice(0);
  gpu::StagedCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  uint64_t salt = 300;
  for (DataType type : kAllDataTypes) {
    const size_t count = 100003, bytes = count * size_of(type);
    std::vector<std::byte> host(bytes), result(bytes);
    fill_input(host.data(), count, type, ReduceOp::Sum, comm.host().rank(), salt);
    void* buffer;
    cudaMalloc(&buffer, bytes);
    cudaMemcpy(buffer, host.data(), bytes, cudaMemcpyHostToDevice);
    comm.allreduce(buffer, buffer, count, type, ReduceOp::Sum, stream);
    cudaMemcpyAsync(result.data(), buffer, bytes, cudaMemcpyDeviceToHost, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    comm.synchronize();
    std::string detail;
    EXPECT_EQ(verify_everywhere(result.data(), count, type, ReduceOp::Sum, salt++, &detail), 0u)
        << to_string(type) << ": " << detail;
    cudaFree(buffer);
  }
  cudaStreamDestroy(stream);
}

// The combine kernel reads two buffers and writes one: its bandwidth (3 n bytes per call)
// against cudaMemcpyAsync device to device (2 n bytes). Goal: at least 85%.
TEST(RealDevice, ReductionKernelBandwidth) {
  REQUIRE_DEVICE();
  if (world_size() > 1) GTEST_SKIP() << "measured by the one-rank run";
  const size_t count = 64u << 20;  // 256 MiB of float32 per buffer
  void *a, *b, *c;
  cudaMalloc(&a, count * 4);
  cudaMalloc(&b, count * 4);
  cudaMalloc(&c, count * 4);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const auto time = [&](auto body) {
    body();
    cudaEventRecord(start, stream);
    for (int i = 0; i < 20; ++i) body();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms / 20 / 1e3;
  };
  const double copy = time([&] { cudaMemcpyAsync(c, a, count * 4, cudaMemcpyDeviceToDevice, stream); });
  const double combine = time([&] { gpu::combine(c, a, b, count, DataType::Float32, ReduceOp::Sum, stream); });
  const double copy_bw = 2.0 * count * 4 / copy, combine_bw = 3.0 * count * 4 / combine;
  fmt::print("device-to-device copy {:.1f} GB/s, combine kernel {:.1f} GB/s ({:.0f}%)\n", copy_bw / 1e9,
             combine_bw / 1e9, 100 * combine_bw / copy_bw);
  EXPECT_GE(combine_bw, 0.85 * copy_bw);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string why = flexplan::mpitest::no_device_reason();
  const int result = flexplan::mpitest::run_all_tests(argc, argv, [] {});
  if (!why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  return result;
}
