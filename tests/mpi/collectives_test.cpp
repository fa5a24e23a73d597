// Multi-process tests of the communicator's reduce-scatter, all-gather, broadcast and reduce:
// every algorithm of each collective on random asymmetric trees, every root, equal and per-rank
// counts, in and out of place, and the errors of bad calls. Run by CTest under mpirun with 2, 3
// and 5 ranks; every check sums its mismatches over all ranks so every rank gives one verdict.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "planner/collective_planner.hpp"
#include "planner/plan_builder.hpp"
#include "runtime/communicator.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

constexpr DataType kInt = DataType::Int32;

std::vector<int32_t> ints(size_t count, int rank, uint64_t salt) {
  std::vector<int32_t> v(count);
  fill_input(v.data(), count, kInt, ReduceOp::Sum, rank, salt);
  return v;
}

// Rank r's block in the concatenation of per-rank blocks.
size_t block_begin(const std::vector<uint64_t>& counts, int rank) {
  return static_cast<size_t>(std::accumulate(counts.begin(), counts.begin() + rank, uint64_t{0}));
}

// All-gather of per-rank `counts` (equal counts through the plain call): every rank's block r
// must be rank r's input. Returns the mismatches over all ranks.
uint64_t allgather_and_check(Communicator& comm, const std::vector<uint64_t>& counts, bool v_form, bool in_place,
                             uint64_t salt, std::string* detail) {
  const int rank = comm.rank();
  const size_t total = static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), uint64_t{0}));
  const size_t begin = block_begin(counts, rank);
  std::vector<int32_t> recv(total, -7);
  const std::vector<int32_t> mine = ints(counts[static_cast<size_t>(rank)], rank, salt);
  const void* send = mine.data();
  if (in_place) {
    std::copy(mine.begin(), mine.end(), recv.begin() + static_cast<ptrdiff_t>(begin));
    send = recv.data() + begin;
  }
  if (v_form) {
    comm.allgather_v(send, recv.data(), counts, kInt);
  } else {
    comm.allgather(send, recv.data(), counts[0], kInt);
  }
  uint64_t bad = 0;
  for (int r = 0; r < comm.size(); ++r) {
    const std::vector<int32_t> expected = ints(counts[static_cast<size_t>(r)], r, salt);
    const size_t at = block_begin(counts, r);
    for (size_t i = 0; i < expected.size(); ++i) {
      if (recv[at + i] != expected[i] && bad++ == 0) {
        *detail = fmt::format("rank {}: block {} element {} is {}, expected {}", rank, r, i, recv[at + i],
                              expected[i]);
      }
    }
  }
  return sum_over_ranks(bad);
}

// Reduce-scatter: rank r's result is the sum over ranks of their block r.
uint64_t reduce_scatter_and_check(Communicator& comm, const std::vector<uint64_t>& counts, bool v_form,
                                  bool in_place, DataType type, ReduceOp op, uint64_t salt, std::string* detail) {
  const int rank = comm.rank();
  const size_t total = static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), uint64_t{0}));
  const size_t begin = block_begin(counts, rank);
  const size_t mine = counts[static_cast<size_t>(rank)];
  const size_t element = size_of(type);
  std::vector<std::byte> send(std::max<size_t>(total, 1) * element);
  fill_input(send.data(), total, type, op, rank, salt);
  const std::vector<std::byte> send_before = send;
  std::vector<std::byte> result(std::max<size_t>(mine, 1) * element, std::byte{0x5a});
  void* recv = in_place ? send.data() + begin * element : result.data();
  if (v_form) {
    comm.reduce_scatter_v(send.data(), recv, counts, type, op);
  } else {
    comm.reduce_scatter(send.data(), recv, counts[0], type, op);
  }
  // The result at its place in a whole-size view, for check_result's global indices.
  std::vector<std::byte> whole(std::max<size_t>(total, 1) * element);
  if (mine > 0) std::memcpy(whole.data() + begin * element, recv, mine * element);
  const Check check = check_result(whole.data(), begin + mine, type, op, comm.size(), salt, begin);
  uint64_t bad = check.mismatches;
  if (bad > 0) *detail = fmt::format("rank {}: {}", rank, check.first);
  // Out of place, the send buffer is the caller's and stays as it was.
  if (!in_place && send != send_before) {
    ++bad;
    *detail = fmt::format("rank {}: the send buffer changed", rank);
  }
  return sum_over_ranks(bad);
}

// Broadcast from `root`: every rank ends with the root's input; the root's send is untouched.
uint64_t broadcast_and_check(Communicator& comm, size_t count, int root, bool one_buffer, uint64_t salt,
                             std::string* detail) {
  const int rank = comm.rank();
  const std::vector<int32_t> data = ints(count, root, salt);
  std::vector<int32_t> recv(count, -9);
  if (one_buffer) {
    if (rank == root) recv = data;
    comm.broadcast(nullptr, recv.data(), count, kInt, root);
  } else {
    comm.broadcast(rank == root ? data.data() : nullptr, recv.data(), count, kInt, root);
  }
  uint64_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (recv[i] != data[i] && bad++ == 0) {
      *detail = fmt::format("rank {}: element {} is {}, expected {} (root {})", rank, i, recv[i], data[i], root);
    }
  }
  return sum_over_ranks(bad);
}

// Reduce to `root`: the root gets the op over every rank's input; the others' receive buffers
// are not touched.
uint64_t reduce_and_check(Communicator& comm, size_t count, int root, DataType type, ReduceOp op, bool in_place,
                          uint64_t salt, std::string* detail) {
  const int rank = comm.rank();
  const size_t element = size_of(type);
  std::vector<std::byte> send(std::max<size_t>(count, 1) * element);
  fill_input(send.data(), count, type, op, rank, salt);
  std::vector<std::byte> recv(std::max<size_t>(count, 1) * element, std::byte{0x3c});
  const std::vector<std::byte> untouched = recv;
  if (in_place && rank == root) {
    recv = send;
    comm.reduce(nullptr, recv.data(), count, type, op, root);
  } else {
    comm.reduce(send.data(), recv.data(), count, type, op, root);
  }
  uint64_t bad = 0;
  if (rank == root) {
    const Check check = check_result(recv.data(), count, type, op, comm.size(), salt);
    bad = check.mismatches;
    if (bad > 0) *detail = fmt::format("root {}: {}", rank, check.first);
  } else if (recv != untouched) {
    bad = 1;
    *detail = fmt::format("rank {}: the receive buffer off the root was written", rank);
  }
  return sum_over_ranks(bad);
}

// Per-rank counts, alike on every rank: some empty, one large.
std::vector<uint64_t> uneven_counts(int world, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<uint64_t> counts(static_cast<size_t>(world));
  for (auto& c : counts) c = random() % 4 == 0 ? 0 : 1 + random() % 3000;
  counts[random() % counts.size()] = 70001;
  return counts;
}

std::vector<int> roots_of(int world) {
  std::vector<int> roots{0, world - 1};
  if (world > 2) roots.push_back(world / 2);
  return roots;
}

// Every algorithm of the collective on two random trees, each root, several counts.
void every_algorithm(ir::Collective collective) {
  const int world = world_size();
  uint64_t salt = 100 + static_cast<uint64_t>(collective) * 1000;
  for (const uint32_t seed : {31u, 47u}) {
    const Topology topology = random_tree(world, seed);
    for (const std::string& algorithm : collective_algorithm_names(collective)) {
      const std::vector<int> roots = ir::has_root(collective) ? roots_of(world) : std::vector<int>{0};
      for (const int root : roots) {
        Communicator comm(single_schedule_plan(topology, collective, algorithm, root), MPI_COMM_WORLD);
        const std::string where = fmt::format("{} {} root {} on random{}", ir::to_string(collective), algorithm,
                                              root, seed);
        for (size_t i = 0; const size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1009}, size_t{65537}}) {
          const bool variant = i++ % 2 == 1;
          std::string detail;
          const std::vector<uint64_t> counts(static_cast<size_t>(world), count);
          uint64_t bad = 0;
          switch (collective) {
            case ir::Collective::AllGather:
              bad = allgather_and_check(comm, counts, false, variant, salt++, &detail);
              break;
            case ir::Collective::ReduceScatter:
              bad = reduce_scatter_and_check(comm, counts, false, variant, kInt, ReduceOp::Sum, salt++, &detail);
              break;
            case ir::Collective::Broadcast:
              bad = broadcast_and_check(comm, count, root, variant, salt++, &detail);
              break;
            case ir::Collective::Reduce:
              bad = reduce_and_check(comm, count, root, kInt, ReduceOp::Sum, variant, salt++, &detail);
              break;
            case ir::Collective::AllReduce: break;
          }
          EXPECT_EQ(bad, 0u) << where << ", count " << count << (variant ? " (in place)" : "") << ": " << detail;
        }
        if (ir::has_shards(collective)) {
          std::string detail;
          const std::vector<uint64_t> counts = uneven_counts(world, seed + salt);
          const uint64_t bad = collective == ir::Collective::AllGather
                                   ? allgather_and_check(comm, counts, true, false, salt++, &detail)
                                   : reduce_scatter_and_check(comm, counts, true, false, kInt, ReduceOp::Sum,
                                                              salt++, &detail);
          EXPECT_EQ(bad, 0u) << where << ", per-rank counts " << fmt::format("{}", fmt::join(counts, ",")) << ": "
                             << detail;
        }
      }
    }
  }
}

// The plan the plan command writes for every collective (the cheapest schedule per size),
// every type and op where the collective combines.
void planned_every_collective() {
  const int world = world_size();
  PlanOptions options;
  options.collectives = {ir::Collective::AllReduce, ir::Collective::ReduceScatter, ir::Collective::AllGather,
                         ir::Collective::Broadcast, ir::Collective::Reduce};
  options.roots = {0, world - 1};
  Communicator comm(build_plan(random_tree(world, 59), options), MPI_COMM_WORLD);
  uint64_t salt = 9000;
  for (const DataType type : {DataType::Float32, DataType::Float64, DataType::Int64, DataType::Float16}) {
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      for (const size_t count : {size_t{7}, size_t{4099}}) {
        std::string detail;
        const std::vector<uint64_t> counts(static_cast<size_t>(world), count);
        EXPECT_EQ(reduce_scatter_and_check(comm, counts, false, false, type, op, salt++, &detail), 0u)
            << "reduce_scatter " << to_string(type) << " " << to_string(op) << ": " << detail;
        EXPECT_EQ(reduce_and_check(comm, count, world - 1, type, op, false, salt++, &detail), 0u)
            << "reduce " << to_string(type) << " " << to_string(op) << ": " << detail;
      }
    }
  }
  for (const size_t count : {size_t{1}, size_t{300000}}) {
    std::string detail;
    EXPECT_EQ(allgather_and_check(comm, std::vector<uint64_t>(static_cast<size_t>(world), count), false, false,
                                  salt++, &detail), 0u) << "allgather: " << detail;
    EXPECT_EQ(broadcast_and_check(comm, count, 0, false, salt++, &detail), 0u) << "broadcast: " << detail;
  }
}

// Several collectives in flight at once, completed out of order.
void nonblocking_mix() {
  const int world = world_size();
  PlanOptions options;
  options.collectives = {ir::Collective::AllReduce, ir::Collective::ReduceScatter, ir::Collective::AllGather,
                         ir::Collective::Broadcast, ir::Collective::Reduce};
  Communicator comm(build_plan(random_tree(world, 61), options), MPI_COMM_WORLD);
  const int rank = comm.rank();
  const size_t n = 5003;
  const std::vector<int32_t> mine = ints(n, rank, 1);
  std::vector<int32_t> gathered(n * static_cast<size_t>(world));
  std::vector<int32_t> scatter_in = ints(n * static_cast<size_t>(world), rank, 2);
  std::vector<int32_t> scattered(n);
  std::vector<int32_t> bcast = rank == 0 ? ints(n, 0, 3) : std::vector<int32_t>(n);
  Request a = comm.iallgather(mine.data(), gathered.data(), n, kInt);
  Request b = comm.ireduce_scatter(scatter_in.data(), scattered.data(), n, kInt, ReduceOp::Sum);
  Request c = comm.ibroadcast(nullptr, bcast.data(), n, kInt, 0);
  c.wait();
  b.wait();
  a.wait();
  uint64_t bad = 0;
  for (int r = 0; r < world; ++r) {
    if (!std::equal(gathered.begin() + static_cast<ptrdiff_t>(n) * r,
                    gathered.begin() + static_cast<ptrdiff_t>(n) * (r + 1), ints(n, r, 1).begin()))
      ++bad;
  }
  std::vector<int32_t> whole(n * static_cast<size_t>(world));
  std::copy(scattered.begin(), scattered.end(), whole.begin() + static_cast<ptrdiff_t>(n) * rank);
  bad += check_result(whole.data(), n * static_cast<size_t>(rank + 1), kInt, ReduceOp::Sum, world, 2,
                      n * static_cast<size_t>(rank)).mismatches;
  if (bcast != ints(n, 0, 3)) ++bad;
  EXPECT_EQ(sum_over_ranks(bad), 0u);
}

// A plan holding broadcast and reduce for root 0 only: every other root gets a derived chain,
// with right results.
void unplanned_roots_derive_a_schedule() {
  const int world = world_size();
  PlanOptions options;
  options.collectives = {ir::Collective::AllReduce, ir::Collective::Broadcast, ir::Collective::Reduce};
  options.roots = {0};
  Communicator comm(build_plan(random_tree(world, 71), options), MPI_COMM_WORLD);
  uint64_t salt = 7100;
  for (int root = 0; root < world; ++root) {
    for (const size_t count : {size_t{1}, size_t{100003}}) {
      std::string detail;
      EXPECT_EQ(broadcast_and_check(comm, count, root, false, salt++, &detail), 0u)
          << "broadcast from root " << root << ", count " << count << ": " << detail;
      EXPECT_EQ(reduce_and_check(comm, count, root, DataType::Float64, ReduceOp::Sum, false, salt++, &detail), 0u)
          << "reduce to root " << root << ", count " << count << ": " << detail;
    }
  }
}

// Bad calls fail alike on every rank with InputError and leave the communicator usable.
void bad_calls_fail_clearly() {
  const int world = world_size();
  const Topology topology = random_tree(world, 67);
  ir::Plan plan = plan_for(topology, "ring");  // all-reduce only
  plan.schedules.push_back(plan_collective_algorithm(topology, ir::Collective::AllGather, "ring", 0));
  plan.schedules.back().min_bytes = 0;
  plan.schedules.back().max_bytes.reset();
  Communicator comm(plan, MPI_COMM_WORLD);
  std::vector<int32_t> a(64 * static_cast<size_t>(world)), b(64 * static_cast<size_t>(world));
  const auto fails_with = [&](const std::function<void()>& call, const std::string& words) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one saying: " << words;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  fails_with([&] { comm.broadcast(a.data(), b.data(), 64, kInt, world); },
             fmt::format("root {} is not a rank of the {} ranks", world, world));
  fails_with([&] { comm.reduce(a.data(), b.data(), 64, kInt, ReduceOp::Sum, -1); }, "root -1 is not a rank");
  fails_with([&] { comm.broadcast(a.data(), b.data(), 64, kInt, 0); },
             "the plan has no broadcast schedule from root 0");
  fails_with([&] { comm.reduce_scatter(a.data(), b.data(), 64, kInt, ReduceOp::Sum); },
             "--collectives reduce_scatter");
  const std::vector<uint64_t> short_counts(static_cast<size_t>(world) + 1, 1);
  fails_with([&] { comm.allgather_v(a.data(), b.data(), short_counts, kInt); },
             fmt::format("{} per-rank counts for {} ranks", world + 1, world));
  fails_with([&] { comm.allgather(a.data(), nullptr, 64, kInt); }, "null receive buffer");
  // Still usable.
  std::string detail;
  EXPECT_EQ(allgather_and_check(comm, std::vector<uint64_t>(static_cast<size_t>(world), 64), false, false, 5,
                                &detail), 0u) << detail;
  EXPECT_EQ(allreduce_and_check(comm, 1009, kInt, ReduceOp::Sum, false, 6, &detail), 0u) << detail;
}

template <typename F>
void add_test(const char* suite, const std::string& name, F body) {
  class Body : public testing::Test {
   public:
    explicit Body(F f) : f_(std::move(f)) {}
    void TestBody() override { f_(); }

   private:
    F f_;
  };
  testing::RegisterTest(suite, name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                        [body]() -> testing::Test* { return new Body(body); });
}

void register_tests() {
  for (const ir::Collective c : {ir::Collective::ReduceScatter, ir::Collective::AllGather, ir::Collective::Broadcast,
                                 ir::Collective::Reduce}) {
    add_test("EveryAlgorithm", std::string(ir::to_string(c)), [c] { every_algorithm(c); });
  }
  add_test("Planned", "EveryCollectiveTypeAndOp", planned_every_collective);
  add_test("Nonblocking", "CollectivesInFlightTogether", nonblocking_mix);
  add_test("Errors", "BadCallsFailClearly", bad_calls_fail_clearly);
  add_test("Roots", "UnplannedRootsDeriveASchedule", unplanned_roots_derive_a_schedule);
}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_tests);
}
