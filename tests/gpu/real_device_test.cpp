// The GPU backend on a real device, through libnccl and libcudart: world size 1 (NCCL refuses
// two ranks on one GPU), every dtype and op, stream semantics; the staged UCX path with processes
// sharing the GPU, every collective; and the reduction kernels'
// bandwidth against a device-to-device copy. Without a device every test skips, saying why,
// and the program exits 77 so that CTest reports the test as skipped (docs/gpu.md).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/gpu/device_communicator.hpp"
#include "runtime/gpu/device_kernels.hpp"
#include "runtime/gpu/staged_communicator.hpp"
#include "runtime/half.hpp"
#include "runtime/reduce_kernels.hpp"
#include "tests/gpu/device_collective_checks.hpp"
#include "tests/gpu/fold_server_checks.hpp"
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
  // (Device, not the default: processes sharing the GPU get the host arithmetic by default.)
  gpu::StagedCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD, Options::from_env(),
                               gpu::StagedArithmetic::Device);
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
  // The local reductions ran in the operations' fold servers on the pinned chunks, none on the
  // host.
  ASSERT_NE(comm.device_arithmetic(), nullptr);
  const auto counters = comm.device_arithmetic()->counters();
  EXPECT_EQ(counters.served_folds, counters.device_folds);
  if (world_size() >= 2) {
    EXPECT_GT(counters.served_folds, 0u);
  }
  EXPECT_EQ(counters.host_folds, 0u);
}

// Reduce-scatter, all-gather, broadcast and reduce through the staged UCX path, processes
// sharing the GPU: the folds in the CUDA fold server, then on the host.
TEST(RealDevice, StagedEveryCollectiveSharesOneGpu) {
  REQUIRE_DEVICE();
  cudaSetDevice(0);
  staged_every_collective(gpu::StagedArithmetic::Device);
  staged_every_collective(gpu::StagedArithmetic::Host);
}

// Min and max where the operands do not order: -0 against +0, and NaN. The kernels pick as
// std::min/std::max do (the first operand on ties), so the staged path's result does not depend
// on which chunks the GPU folded and which the CPU did. Its first run on a GPU (H100) found
// 16-bit NaN encoded differently by CUDA's conversions (docs/gpu.md).
TEST(RealDevice, MinMaxOfUnorderedOperandsMatchTheHost) {
  REQUIRE_DEVICE();
  if (world_size() > 1) GTEST_SKIP() << "checked by the one-rank run";
  for (DataType type : kFloatingTypes)
    for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      const auto [ha, hb, n] = unordered_operands(type);
      const size_t bytes = ha.size();
      std::vector<std::byte> want(bytes), got(bytes);
      kernels::combine(want.data(), ha.data(), hb.data(), n, type, op);
      void *da, *db;
      ASSERT_EQ(cudaMalloc(&da, bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&db, bytes), cudaSuccess);
      cudaMemcpy(da, ha.data(), bytes, cudaMemcpyHostToDevice);
      cudaMemcpy(db, hb.data(), bytes, cudaMemcpyHostToDevice);
      gpu::combine(da, da, db, n, type, op, nullptr);
      ASSERT_EQ(cudaMemcpy(got.data(), da, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << to_string(type) << " " << to_string(op);
      cudaFree(da);
      cudaFree(db);
    }
}

// The fold server's CUDA kernel (the staged path's device arithmetic) against the host
// arithmetic, bit for bit: every dtype x op, folds of 2 to 40 parts, out aliasing a part, avg's
// division, unordered min/max (and the same by the plain kernels, outside an operation); then its
// bandwidth on pinned memory beside the CPU's fold.
TEST(RealDevice, FoldServerMatchesTheHost) {
  REQUIRE_DEVICE();
  if (world_size() > 1) GTEST_SKIP() << "checked by the one-rank run";
  cudaSetDevice(0);
  gpu::DeviceArithmetic arithmetic(size_t{256} << 20);
  within_a_served_operation(arithmetic, [&] {
    check_folds_match_the_host(arithmetic, 100003, true);
    check_unordered_min_max(arithmetic);
  });
  // Outside an operation, the plain kernels: the same results.
  check_folds_match_the_host(arithmetic, 100003, false);
  check_unordered_min_max(arithmetic);
  const size_t n = size_t{16} << 20, bytes = n * 4;
  std::byte* a = arithmetic.allocate(bytes);
  std::byte* b = arithmetic.allocate(bytes);
  fill_input(a, n, DataType::Float32, ReduceOp::Sum, 0, 1);
  fill_input(b, n, DataType::Float32, ReduceOp::Sum, 1, 1);
  const std::byte* parts[] = {a, b};
  const auto seconds = [&](LocalArithmetic& where) {
    where.fold(a, a, parts, 2, n, DataType::Float32, ReduceOp::Sum);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) EXPECT_EQ(where.fold(a, a, parts, 2, n, DataType::Float32, ReduceOp::Sum), "");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 5;
  };
  double server = 0;
  within_a_served_operation(arithmetic, [&] { server = seconds(arithmetic); });
  const double host = seconds(host_arithmetic());
  fmt::print("fold of 2 x 64 MiB float32 in pinned memory: fold server {:.1f} GB/s, CPU {:.1f} GB/s "
             "(bytes read + written)\n", 3.0 * bytes / server / 1e9, 3.0 * bytes / host / 1e9);
  arithmetic.release(b, bytes);
  arithmetic.release(a, bytes);
}

// Every process with the staged device arithmetic while another of its threads synchronizes the
// device in a loop (FLEXPLAN_TEST_DISTURB chooses other disturbances; docs/gpu.md).
TEST(RealDevice, StagedDeviceArithmeticUnderDeviceWideSynchronization) {
  REQUIRE_DEVICE();
  cudaSetDevice(0);
  check_staged_under_device_wide_synchronization(30);
}

// The device kernels against the host runtime's arithmetic (runtime/reduce_kernels.hpp), bit
// for bit on the tests' inputs (finite, no NaN or signed zeros, where min and max may differ):
// every dtype and op, a length that is no multiple of a block, ranges starting one element
// past an allocation's start, in-place combining, x op identity == x, and avg's division by 3,
// 256 and 300 (256 was a division by zero for uint8 when the divisor was cast to the type).
TEST(RealDevice, KernelsMatchTheHostArithmetic) {
  REQUIRE_DEVICE();
  if (world_size() > 1) GTEST_SKIP() << "checked by the one-rank run";
  const size_t count = (size_t{1} << 20) + 3;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const auto first_difference = [](const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                                   size_t size) -> std::string {
    for (size_t i = 0; i < got.size(); i += size)
      if (std::memcmp(&got[i], &want[i], size) != 0) return fmt::format("element {} of the buffer differs", i / size);
    return "";
  };
  for (DataType type : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps) {
      const size_t size = size_of(type), bytes = (count + 1) * size;
      std::vector<std::byte> a(bytes), b(bytes), want(bytes), got(bytes);
      fill_input(a.data(), count + 1, type, op, 0, 11);
      fill_input(b.data(), count + 1, type, op, 1, 11);
      std::byte *da, *db, *dc;
      ASSERT_EQ(cudaMalloc(&da, bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&db, bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dc, bytes), cudaSuccess);
      const auto load = [&] {
        cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice);
        cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice);
        cudaMemcpy(dc, a.data(), bytes, cudaMemcpyHostToDevice);
      };
      const auto fetch = [&](const std::byte* from) {
        cudaMemcpyAsync(got.data(), from, bytes, cudaMemcpyDeviceToHost, stream);
        EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      };
      const std::string what = fmt::format("{} {}", to_string(type), to_string(op));

      load();  // out of place: c = a op b, past the first element
      gpu::combine(dc + size, da + size, db + size, count, type, op, stream);
      want = a;
      kernels::combine(want.data() + size, a.data() + size, b.data() + size, count, type, op);
      fetch(dc);
      EXPECT_EQ(first_difference(got, want, size), "") << what << ": combine";

      load();  // in place: b = a op b
      gpu::combine(db + size, da + size, db + size, count, type, op, stream);
      want = b;
      kernels::combine(want.data() + size, a.data() + size, b.data() + size, count, type, op);
      fetch(db);
      EXPECT_EQ(first_difference(got, want, size), "") << what << ": combine in place";

      load();  // c = identity, then c = c op a: a again
      gpu::fill_identity(dc + size, count, type, op, stream);
      gpu::combine(dc + size, dc + size, da + size, count, type, op, stream);
      fetch(dc);
      EXPECT_EQ(first_difference(got, a, size), "") << what << ": x op identity";

      if (op == ReduceOp::Avg)
        for (uint64_t divisor : {uint64_t{3}, uint64_t{256}, uint64_t{300}}) {
          load();
          gpu::divide(da + size, count, type, divisor, stream);
          want = a;
          kernels::divide(want.data() + size, count, type, divisor);
          fetch(da);
          EXPECT_EQ(first_difference(got, want, size), "") << what << ": divide by " << divisor;
        }
      EXPECT_EQ(cudaGetLastError(), cudaSuccess) << what;
      cudaFree(da);
      cudaFree(db);
      cudaFree(dc);
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
