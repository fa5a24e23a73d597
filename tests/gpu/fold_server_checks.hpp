// Checks of the staged path's fold server (runtime/gpu/fold_server.hpp) shared by the emulated
// tests (CI) and the real-device tests: the same bodies run against the host stand-in and the
// CUDA kernel.
#pragma once

#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "runtime/gpu/device_arithmetic.hpp"
#include "runtime/gpu/staged_communicator.hpp"
#include "runtime/half.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {

inline void store_float_as(DataType type, std::byte* at, float value) {
  switch (type) {
    case DataType::Float64: {
      const double wide = value;
      std::memcpy(at, &wide, sizeof wide);
      return;
    }
    case DataType::Float16: {
      const uint16_t bits = half::float_to_f16(value);
      std::memcpy(at, &bits, sizeof bits);
      return;
    }
    case DataType::BFloat16: {
      const uint16_t bits = half::float_to_bf16(value);
      std::memcpy(at, &bits, sizeof bits);
      return;
    }
    default: std::memcpy(at, &value, sizeof value);
  }
}

// Runs `body` as the thread that runs a staged operation does: between begin() and end() of a
// fold server enqueued on a stream of its own, so that its folds go to the server.
inline void within_a_served_operation(gpu::DeviceArithmetic& arithmetic, const std::function<void()>& body) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  gpu::DeviceArithmetic::Served served = arithmetic.serve(stream);
  const std::string why = arithmetic.begin(served);
  if (why.empty()) body();
  arithmetic.end(served);
  EXPECT_EQ(why, "");
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
}

// Folds of 2, 3, 16, 17 and 40 parts (one, two and three requests) of every dtype x op, with
// `out` the last part (read before written, element by element) and `partial` the first or the
// second part (the runtime's layout when its own data comes first), and avg's division by 3,
// 256 and 300: bit for bit the host arithmetic's; every fold by the server when `served`, by
// the plain kernels otherwise.
inline void check_folds_match_the_host(gpu::DeviceArithmetic& arithmetic, size_t n, bool served) {
  const auto before = arithmetic.counters();
  uint64_t folds = 0, divides = 0;
  for (DataType type : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps)
      for (size_t count : {2, 3, 16, 17, 40}) {
        const size_t partial_at = count % 2;  // parts[0] or parts[1]
        const size_t bytes = n * size_of(type);
        std::vector<std::byte*> parts(count);
        std::vector<std::vector<std::byte>> copies(count);
        for (size_t k = 0; k < count; ++k) {
          parts[k] = arithmetic.allocate(bytes);
          fill_input(parts[k], n, type, op, static_cast<int>(k), 40 + count);
          copies[k].assign(parts[k], parts[k] + bytes);
        }
        std::vector<const std::byte*> host_parts(count);
        for (size_t k = 0; k < count; ++k) host_parts[k] = copies[k].data();
        std::vector<std::byte> want(bytes), running(bytes);
        host_arithmetic().fold(want.data(), running.data(), host_parts.data(), count, n, type, op);
        std::vector<const std::byte*> device_parts(parts.begin(), parts.end());
        ASSERT_EQ(arithmetic.fold(parts[count - 1], parts[partial_at], device_parts.data(), count, n, type, op), "");
        ++folds;
        EXPECT_EQ(std::memcmp(parts[count - 1], want.data(), bytes), 0)
            << to_string(type) << " " << to_string(op) << ", " << count << " parts, partial parts[" << partial_at << "]";
        for (size_t k = 0; k < count; ++k) arithmetic.release(parts[k], bytes);
      }
  for (DataType type : kAllDataTypes)
    for (uint64_t divisor : {3, 256, 300}) {
      const size_t bytes = n * size_of(type);
      std::byte* buf = arithmetic.allocate(bytes);
      fill_input(buf, n, type, ReduceOp::Sum, 5, divisor);
      std::vector<std::byte> want(buf, buf + bytes);
      host_arithmetic().divide(want.data(), n, type, divisor);
      ASSERT_EQ(arithmetic.divide(buf, n, type, divisor), "");
      ++divides;
      EXPECT_EQ(std::memcmp(buf, want.data(), bytes), 0) << to_string(type) << " / " << divisor;
      arithmetic.release(buf, bytes);
    }
  const auto after = arithmetic.counters();
  EXPECT_EQ(after.device_folds - before.device_folds, folds);
  EXPECT_EQ(after.served_folds - before.served_folds, served ? folds : 0);
  EXPECT_EQ(after.host_folds, before.host_folds);
  EXPECT_EQ(after.device_divides - before.device_divides, divides);
}

// Operands of min and max that do not order, element by element: -0 against +0, NaN against a
// number and against NaN; `n` of them, in a floating `type`.
struct UnorderedOperands {
  std::vector<std::byte> a, b;
  size_t n;
};
inline UnorderedOperands unordered_operands(DataType type) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{0.0f, -0.0f, nan, 1.0f, nan, -0.0f};
  const std::vector<float> b{-0.0f, 0.0f, 1.0f, nan, nan, -0.0f};
  const size_t size = size_of(type);
  UnorderedOperands out{std::vector<std::byte>(a.size() * size), std::vector<std::byte>(a.size() * size), a.size()};
  for (size_t i = 0; i < a.size(); ++i) {
    store_float_as(type, out.a.data() + i * size, a[i]);
    store_float_as(type, out.b.data() + i * size, b[i]);
  }
  return out;
}
inline constexpr DataType kFloatingTypes[] = {DataType::Float32, DataType::Float64, DataType::Float16,
                                              DataType::BFloat16};

// Min and max where operands do not order: the server picks as std::min/std::max (the first
// operand on ties), as the host does, so a result does not depend on which chunks the GPU folded.
inline void check_unordered_min_max(gpu::DeviceArithmetic& arithmetic) {
  for (DataType type : kFloatingTypes)
    for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      const auto [ha, hb, n] = unordered_operands(type);
      const size_t bytes = ha.size();
      std::byte* da = arithmetic.allocate(bytes);
      std::byte* db = arithmetic.allocate(bytes);
      std::vector<std::byte> want(bytes), running(bytes);
      std::memcpy(da, ha.data(), bytes);
      std::memcpy(db, hb.data(), bytes);
      const std::byte* host_parts[] = {ha.data(), hb.data()};
      host_arithmetic().fold(want.data(), running.data(), host_parts, 2, n, type, op);
      const std::byte* device_parts[] = {da, db};
      ASSERT_EQ(arithmetic.fold(da, da, device_parts, 2, n, type, op), "");
      EXPECT_EQ(std::memcmp(da, want.data(), bytes), 0) << to_string(type) << " " << to_string(op);
      arithmetic.release(db, bytes);
      arithmetic.release(da, bytes);
    }
}

// The staged path with the device arithmetic while another thread of the process synchronizes
// the whole device (cudaDeviceSynchronize) in a loop: every operation completes with the right
// result. The thread that runs an operation makes no CUDA call while its server holds the
// stream; with a CUDA call in its wait (a query of the server's event), this hung on an H100.
// FLEXPLAN_TEST_DISTURB=device|pinned|all makes the other thread allocate and free device or
// pinned memory instead, or do all three: with 3 processes on one H100 those hang (docs/gpu.md,
// a known limit); "none" does nothing.
inline void check_staged_under_device_wide_synchronization(int operations) {
  gpu::StagedCommunicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD, Options::from_env(),
                               gpu::StagedArithmetic::Device);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> rounds{0};
  const char* set = std::getenv("FLEXPLAN_TEST_DISTURB");
  const std::string chosen = set && *set ? set : "sync";
  const auto does = [&](const char* what) { return chosen == "all" || chosen == what; };
  const bool sync = does("sync"), device_memory = does("device"), pinned_memory = does("pinned");
  std::thread disturber([&] {
    while (!done) {
      if (sync) cudaDeviceSynchronize();
      void* device = nullptr;
      if (device_memory && cudaMalloc(&device, 1 << 20) == cudaSuccess) cudaFree(device);
      void* pinned = nullptr;
      if (pinned_memory && cudaMallocHost(&pinned, 1 << 20) == cudaSuccess) cudaFreeHost(pinned);
      if (!sync && !device_memory && !pinned_memory) std::this_thread::sleep_for(std::chrono::microseconds(100));
      ++rounds;
    }
  });
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const size_t count = 1 << 18, bytes = count * 4;
  std::vector<std::byte> host(bytes), result(bytes);
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, bytes), cudaSuccess);
  uint64_t wrong = 0;
  for (int i = 0; i < operations; ++i) {
    fill_input(host.data(), count, DataType::Float32, ReduceOp::Sum, comm.host().rank(), 700 + i);
    cudaMemcpyAsync(buffer, host.data(), bytes, cudaMemcpyHostToDevice, stream);
    comm.allreduce(buffer, buffer, count, DataType::Float32, ReduceOp::Sum, stream);
    cudaMemcpyAsync(result.data(), buffer, bytes, cudaMemcpyDeviceToHost, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    comm.synchronize();
    std::string detail;
    wrong += verify_everywhere(result.data(), count, DataType::Float32, ReduceOp::Sum, 700 + i, &detail);
  }
  done = true;
  disturber.join();
  cudaFree(buffer);
  cudaStreamDestroy(stream);
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(rounds.load(), 0u);
  const auto counters = comm.device_arithmetic()->counters();
  EXPECT_EQ(counters.served_folds, counters.device_folds) << "a fold of an operation ran outside its server";
  if (world_size() >= 2) {
    EXPECT_GT(counters.served_folds, 0u);
  }
}

}  // namespace flexplan::mpitest
