// Multi-process correctness tests of flexplan::Communicator, run by CTest under mpirun with
// 2, 3, 5, 8 and 12 ranks. Every rank runs the same tests in the same order; each check sums
// the mismatches over all ranks so that every rank reports the same verdict.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "planner/plan_builder.hpp"
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
  if (world < 2) return cases;  // the planner plans for two learners and more
  std::vector<std::pair<std::string, std::function<Topology()>>> topologies;
  for (const std::string& path : bundled_topologies_with(world)) {
    const std::string stem = path.substr(path.rfind('/') + 1, path.size() - path.rfind('/') - 6);
    topologies.emplace_back(stem, [path] { return load_topology(path); });
  }
  for (const uint32_t seed : {11u, 23u}) {
    topologies.emplace_back(fmt::format("random{}", seed), [world, seed] { return random_tree(world, seed); });
  }
  const size_t bundled = topologies.size() - 2;
  std::vector<std::string> algorithms;
  for (const auto& row : algorithm_table()) {
    algorithms.emplace_back(row.name);
    if (row.pipelines) algorithms.push_back(std::string(row.name) + "@3");
  }
  for (const std::string& algorithm : algorithms) {
    const AlgorithmRow& row = *find_algorithm(algorithm).row;
    const bool pipelined = algorithm.find('@') != std::string::npos;
    for (size_t t = 0; t < topologies.size(); ++t) {
      const auto& [name, make_topology] = topologies[t];
      // Only where the algorithm applies (torus-2d needs a grid of machines). Pipelined variants
      // only slice the plain one's ranges: the random trees check them. The 40 MB count runs for
      // the two schedules users run most (flexreduce, ring) in jobs of up to 8 ranks; every
      // algorithm already moves a 4 MB count through many chunks, and the 40 MB count for all of
      // them was about half of the job's time (93 s at 8 ranks on 2 cores).
      if (row.unsuitable && !row.unsuitable(make_topology()).empty()) continue;
      if (pipelined && t < bundled) continue;
      cases.push_back({fmt::format("{}_{}", algorithm, name),
                       [make_topology = make_topology, algorithm] {
                         return plan_for(make_topology(), algorithm);
                       },
                       !pipelined && t == 0 && world <= 8 &&
                           (algorithm == "flexreduce" || algorithm == "ring")});
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

// Algorithms with star ops (a root combining several members' chunks at once, a root sending to
// several members), plain and pipelined: every type and reduction, in and out of place.
const char* const kStarAlgorithms[] = {"rd-leader", "flexreduce-bw", "flexreduce-bw@4"};

void star_algorithms_all_types_all_ops() {
  for (const char* algorithm : kStarAlgorithms) {
    Communicator comm(plan_for(random_tree(world_size(), 7), algorithm), MPI_COMM_WORLD);
    uint64_t salt = 200;
    for (const DataType type : kAllDataTypes) {
      for (const ReduceOp op : kAllReduceOps) {
        for (size_t i = 0; const size_t count : {size_t{7}, size_t{4099}}) {
          const bool in_place = i++ % 2 == 1;
          std::string detail;
          EXPECT_EQ(allreduce_and_check(comm, count, type, op, in_place, salt++, &detail), 0u)
              << algorithm << " " << to_string(type) << " " << to_string(op) << ", count " << count
              << (in_place ? " in place: " : " out of place: ") << detail;
        }
      }
    }
  }
}

// A star root combines its members' data in group order, not in the order it arrives: the same
// float inputs give the same bits however the ranks' timing differs (each run delays a
// different rank).
void star_results_repeat_bit_for_bit() {
  for (const char* algorithm : kStarAlgorithms) {
    Options options = Options::from_env();
    options.chunk_bytes = 4096;  // several chunks per range, so arrivals interleave
    Communicator comm(plan_for(random_tree(world_size(), 7), algorithm), MPI_COMM_WORLD, options);
    const size_t count = 20011;
    std::vector<float> first;
    uint64_t differing = 0;
    for (int run = 0; run < 4; ++run) {
      std::vector<float> data(count);
      fill_input(data.data(), count, DataType::Float32, ReduceOp::Sum, comm.rank(), 300);
      if (comm.rank() == run % comm.size()) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      comm.allreduce(data.data(), data.data(), count, DataType::Float32, ReduceOp::Sum);
      if (run == 0) {
        first = data;
      } else {
        differing += std::memcmp(first.data(), data.data(), count * sizeof(float)) != 0;
      }
    }
    EXPECT_EQ(sum_over_ranks(differing), 0u) << algorithm << ": results differ between runs";
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

// The runtime reuses the storage of a finished operation for the next one (docs/runtime.md,
// The cost of one operation). Back-to-back operations switch schedules (different steps,
// tasks, chunk counts and windows), counts (empty, one element, many chunks), types and in or
// out of place, with a nonblocking operation held open now and then so that the next cannot
// reuse it: every result must still be exact.
void reused_operations_switch_shapes() {
  PlanOptions plan_options;
  plan_options.algorithms = {"ring", "recursive-doubling", "rabenseifner", "flexreduce-bw@4", "rd-leader"};
  ir::Plan plan = build_plan(random_tree(world_size(), 29), plan_options);
  Options options = Options::from_env();
  options.chunk_bytes = 4096;
  options.window = 3;
  Communicator comm(std::move(plan), MPI_COMM_WORLD, options);
  std::vector<std::string> algorithms{""};  // the plan's own choice first
  for (const ir::Schedule& schedule : comm.plan().schedules) algorithms.push_back(schedule.algorithm);
  const std::array<std::tuple<size_t, DataType, ReduceOp>, 6> shapes{{
      {300001, DataType::Int32, ReduceOp::Sum},
      {1, DataType::Float64, ReduceOp::Max},
      {0, DataType::Float32, ReduceOp::Sum},
      {4099, DataType::Int64, ReduceOp::Prod},
      {7, DataType::UInt8, ReduceOp::Min},
      {65521, DataType::Float32, ReduceOp::Avg},
  }};
  uint64_t salt = 700;
  for (size_t round = 0; round < 3; ++round) {
    for (const std::string& algorithm : algorithms) {
      comm.force_algorithm(algorithm);
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto& [count, type, op] = shapes[(i + round) % shapes.size()];
        const bool in_place = (i + round) % 2 == 0;
        std::string detail;
        EXPECT_EQ(allreduce_and_check(comm, count, type, op, in_place, salt++, &detail), 0u)
            << "round " << round << ", " << (algorithm.empty() ? "plan's choice" : algorithm) << ", "
            << to_string(type) << " " << to_string(op) << ", count " << count
            << (in_place ? " in place: " : " out of place: ") << detail;
      }
      // Held open (1 to 3 at once) while the next operations start, which must then get
      // storage of their own or of another finished operation.
      const size_t held_count = 1 + round;
      std::vector<std::vector<int64_t>> held(held_count, std::vector<int64_t>(5003));
      std::vector<Request> requests;
      for (size_t h = 0; h < held_count; ++h) {
        fill_input(held[h].data(), held[h].size(), DataType::Int64, ReduceOp::Sum, comm.rank(), salt + h);
        requests.push_back(
            comm.iallreduce(held[h].data(), held[h].data(), held[h].size(), DataType::Int64, ReduceOp::Sum));
      }
      std::string detail;
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(allreduce_and_check(comm, 1009, DataType::Int32, ReduceOp::Sum, k == 0, salt + 10 + k, &detail), 0u)
            << "while " << held_count << " operations are held open, " << algorithm << ": " << detail;
      }
      for (size_t h = held_count; h-- > 0;) {
        requests[h].wait();
        EXPECT_EQ(verify_everywhere(held[h].data(), held[h].size(), DataType::Int64, ReduceOp::Sum, salt + h, &detail), 0u)
            << "operation " << h << " held open, " << algorithm << ": " << detail;
      }
      salt += 12;
    }
  }
}

// Two schedules of units 2 in which rank 0 receives its step-1 data from rank 1 under the
// same tag fields (same step, same place among rank 0's receives, chunk 0). In "held", rank 1
// sends it only after a chain through ranks 2, 3, ... has reached it; in "quick", at once.
// The rest differs, and both compute the all-reduce.
ir::Plan held_and_quick_plan(int world) {
  ir::Plan plan;
  plan.world_size = world;
  plan.topology_name = "held-and-quick";
  std::vector<int32_t> rest;  // ranks 2, 3, ...
  for (int r = 2; r < world; ++r) rest.push_back(r);
  auto with = [](std::vector<int32_t> front, const std::vector<int32_t>& middle, std::vector<int32_t> back) {
    front.insert(front.end(), middle.begin(), middle.end());
    front.insert(front.end(), back.begin(), back.end());
    return front;
  };
  const auto reduce = ir::OpKind::Reduce;
  const auto broadcast = ir::OpKind::Broadcast;
  ir::Schedule held;
  held.algorithm = "held";
  held.units = 2;
  held.max_bytes = uint64_t{1} << 40;
  held.steps.resize(2);
  held.steps.edit()[0].ops.push_back({reduce, 0, 2, 1, with({0}, rest, {1})});  // 0 -> 2 -> ... -> 1
  held.steps.edit()[1].ops.push_back({broadcast, 0, 1, 1, with({0}, rest, {})});  // 1 -> 0 -> 2 -> ...
  held.steps.edit()[1].ops.push_back({broadcast, 1, 2, 1, with({0}, rest, {})});
  ir::Schedule quick;
  quick.algorithm = "quick";
  quick.units = 2;
  quick.min_bytes = uint64_t{1} << 40;
  quick.steps.resize(4);
  quick.steps.edit()[0].ops.push_back({reduce, 0, 1, 1, {0, 1}});  // 0 -> 1
  quick.steps.edit()[0].ops.push_back({reduce, 1, 2, 1, {0, 1}});
  quick.steps.edit()[1].ops.push_back({broadcast, 0, 1, 1, {0}});  // 1 -> 0: rank 0 holds 0 + 1
  quick.steps.edit()[1].ops.push_back({broadcast, 1, 2, 1, {0}});
  quick.steps.edit()[2].ops.push_back({reduce, 0, 2, 0, with({}, rest, {0})});  // 2 -> ... -> 0
  quick.steps.edit()[3].ops.push_back({broadcast, 0, 2, 0, with({1}, rest, {})});
  plan.schedules = {held, quick};
  return plan;
}

// Operation A stays open on ranks 0 and 1 while rank 2 is away; meanwhile every rank issues a
// full turn of the tag's sequence numbers, so operation B gets A's sequence number modulo the
// wrap. B's step-1 data then reaches rank 0 first, where A's receive with B's tag would take it
// unless the runtime keeps sequence numbers of operations in flight apart.
void sequence_wraps_with_an_operation_held_open() {
  Communicator comm(held_and_quick_plan(world_size()), MPI_COMM_WORLD);
  const size_t count = 1000;
  std::vector<int32_t> a_data(count), b_data(count);
  fill_input(a_data.data(), count, DataType::Int32, ReduceOp::Sum, comm.rank(), 990);
  fill_input(b_data.data(), count, DataType::Int32, ReduceOp::Sum, comm.rank(), 991);
  if (comm.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  comm.force_algorithm("held");
  Request a = comm.iallreduce(a_data.data(), a_data.data(), count, DataType::Int32, ReduceOp::Sum);
  comm.force_algorithm("quick");
  std::vector<Request> between;
  for (uint64_t i = 1; i < (uint64_t{1} << tag::kSequenceBits); ++i) {
    between.push_back(comm.iallreduce(nullptr, nullptr, 0, DataType::Int32, ReduceOp::Sum));
  }
  Request b = comm.iallreduce(b_data.data(), b_data.data(), count, DataType::Int32, ReduceOp::Sum);
  b.wait();
  a.wait();
  for (Request& request : between) request.wait();
  std::string detail;
  EXPECT_EQ(verify_everywhere(a_data.data(), count, DataType::Int32, ReduceOp::Sum, 990, &detail), 0u)
      << "operation A: " << detail;
  EXPECT_EQ(verify_everywhere(b_data.data(), count, DataType::Int32, ReduceOp::Sum, 991, &detail), 0u)
      << "operation B: " << detail;
}

// More ops in one step (70,000) and more steps (4,102 and more) than the runtime's tags once
// numbered: rank 1 sends every unit to rank 0 as an op of its own, the other ranks add theirs
// in one chain, rank 0 broadcasts the total, then broadcasts unit 0 to rank 1 again and again.
// A verified plan must run whatever its size.
ir::Plan wide_and_deep_plan(int world) {
  constexpr uint64_t kUnits = 70000;
  constexpr int kRepeats = 4100;
  ir::Plan plan;
  plan.world_size = world;
  plan.topology_name = "wide-and-deep";
  ir::Schedule schedule;
  schedule.algorithm = "wide-and-deep";
  schedule.units = kUnits;
  ir::Step wide;
  for (uint64_t u = 0; u < kUnits; ++u) wide.ops.push_back({ir::OpKind::Reduce, u, u + 1, 0, {1, 0}});
  schedule.steps.push_back(wide);
  std::vector<int32_t> rest;  // ranks 2, 3, ... then 0
  for (int r = 2; r < world; ++r) rest.push_back(r);
  if (!rest.empty()) {
    rest.push_back(0);
    schedule.steps.push_back({ir::Phase::Reduce, 0, {{ir::OpKind::Reduce, 0, kUnits, 0, rest}}});
  }
  std::vector<int32_t> all_but_root;
  for (int r = 1; r < world; ++r) all_but_root.push_back(r);
  schedule.steps.push_back({ir::Phase::Broadcast, 0, {{ir::OpKind::Broadcast, 0, kUnits, 0, all_but_root}}});
  for (int i = 0; i < kRepeats; ++i) {
    schedule.steps.push_back({ir::Phase::Broadcast, 0, {{ir::OpKind::Broadcast, 0, 1, 0, {1}}}});
  }
  plan.schedules.push_back(schedule);
  return plan;
}

void plans_beyond_the_old_tag_fields_run() {
  Communicator comm(wide_and_deep_plan(world_size()), MPI_COMM_WORLD);
  std::string detail;
  for (const size_t count : {size_t{70000}, size_t{1009}}) {
    EXPECT_EQ(allreduce_and_check(comm, count, DataType::Int32, ReduceOp::Sum, false, 940 + count, &detail), 0u)
        << "count " << count << ": " << detail;
  }
}

void small_chunks_small_window() {
  Options options = Options::from_env();
  options.chunk_bytes = 256;  // 64 int32 per chunk: a 10007-element range spans many chunks
  options.window = 2;
  Communicator comm(random_flexreduce_plan(world_size()), MPI_COMM_WORLD, options);
  std::string detail;
  EXPECT_EQ(allreduce_and_check(comm, 10007, DataType::Int32, ReduceOp::Sum, true, 950, &detail), 0u) << detail;
  EXPECT_EQ(allreduce_and_check(comm, 10007, DataType::Float16, ReduceOp::Max, false, 951, &detail), 0u) << detail;
  options.chunk_bytes = 1;  // degenerate: one element per chunk
  Communicator tiny(random_flexreduce_plan(world_size()), MPI_COMM_WORLD, options);
  EXPECT_EQ(allreduce_and_check(tiny, 301, DataType::Int64, ReduceOp::Sum, true, 952, &detail), 0u) << detail;
  // Chunks keep their size however long the range (hundreds of 1 KiB chunks per range here),
  // with the default window.
  options = Options::from_env();
  options.chunk_bytes = 1024;
  Communicator many(random_flexreduce_plan(world_size()), MPI_COMM_WORLD, options);
  EXPECT_EQ(allreduce_and_check(many, 100003, DataType::Float32, ReduceOp::Max, false, 953, &detail), 0u) << detail;
  // Star roots with several chunks in flight from every member, and a window of one.
  options.chunk_bytes = 256;
  for (const unsigned window : {2u, 1u}) {
    options.window = window;
    Communicator stars(plan_for(random_tree(world_size(), 7), "rd-leader"), MPI_COMM_WORLD, options);
    EXPECT_EQ(allreduce_and_check(stars, 10007, DataType::Int32, ReduceOp::Sum, true, 954 + window, &detail), 0u)
        << "rd-leader, window " << window << ": " << detail;
  }
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
  add_test("Types", "StarAlgorithmsAllTypesAllOps", star_algorithms_all_types_all_ops);
  add_test("Stars", "ResultsRepeatBitForBit", star_results_repeat_bit_for_bit);
  add_test("Nonblocking", "SeveralOutstanding", several_outstanding);
  add_test("Reuse", "OperationsSwitchSchedulesAndShapes", reused_operations_switch_shapes);
  if (world_size() >= 3) {
    add_test("Nonblocking", "SequenceWrapsWithAnOperationHeldOpen", sequence_wraps_with_an_operation_held_open);
  }
  add_test("Pipelining", "SmallChunksSmallWindow", small_chunks_small_window);
  add_test("Limits", "PlansBeyondTheOldTagFieldsRun", plans_beyond_the_old_tag_fields_run);
  add_test("Steps", "StagedWritesKeepStepStartSemantics", staged_writes);
  add_test("RankMapping", "ByLearnerName", mapping_by_learner_name);
  add_test("RankMapping", "ByHostAndLocalRank", mapping_by_host);
}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_tests);
}
