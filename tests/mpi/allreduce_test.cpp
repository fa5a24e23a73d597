// Multi-process correctness tests of flexplan::Communicator, run by CTest under mpirun with
// 2, 3, 5, 8 and 12 ranks. Every rank runs the same tests in the same order; each check sums
// the mismatches over all ranks so that every rank reports the same verdict.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "planner/algorithms.hpp"
#include "topology/topology.hpp"
#include "runtime/communicator.hpp"
#include "runtime/tag.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

struct PlanCase {
  std::string name;
  std::function<ir::Plan()> make;
  bool with_large = false;  // also run a count of tens of MB
};

// Counts that stress the unit-to-element mapping and the chunking: empty, single, fewer
// elements than ranks, primes, and ranges that span many chunks.
std::vector<size_t> edge_counts(int world) {
  return {0, 1, 2, static_cast<size_t>(world - 1), static_cast<size_t>(world + 1), 13, 1009, 65521,
          1000003};
}
constexpr size_t kLargeCount = 10'000'019;  // prime; 40 MB of int32

void run_plan_case(const PlanCase& plan_case) {
  Communicator comm(plan_case.make(), MPI_COMM_WORLD);
  uint64_t salt = 1;
  for (size_t i = 0; const size_t count : edge_counts(comm.size())) {
    const bool in_place = i++ % 2 == 0;
    std::string detail;
    EXPECT_EQ(allreduce_and_check(comm, count, DataType::Int32, ReduceOp::Sum, in_place, salt++, &detail), 0u)
        << "int32 sum, count " << count << (in_place ? " in place: " : " out of place: ") << detail;
  }
  for (const size_t count : {size_t{1009}, size_t{65521}}) {
    std::string detail;
    EXPECT_EQ(allreduce_and_check(comm, count, DataType::Float32, ReduceOp::Sum, false, salt++, &detail), 0u)
        << "float32 sum, count " << count << ": " << detail;
  }
  if (plan_case.with_large) {
    std::string detail;
    EXPECT_EQ(allreduce_and_check(comm, kLargeCount, DataType::Int32, ReduceOp::Sum, true, salt++, &detail), 0u)
        << "int32 sum, count " << kLargeCount << " in place: " << detail;
  }
}

std::vector<PlanCase> plan_cases(int world) {
  std::vector<PlanCase> cases;
  cases.push_back({"hand_ring", [world] { return hand_ring_plan(world); }, false});
  std::vector<std::pair<std::string, std::function<Topology()>>> topologies;
  for (const std::string& path : bundled_topologies_with(world)) {
    const std::string stem = path.substr(path.rfind('/') + 1, path.size() - path.rfind('/') - 6);
    topologies.emplace_back(stem, [path] { return load_topology(path); });
  }
  for (const uint32_t seed : {11u, 23u}) {
    topologies.emplace_back(fmt::format("random{}", seed), [world, seed] { return random_tree(world, seed); });
  }
  for (const std::string& algorithm : algorithm_names()) {
    for (size_t t = 0; t < topologies.size(); ++t) {
      const auto& [name, make_topology] = topologies[t];
      cases.push_back({fmt::format("{}_{}", algorithm, name),
                       [make_topology = make_topology, algorithm] {
                         return plan_for(make_topology(), algorithm);
                       },
                       t == 0});
    }
  }
  return cases;
}

// Names safe for GoogleTest: letters, digits and underscores.
std::string test_name(std::string name) {
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

// A plan whose single step has every rank root a reduce of the whole range over everyone:
// each rank writes [0, units) while it sends that same range in the other ops, so its writes
// must be staged until the step ends (the IR's read-at-step-start semantics).
ir::Plan everyone_reduces_plan(int world) {
  ir::Plan plan;
  plan.world_size = world;
  plan.topology_name = "everyone-reduces";
  ir::Schedule schedule;
  schedule.algorithm = "direct";
  schedule.units = 3;
  ir::Step step;
  std::vector<int32_t> everyone(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) everyone[static_cast<size_t>(r)] = r;
  for (int r = 0; r < world; ++r) step.ops.push_back({ir::OpKind::Reduce, 0, 3, r, everyone});
  schedule.steps.push_back(step);
  plan.schedules.push_back(schedule);
  return plan;
}

ir::Plan random_flexreduce_plan(int world) { return plan_for(random_tree(world, 7), "flexreduce"); }

// --- tests that are not per plan ---------------------------------------------------------------

void all_types_all_ops() {
  Communicator comm(random_flexreduce_plan(world_size()), MPI_COMM_WORLD);
  uint64_t salt = 100;
  for (const DataType type : kAllDataTypes) {
    for (const ReduceOp op : kAllReduceOps) {
      for (size_t i = 0; const size_t count : {size_t{1}, size_t{7}, size_t{1009}, size_t{50021}}) {
        const bool in_place = i++ % 2 == 1;
        std::string detail;
        EXPECT_EQ(allreduce_and_check(comm, count, type, op, in_place, salt++, &detail), 0u)
            << to_string(type) << " " << to_string(op) << ", count " << count
            << (in_place ? " in place: " : " out of place: ") << detail;
      }
    }
  }
}

// Operations issued in the same order everywhere but completed in another order, with
// different sizes (so different schedules and chunk counts) overlapping.
void several_outstanding() {
  Communicator comm(random_flexreduce_plan(world_size()), MPI_COMM_WORLD);
  struct Job {
    size_t count;
    DataType type;
    ReduceOp op;
    std::vector<std::byte> buffer;
    Request request;
  };
  const std::array<std::tuple<size_t, DataType, ReduceOp>, 7> shapes{{
      {300000, DataType::Int32, ReduceOp::Sum},
      {1, DataType::Int64, ReduceOp::Max},
      {0, DataType::Float32, ReduceOp::Sum},
      {70001, DataType::Float64, ReduceOp::Avg},
      {5, DataType::UInt8, ReduceOp::Min},
      {1000003, DataType::Int32, ReduceOp::Prod},
      {4099, DataType::BFloat16, ReduceOp::Sum},
  }};
  std::vector<Job> jobs;
  for (const auto& [count, type, op] : shapes) {
    Job job{count, type, op, std::vector<std::byte>(count * size_of(type)), {}};
    fill_input(job.buffer.data(), count, type, op, comm.rank(), 500 + jobs.size());
    jobs.push_back(std::move(job));
  }
  for (Job& job : jobs) {
    job.request = comm.iallreduce(job.buffer.data(), job.buffer.data(), job.count, job.type, job.op);
  }
  // Complete the last first, one by polling with test, the rest by wait in reverse order.
  while (!jobs[3].request.test()) {
  }
  for (size_t j = jobs.size(); j-- > 0;) jobs[j].request.wait();
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::string detail;
    EXPECT_EQ(verify_everywhere(jobs[j].buffer.data(), jobs[j].count, jobs[j].type, jobs[j].op,
                                500 + j, &detail),
              0u)
        << "outstanding job " << j << ": " << detail;
  }
}

// Sequence numbers wrap after 2^16 operations; zero-count operations take a number each
// without moving data, so the wrap comes cheaply, and real operations straddle it.
void sequence_wraps_around() {
  Communicator comm(random_flexreduce_plan(world_size()), MPI_COMM_WORLD);
  std::string detail;
  EXPECT_EQ(allreduce_and_check(comm, 1009, DataType::Int32, ReduceOp::Sum, true, 900, &detail), 0u) << detail;
  const uint64_t skip = (uint64_t{1} << tag::kSequenceBits) - 3;
  for (uint64_t i = 0; i < skip; ++i) comm.allreduce(nullptr, nullptr, 0, DataType::Int32, ReduceOp::Sum);
  for (uint64_t salt = 901; salt < 907; ++salt) {
    EXPECT_EQ(allreduce_and_check(comm, 4099, DataType::Int32, ReduceOp::Sum, salt % 2 == 0, salt, &detail), 0u)
        << "after the wrap, salt " << salt << ": " << detail;
  }
}

void small_chunks_small_window() {
  Options options = Options::from_env();
  options.chunk_bytes = 256;  // 64 int32 per chunk: a 10007-element range spans many chunks
  options.max_chunks_per_range = 1 << 20;
  options.window = 2;
  Communicator comm(random_flexreduce_plan(world_size()), MPI_COMM_WORLD, options);
  std::string detail;
  EXPECT_EQ(allreduce_and_check(comm, 10007, DataType::Int32, ReduceOp::Sum, true, 950, &detail), 0u) << detail;
  EXPECT_EQ(allreduce_and_check(comm, 10007, DataType::Float16, ReduceOp::Max, false, 951, &detail), 0u) << detail;
  options.chunk_bytes = 1;  // degenerate: one element per chunk
  Communicator tiny(random_flexreduce_plan(world_size()), MPI_COMM_WORLD, options);
  EXPECT_EQ(allreduce_and_check(tiny, 301, DataType::Int64, ReduceOp::Sum, true, 952, &detail), 0u) << detail;
  // The default cap on chunks per range: a long range gets longer chunks, still pipelined.
  options = Options::from_env();
  options.chunk_bytes = 1024;
  options.max_chunks_per_range = 3;
  Communicator capped(random_flexreduce_plan(world_size()), MPI_COMM_WORLD, options);
  EXPECT_EQ(allreduce_and_check(capped, 100003, DataType::Float32, ReduceOp::Max, false, 953, &detail), 0u) << detail;
}

void staged_writes() {
  Communicator comm(everyone_reduces_plan(world_size()), MPI_COMM_WORLD);
  std::string detail;
  for (size_t i = 0; const size_t count : {size_t{1}, size_t{3}, size_t{1009}, size_t{300007}}) {
    const bool in_place = i++ % 2 == 0;
    EXPECT_EQ(allreduce_and_check(comm, count, DataType::Int32, ReduceOp::Sum, in_place, 960 + i, &detail), 0u)
        << "count " << count << ": " << detail;
  }
}

// Rank mapping by explicit learner name: MPI rank i claims the learner of plan rank
// world - 1 - i, so the plan's chains run between other processes than by default.
void mapping_by_learner_name() {
  const int world = world_size();
  ir::Plan plan = random_flexreduce_plan(world);
  Options options = Options::from_env();
  options.rank_mapping = RankMapping::Name;
  const int plan_rank = world - 1 - world_rank();
  options.learner_name = plan.rank_names[static_cast<size_t>(plan_rank)];
  Communicator comm(plan, MPI_COMM_WORLD, options);
  EXPECT_EQ(comm.rank(), plan_rank);
  EXPECT_EQ(comm.learner_name(), options.learner_name);
  std::string detail;
  EXPECT_EQ(allreduce_and_check(comm, 65521, DataType::Int32, ReduceOp::Sum, true, 970, &detail), 0u) << detail;
}

// Rank mapping by host name and local rank: one machine named like this host holds every
// learner, so local rank i is learner i of that machine.
void mapping_by_host() {
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  const int world = world_size();
  TopoGraph graph;
  // Vertex first, properties after: GCC 12 under the sanitizers warns falsely about Boost's
  // property-taking add_vertex.
  auto add = [&graph](std::string name, Link link, int rank) {
    const auto id = boost::add_vertex(graph);
    graph[id].name = std::move(name);
    graph[id].link = link;
    graph[id].rank = rank;
    return id;
  };
  const Link machine_link{1.25e9, 1e-5};
  const Link gpu_link{1.2e10, 5e-6};
  add("switch", Link{}, -1);
  boost::add_edge(0, add(host.data(), machine_link, -1), machine_link, graph);
  for (int r = 0; r < world; ++r) {
    // Learner order differs from rank order.
    boost::add_edge(1, add(fmt::format("gpu{}", r), gpu_link, world - 1 - r), gpu_link, graph);
  }
  const ir::Plan plan = plan_for(Topology("this-host", std::move(graph)), "ring");
  Options options = Options::from_env();
  options.rank_mapping = RankMapping::Name;
  Communicator comm(plan, MPI_COMM_WORLD, options);
  // All processes run on this host, so local rank = world rank; learner i of the machine is
  // plan rank i: the machine's learners in rank order.
  EXPECT_EQ(comm.rank(), world_rank());
  EXPECT_EQ(comm.learner_name(), plan.rank_names[static_cast<size_t>(world_rank())]);
  std::string detail;
  EXPECT_EQ(allreduce_and_check(comm, 1009, DataType::Int32, ReduceOp::Sum, false, 980, &detail), 0u) << detail;
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
  testing::RegisterTest(suite, test_name(name).c_str(), nullptr, nullptr, __FILE__, __LINE__,
                        [body]() -> testing::Test* { return new Body(body); });
}

void register_tests() {
  for (const PlanCase& plan_case : plan_cases(world_size())) {
    add_test("Algorithms", plan_case.name, [plan_case] { run_plan_case(plan_case); });
  }
  add_test("Types", "AllTypesAllOps", all_types_all_ops);
  add_test("Nonblocking", "SeveralOutstanding", several_outstanding);
  add_test("Nonblocking", "SequenceWrapsAround", sequence_wraps_around);
  add_test("Pipelining", "SmallChunksSmallWindow", small_chunks_small_window);
  add_test("Steps", "StagedWritesKeepStepStartSemantics", staged_writes);
  add_test("RankMapping", "ByLearnerName", mapping_by_learner_name);
  add_test("RankMapping", "ByHostAndLocalRank", mapping_by_host);
}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_tests);
}
