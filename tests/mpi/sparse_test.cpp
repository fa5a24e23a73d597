// Multi-process tests of the sparse all-reduce (runtime/sparse_allreduce.hpp) on random uneven
// trees and on unnamed plans (one machine per rank), run by CTest under mpirun with 1 to 12
// ranks. Inputs are small integers in floating point, so every sum is exact and the expected
// result is computed bit for bit: the machine sums, each machine owner's MSTopK selection of its
// slice, and the sum over machines of what was selected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "ir/sparse_layout.hpp"
#include "runtime/communicator.hpp"
#include "sparse/mstopk.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

double input_value(int rank, size_t i, uint64_t salt) {
  const uint64_t h = (static_cast<uint64_t>(rank) * 7919 + i * 104729 + salt * 31337) % 2001;
  return static_cast<double>(h) - 1000.0;
}

template <typename T>
std::vector<T> input_of(int rank, size_t count, uint64_t salt) {
  std::vector<T> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<T>(input_value(rank, i, salt));
  return x;
}

// The result every rank must hold, from every rank's input (plus, per machine, an extra
// amount added to its sum before selection: the residual the test expects).
template <typename T>
std::vector<T> expected_result(const ir::SparseLayout& layout, size_t count, double density,
                               const std::vector<std::vector<T>>& machine_sums) {
  std::vector<T> out(count, T{0});
  for (size_t m = 0; m < layout.machines.size(); ++m) {
    std::vector<bool> chosen(count, false);
    for (int32_t owner : layout.machines[m]) {
      const auto s = layout.slice(owner, count);
      const size_t length = s.end - s.begin;
      const size_t k = std::min<size_t>(length, static_cast<size_t>(std::ceil(density * static_cast<double>(length))));
      std::vector<uint32_t> picked;
      sparse::mstopk<T>(std::span<const T>(machine_sums[m].data() + s.begin, length), k, picked);
      for (uint32_t offset : picked) chosen[s.begin + offset] = true;
    }
    for (size_t e = 0; e < count; ++e)
      if (chosen[e]) out[e] += machine_sums[m][e];
  }
  return out;
}

template <typename T>
std::vector<std::vector<T>> machine_sums_of(const ir::SparseLayout& layout, size_t count, uint64_t salt) {
  std::vector<std::vector<T>> sums(layout.machines.size(), std::vector<T>(count, T{0}));
  for (size_t m = 0; m < layout.machines.size(); ++m)
    for (int32_t r : layout.machines[m]) {
      const auto x = input_of<T>(r, count, salt);
      for (size_t e = 0; e < count; ++e) sums[m][e] += x[e];
    }
  return sums;
}

template <typename T>
uint64_t mismatches(const std::vector<T>& got, const std::vector<T>& want, std::string* first) {
  uint64_t bad = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    if (got[e] != want[e]) {
      if (bad++ == 0) *first = fmt::format("element {}: got {}, expected {}", e, got[e], want[e]);
    }
  }
  return bad;
}

std::vector<ir::Plan> plans() {
  std::vector<ir::Plan> out;
  const int world = world_size();
  out.push_back(hand_ring_plan(world));  // unnamed: one machine per rank
  if (world >= 2) {
    for (uint32_t seed : {11u, 23u}) out.push_back(plan_for(random_tree(world, seed), "ring"));
  }
  if (world >= 4) {
    // Machines at uneven depths (the exchange combines level by level: ir/sparse_exchange.hpp),
    // one of them also a node above another machine; ranks dealt out of order.
    const std::vector<std::string> machines = {"sw/r0/m0", "sw/r0/s1/m1", "sw/r1/m2", "sw/r0/s1/m1/m3", "sw/m4"};
    ir::Plan deep = hand_ring_plan(world);
    deep.topology_name = "deep-names";
    deep.rank_names.clear();
    for (int r = 0; r < world; ++r) {
      const int machine = (r * 3 + 1) % std::min<int>(world, static_cast<int>(machines.size()));
      deep.rank_names.push_back(fmt::format("{}/g{}", machines[static_cast<size_t>(machine)], r));
    }
    out.push_back(deep);
  }
  return out;
}

template <typename T>
void dense_at_density_one(DataType type) {
  for (const ir::Plan& plan : plans()) {
    Communicator comm(plan, MPI_COMM_WORLD);
    const auto layout = ir::sparse_layout(comm.plan());
    uint64_t salt = 3;
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{13}, size_t{1009}, size_t{65521}}) {
      auto buffer = input_of<T>(comm.rank(), count, salt);
      comm.sparse_allreduce(buffer.data(), count, type, 1.0);
      std::vector<T> want(count, T{0});
      for (int r = 0; r < comm.size(); ++r) {
        const auto x = input_of<T>(r, count, salt);
        for (size_t e = 0; e < count; ++e) want[e] += x[e];
      }
      std::string first;
      EXPECT_EQ(sum_over_ranks(mismatches(buffer, want, &first)), 0u)
          << plan.topology_name << " count " << count << " (" << layout.machines.size() << " machines): " << first;
      ++salt;
    }
  }
}

TEST(Sparse, DenseAtDensityOneFloat32) { dense_at_density_one<float>(DataType::Float32); }
TEST(Sparse, DenseAtDensityOneFloat64) { dense_at_density_one<double>(DataType::Float64); }

// The calibration entry point (steps 1 and 4 alone) is an all-reduce within each machine.
TEST(Sparse, MachineStepsLeaveEveryRankItsMachinesSum) {
  for (const ir::Plan& plan : plans()) {
    Communicator comm(plan, MPI_COMM_WORLD);
    const auto layout = ir::sparse_layout(comm.plan());
    const auto machine = static_cast<size_t>(layout.machine_of[static_cast<size_t>(comm.rank())]);
    uint64_t salt = 5;
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1009}, size_t{65521}}) {
      auto buffer = input_of<float>(comm.rank(), count, salt);
      comm.sparse_machine_steps(buffer.data(), count, DataType::Float32);
      const auto want = machine_sums_of<float>(layout, count, salt)[machine];
      std::string first;
      EXPECT_EQ(sum_over_ranks(mismatches(buffer, want, &first)), 0u)
          << plan.topology_name << " count " << count << ": " << first;
      ++salt;
    }
    // and the communicator goes on: a sparse all-reduce after it is still dense at density 1
    auto buffer = input_of<float>(comm.rank(), 257, 99);
    comm.sparse_allreduce(buffer.data(), 257, DataType::Float32, 1.0);
    std::vector<float> want(257, 0.0f);
    for (int r = 0; r < comm.size(); ++r) {
      const auto x = input_of<float>(r, 257, 99);
      for (size_t e = 0; e < 257; ++e) want[e] += x[e];
    }
    std::string first;
    EXPECT_EQ(sum_over_ranks(mismatches(buffer, want, &first)), 0u) << plan.topology_name << ": " << first;
  }
}

TEST(Sparse, SelectedElementsSumExactly) {
  for (const ir::Plan& plan : plans()) {
    Communicator comm(plan, MPI_COMM_WORLD);
    const auto layout = ir::sparse_layout(comm.plan());
    for (double density : {0.001, 0.01, 0.2}) {
      for (size_t count : {size_t{1009}, size_t{200003}}) {
        const uint64_t salt = 100 + count;
        auto buffer = input_of<float>(comm.rank(), count, salt);
        comm.sparse_allreduce(buffer.data(), count, DataType::Float32, density);
        const auto want = expected_result<float>(layout, count, density, machine_sums_of<float>(layout, count, salt));
        std::string first;
        EXPECT_EQ(sum_over_ranks(mismatches(buffer, want, &first)), 0u)
            << plan.topology_name << " density " << density << " count " << count << ": " << first;
        size_t nonzero = 0;
        for (float v : buffer) nonzero += v != 0;
        EXPECT_GT(nonzero, 0u);
        if (density < 0.1) {
          EXPECT_LT(nonzero, count / 2) << "a sparse result is mostly zeros";
        }
      }
    }
  }
}

// Error feedback: a sparse call leaves the rest in the residuals; a dense call with zero input
// then delivers exactly that rest, so the two results add up to the dense sum; a third call
// finds nothing left.
TEST(Sparse, ResidualCarriedAcrossCalls) {
  for (const ir::Plan& plan : plans()) {
    Communicator comm(plan, MPI_COMM_WORLD);
    const size_t count = 50021;
    const uint64_t salt = 77;
    SparseResidual residual;
    auto first_call = input_of<float>(comm.rank(), count, salt);
    comm.sparse_allreduce(first_call.data(), count, DataType::Float32, 0.01, &residual);
    std::vector<float> second_call(count, 0.0f);
    comm.sparse_allreduce(second_call.data(), count, DataType::Float32, 1.0, &residual);
    std::vector<float> third_call(count, 0.0f);
    comm.sparse_allreduce(third_call.data(), count, DataType::Float32, 1.0, &residual);

    std::vector<float> dense(count, 0.0f), both(count);
    for (int r = 0; r < comm.size(); ++r) {
      const auto x = input_of<float>(r, count, salt);
      for (size_t e = 0; e < count; ++e) dense[e] += x[e];
    }
    uint64_t delivered_late = 0;
    for (size_t e = 0; e < count; ++e) {
      both[e] = first_call[e] + second_call[e];
      delivered_late += second_call[e] != 0;
    }
    std::string first;
    EXPECT_EQ(sum_over_ranks(mismatches(both, dense, &first)), 0u) << plan.topology_name << ": " << first;
    EXPECT_GT(delivered_late, 0u) << "the residual was not carried";
    EXPECT_EQ(sum_over_ranks(mismatches(third_call, std::vector<float>(count, 0.0f), &first)), 0u)
        << "residual left after a dense call: " << first;
    // Without a residual the rest is dropped: a second call delivers nothing.
    auto dropped = input_of<float>(comm.rank(), count, salt);
    comm.sparse_allreduce(dropped.data(), count, DataType::Float32, 0.01);
    std::vector<float> nothing(count, 0.0f);
    comm.sparse_allreduce(nothing.data(), count, DataType::Float32, 1.0);
    EXPECT_EQ(sum_over_ranks(mismatches(nothing, std::vector<float>(count, 0.0f), &first)), 0u) << first;
  }
}

// With inputs whose sums round, every rank must still hold the same bits: each element's sum
// is taken once, in the exchange's group order, and copied from there.
TEST(Sparse, EveryRankHoldsTheSameBits) {
  for (const ir::Plan& plan : plans()) {
    Communicator comm(plan, MPI_COMM_WORLD);
    for (double density : {0.01, 0.3, 1.0}) {
      const size_t count = 65521;
      std::vector<float> buffer(count);
      std::mt19937 rng(static_cast<uint32_t>(comm.rank() * 7 + 1));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (float& x : buffer) x = normal(rng) * 1e-3f + 1.0f / 3.0f;
      comm.sparse_allreduce(buffer.data(), count, DataType::Float32, density);
      std::vector<float> first(count);
      if (comm.rank() == 0) first = buffer;
      MPI_Bcast(first.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
      uint64_t differ = 0;
      for (size_t e = 0; e < count; ++e) differ += std::memcmp(&first[e], &buffer[e], sizeof(float)) != 0;
      EXPECT_EQ(sum_over_ranks(differ), 0u) << plan.topology_name << " density " << density;
    }
  }
}

TEST(Sparse, BadArgumentsFailAlikeAndLeaveTheCommunicatorUsable) {
  Communicator comm(hand_ring_plan(world_size()), MPI_COMM_WORLD);
  std::vector<float> buffer(100, 1.0f);
  EXPECT_THROW(comm.sparse_allreduce(buffer.data(), 100, DataType::Float32, 0.0), InputError);
  EXPECT_THROW(comm.sparse_allreduce(buffer.data(), 100, DataType::Float32, 1.5), InputError);
  std::vector<int32_t> ints(100, 1);
  EXPECT_THROW(comm.sparse_allreduce(ints.data(), 100, DataType::Int32, 0.5), InputError);
  SparseResidual residual;
  comm.sparse_allreduce(buffer.data(), 100, DataType::Float32, 1.0, &residual);
  EXPECT_EQ(buffer[0], static_cast<float>(world_size()));
  EXPECT_THROW(comm.sparse_allreduce(buffer.data(), 50, DataType::Float32, 1.0, &residual), InputError);
  // Dense and sparse calls mix.
  std::vector<float> dense(10, 1.0f);
  comm.allreduce(dense.data(), dense.data(), 10, DataType::Float32, ReduceOp::Sum);
  EXPECT_EQ(dense[9], static_cast<float>(world_size()));
}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, [] {});
}
