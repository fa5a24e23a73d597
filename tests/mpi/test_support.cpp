#include "tests/mpi/test_support.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "planner/collective_planner.hpp"
#include "planner/plan_builder.hpp"

namespace flexplan::mpitest {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

uint64_t sum_over_ranks(uint64_t value) {
  uint64_t total = 0;
  MPI_Allreduce(&value, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

namespace {

// Non-zero ranks report only their failures, tagged with the rank.
class RankFailurePrinter : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    fmt::print(stderr, "[rank {}] {}:{}: {}\n", world_rank(),
               result.file_name() ? result.file_name() : "?", result.line_number(),
               result.summary());
  }
};

}  // namespace

int run_all_tests(int argc, char** argv, void (*register_tests)()) {
  // A caller that needs another thread level (the emulated GPU tests) initializes MPI first.
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  register_tests();
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (world_rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter);
  }
  int result = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return result;
}

// --- plans ------------------------------------------------------------------------------------

ir::Plan hand_ring_plan(int world) {
  ir::Plan plan;
  plan.world_size = world;
  plan.topology_name = fmt::format("hand-ring-{}", world);
  for (int r = 0; r < world; ++r) plan.rank_names.push_back(fmt::format("switch/m0/gpu{}", r));
  ir::Schedule ring;
  ring.algorithm = "ring";
  ring.units = static_cast<uint64_t>(world);
  const auto mod = [world](int x) { return ((x % world) + world) % world; };
  // Reduce-scatter: in step s, rank r passes its partial of block (r - s) to r + 1, so after
  // world - 1 steps rank r holds block r + 1 complete.
  for (int s = 0; s < world - 1; ++s) {
    ir::Step step;
    step.phase = ir::Phase::ReduceScatter;
    for (int r = 0; r < world; ++r) {
      const auto block = static_cast<uint64_t>(mod(r - s));
      step.ops.push_back({ir::OpKind::Reduce, block, block + 1, mod(r + 1), {r, mod(r + 1)}});
    }
    ring.steps.push_back(step);
  }
  // All-gather: in step s, rank r forwards block (r + 1 - s) to r + 1.
  for (int s = 0; s < world - 1; ++s) {
    ir::Step step;
    step.phase = ir::Phase::AllGather;
    for (int r = 0; r < world; ++r) {
      const auto block = static_cast<uint64_t>(mod(r + 1 - s));
      step.ops.push_back({ir::OpKind::Broadcast, block, block + 1, r, {r, mod(r + 1)}});
    }
    ring.steps.push_back(step);
  }
  plan.schedules.push_back(ring);
  return plan;
}

Topology random_tree(int learners, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int machines = pick(std::min(2, learners), std::min(5, learners));
  // Unequal machine sizes: every machine gets one learner, the rest land at random.
  std::vector<int> sizes(static_cast<size_t>(machines), 1);
  for (int i = machines; i < learners; ++i) ++sizes[static_cast<size_t>(pick(0, machines - 1))];
  std::vector<int> ranks(static_cast<size_t>(learners));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::shuffle(ranks.begin(), ranks.end(), rng);

  const double gbit = 1.25e8;
  const double speeds[] = {1 * gbit, 10 * gbit, 25 * gbit, 100 * gbit};
  TopoGraph graph;
  auto add = [&](int parent, std::string name, Link link, int rank) {
    // Vertex first, properties after: GCC 12 under the sanitizers warns falsely about Boost's
    // property-taking add_vertex.
    const auto id = static_cast<int>(boost::add_vertex(graph));
    graph[id].name = std::move(name);
    graph[id].link = link;
    graph[id].rank = rank;
    if (parent >= 0) boost::add_edge(parent, id, link, graph);
    return id;
  };
  const int root = add(-1, "switch", {}, -1);
  const bool racks = machines >= 4 && pick(0, 1) == 1;
  std::vector<int> parents{root};
  if (racks) {
    parents = {add(root, "rack0", {100 * gbit, 2e-6}, -1), add(root, "rack1", {25 * gbit, 5e-6}, -1)};
  }
  size_t next_rank = 0;
  for (int m = 0; m < machines; ++m) {
    const Link uplink{speeds[pick(0, 3)], 1e-6 * pick(5, 50)};
    const int machine = add(parents[static_cast<size_t>(m) % parents.size()], fmt::format("m{}", m),
                            uplink, -1);
    for (int g = 0; g < sizes[static_cast<size_t>(m)]; ++g) {
      add(machine, fmt::format("gpu{}", g), {1.2e10, 5e-6}, ranks[next_rank++]);
    }
  }
  return Topology(fmt::format("random-{}-{}", learners, seed), std::move(graph));
}

ir::Plan plan_for(const Topology& topology, const std::string& algorithm) {
  PlanOptions options;
  options.algorithms = {algorithm};
  return build_plan(topology, options);
}

ir::Plan single_schedule_plan(const Topology& topology, ir::Collective collective, const std::string& algorithm,
                              int32_t root) {
  ir::Plan plan = plan_for(topology, "ring");
  plan.schedules = {plan_collective_algorithm(topology, collective, algorithm, root)};
  plan.schedules[0].min_bytes = 0;
  plan.schedules[0].max_bytes.reset();
  return plan;
}

std::vector<std::string> bundled_topologies_with(int learners) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(FLEXPLAN_SOURCE_DIR "/topologies")) {
    if (entry.path().extension() != ".json") continue;
    // Skip the huge ones without parsing them.
    if (std::filesystem::file_size(entry.path()) > 64 * 1024) continue;
    try {
      if (load_topology(entry.path().string()).num_learners() == learners) {
        paths.push_back(entry.path().string());
      }
    } catch (const std::exception&) {
      // Not a topology this test can use; the planner's own tests cover bad files.
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// --- data -------------------------------------------------------------------------------------

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The raw input before rounding to the type. Integer ranges keep every exact result inside
// the type (sums of at most 12 values of |x| <= 50; uint8 sums <= 12 * 20 = 240; products of
// factors in {-1, 1, 2} or {1, 2, 3} wrap only where the type wraps alike). Floating sums
// draw from [-2, 2), products from [0.75, 1.25] (no overflow, no cancellation to zero).
double raw_input(DataType type, ReduceOp op, int rank, size_t index, uint64_t salt) {
  const uint64_t h = mix(mix(salt * 1000003 + static_cast<uint64_t>(rank)) ^ index);
  const double unit = static_cast<double>(h >> 11) * 0x1p-53;  // [0, 1)
  if (is_floating(type)) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: return -2 + 4 * unit;
      case ReduceOp::Prod: return 0.75 + 0.5 * unit;
      case ReduceOp::Min:
      case ReduceOp::Max: return -100 + 200 * unit;
    }
  }
  const bool unsigned_type = type == DataType::UInt8;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return unsigned_type ? static_cast<double>(h % 21) : static_cast<double>(h % 101) - 50;
    case ReduceOp::Prod: return unsigned_type ? static_cast<double>(1 + h % 3) : static_cast<double>(h % 3) - 1 + (h % 3 == 1 ? 2 : 0);
    case ReduceOp::Min:
    case ReduceOp::Max: return unsigned_type ? static_cast<double>(h % 256) : static_cast<double>(h % 2001) - 1000;
  }
  return 0;
}

double input(DataType type, ReduceOp op, int rank, size_t index, uint64_t salt) {
  double scratch[1];
  store_element(scratch, 0, type, raw_input(type, op, rank, index, salt));
  return load_element(scratch, 0, type);  // exactly what the rank holds
}

}  // namespace

void fill_input(void* buffer, size_t count, DataType type, ReduceOp op, int rank, uint64_t salt) {
  for (size_t i = 0; i < count; ++i) store_element(buffer, i, type, raw_input(type, op, rank, i, salt));
}

Check check_result(const void* result, size_t count, DataType type, ReduceOp op, int world,
                   uint64_t salt, size_t first, size_t stride) {
  Check check;
  const double u = unit_roundoff(type);
  for (size_t i = first; i < count; i += stride) {
    const double got = load_element(result, i, type);
    double expected = 0;
    double tolerance = 0;
    if (is_floating(type)) {
      // Reference in long double; the runtime's error is bounded by one rounding per hop of
      // the chain (at most world - 1 hops per element) plus the final division for avg:
      // |error| <= (world + 1) * u * sum|x| (sum) or (world + 1) * u * |prod| (prod); min
      // and max are exact.
      long double acc = input(type, op, 0, i, salt);
      long double magnitude = std::fabs(acc);
      for (int r = 1; r < world; ++r) {
        const long double x = input(type, op, r, i, salt);
        switch (op) {
          case ReduceOp::Sum:
          case ReduceOp::Avg: acc += x; magnitude += std::fabs(x); break;
          case ReduceOp::Prod: acc *= x; break;
          case ReduceOp::Min: acc = std::min(acc, x); break;
          case ReduceOp::Max: acc = std::max(acc, x); break;
        }
      }
      if (op == ReduceOp::Prod) magnitude = std::fabs(acc);
      if (op == ReduceOp::Avg) {
        acc /= world;
        magnitude /= world;
      }
      expected = static_cast<double>(acc);
      tolerance = (op == ReduceOp::Min || op == ReduceOp::Max)
                      ? 0
                      : (world + 1) * u * static_cast<double>(magnitude);
    } else {
      // Exact: integer arithmetic in 64 bits, then the type's own wrap-around.
      int64_t acc = static_cast<int64_t>(input(type, op, 0, i, salt));
      for (int r = 1; r < world; ++r) {
        const auto x = static_cast<int64_t>(input(type, op, r, i, salt));
        switch (op) {
          case ReduceOp::Sum:
          case ReduceOp::Avg: acc += x; break;
          case ReduceOp::Prod: acc *= x; break;
          case ReduceOp::Min: acc = std::min(acc, x); break;
          case ReduceOp::Max: acc = std::max(acc, x); break;
        }
      }
      if (op == ReduceOp::Avg) acc /= world;  // truncation toward zero, as documented
      switch (type) {
        case DataType::Int32: acc = static_cast<int32_t>(acc); break;  // modular since C++20
        case DataType::UInt8: acc = static_cast<uint8_t>(acc); break;
        default: break;
      }
      expected = static_cast<double>(acc);
    }
    if (!(std::fabs(got - expected) <= tolerance)) {
      if (check.mismatches == 0) {
        check.first = fmt::format("element {} of {}: got {}, expected {} (tolerance {:g})", i, count,
                                  got, expected, tolerance);
      }
      ++check.mismatches;
    }
  }
  return check;
}

uint64_t verify_everywhere(const void* result, size_t count, DataType type, ReduceOp op,
                           uint64_t salt, std::string* detail) {
  const int world = world_size();
  const int rank = world_rank();
  Check check;
  if (!is_floating(type) && count >= 65536) {
    uint64_t hash = count;
    const auto* bytes = static_cast<const unsigned char*>(result);
    for (size_t i = 0; i < count * size_of(type); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
    std::vector<uint64_t> hashes(static_cast<size_t>(world));
    MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 0; r < world; ++r) {
      if (hashes[static_cast<size_t>(r)] != hash) {
        check.mismatches = 1;
        check.first = fmt::format("the result differs from rank {}'s", r);
        break;
      }
    }
    if (check.mismatches == 0) {
      check = check_result(result, count, type, op, world, salt, static_cast<size_t>(rank),
                           static_cast<size_t>(world));
    }
  } else {
    check = check_result(result, count, type, op, world, salt);
  }
  if (detail && check.mismatches) *detail = check.first;
  return sum_over_ranks(check.mismatches);
}

uint64_t allreduce_and_check(Communicator& comm, size_t count, DataType type, ReduceOp op,
                             bool in_place, uint64_t salt, std::string* detail) {
  const size_t bytes = count * size_of(type);
  std::vector<std::byte> send(bytes), recv(bytes);
  fill_input(send.data(), count, type, op, comm.rank(), salt);
  if (in_place) {
    comm.allreduce(send.data(), send.data(), count, type, op);
  } else {
    const std::vector<std::byte> pristine = send;
    comm.allreduce(send.data(), recv.data(), count, type, op);
    // Out of place must leave the input alone.
    if (send != pristine) {
      if (detail) *detail = "the send buffer changed";
      return sum_over_ranks(1);
    }
  }
  return verify_everywhere(in_place ? send.data() : recv.data(), count, type, op, salt, detail);
}

}  // namespace flexplan::mpitest
