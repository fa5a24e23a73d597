// Multi-process tests of generated programs: rank 0 runs `flexplan codegen --target cpp` on a
// plan and builds the library; every rank then runs each operation twice, once with a
// communicator that lowers the plan itself and once with one that loads the library, on the same
// inputs, and the results must be bit-identical for every type and reduction, in place and out of
// place, for every algorithm of the plan. A library generated for another plan is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "ir/plan_binary.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/plan_builder.hpp"
#include "runtime/communicator.hpp"
#include "tests/mpi/test_support.hpp"

namespace flexplan::mpitest {
namespace {

// A scratch folder named by rank 0 and shared by the job's ranks (all on this host).
std::string job_folder() {
  static std::string folder;
  if (folder.empty()) {
    char name[256] = {};
    if (world_rank() == 0) {
      std::string pattern = (std::filesystem::temp_directory_path() / "flexplan-generated-XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) pattern.clear();
      std::snprintf(name, sizeof name, "%s", pattern.c_str());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    folder = name;
  }
  return folder;
}

// Rank 0 writes the plan, generates its code and builds it; every rank gets the library's path,
// or an empty string (and a test failure) when that failed.
std::string build_library(const ir::Plan& plan, const std::string& name) {
  const std::string dir = job_folder() + "/" + name;
  const std::string library = dir + "/libplan.so";
  int ok = 0;
  if (world_rank() == 0 && !job_folder().empty()) {
    std::filesystem::create_directories(dir);
    ir::write_plan_file(dir + "/plan.bin", plan);
    const std::string generate = fmt::format("'{}' codegen '{}/plan.bin' --target cpp -o '{}/gen' > '{}/log' 2>&1",
                                             FLEXPLAN_BINARY, dir, dir, dir);
    const std::string compile = fmt::format("'{}' -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -o '{}' '{}'/gen/*.cpp >> '{}/log' 2>&1",
                                            FLEXPLAN_CXX, library, dir, dir);
    ok = std::system(generate.c_str()) == 0 && std::system(compile.c_str()) == 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  EXPECT_TRUE(ok) << "generating or building " << library << " failed (see " << dir << "/log)";
  return ok ? library : "";
}

// Every algorithm the planner has, each serving some message sizes, on a random tree.
ir::Plan every_algorithm_plan(int world, uint32_t seed) {
  const Topology topo = random_tree(world, seed);
  ir::Plan plan;
  plan.world_size = world;
  plan.topology_name = topo.name();
  plan.topology_hash = topo.hash_hex();
  for (const AlgorithmRow& row : algorithm_table()) {
    if (row.unsuitable && !row.unsuitable(topo).empty()) continue;
    const std::string name(row.name);
    ir::Schedule schedule = plan_for(topo, name).schedules.at(0);
    schedule.min_bytes = plan.schedules.size() * 1000;
    schedule.max_bytes = (plan.schedules.size() + 1) * 1000;
    plan.schedules.push_back(std::move(schedule));
  }
  plan.schedules.back().max_bytes.reset();
  plan.rank_names = plan_for(topo, "ring").rank_names;
  return plan;
}

// Runs (count, type, op) on both communicators with the same inputs; mismatching bytes summed
// over all ranks.
uint64_t compare(Communicator& lowered, Communicator& generated, size_t count, DataType type, ReduceOp op,
                 bool in_place, uint64_t salt) {
  const size_t bytes = count * size_of(type);
  std::vector<std::byte> input(bytes), a(bytes), b(bytes);
  fill_input(input.data(), count, type, op, lowered.rank(), salt);
  std::memcpy(a.data(), input.data(), bytes);
  std::memcpy(b.data(), input.data(), bytes);
  lowered.allreduce(in_place ? a.data() : input.data(), a.data(), count, type, op);
  generated.allreduce(in_place ? b.data() : input.data(), b.data(), count, type, op);
  uint64_t mismatches = 0;
  for (size_t i = 0; i < bytes; ++i) mismatches += a[i] != b[i];
  return sum_over_ranks(mismatches);
}

void bit_identical_for_every_type_and_op() {
  const ir::Plan plan = every_algorithm_plan(world_size(), 31);
  const std::string library = build_library(plan, "every-algorithm");
  if (library.empty()) return;
  Options options = Options::from_env();
  Communicator lowered(plan, MPI_COMM_WORLD, options);
  options.program_library = library;
  Communicator generated(plan, MPI_COMM_WORLD, options);
  uint64_t salt = 7000;
  for (const auto& schedule : plan.schedules) {
    lowered.force_algorithm(schedule.algorithm);
    generated.force_algorithm(schedule.algorithm);
    for (const DataType type : kAllDataTypes)
      for (const ReduceOp op : kAllReduceOps)
        for (size_t i = 0; const size_t count : {size_t{1}, size_t{13}, size_t{4099}}) {
          const bool in_place = i++ % 2 == 0;
          EXPECT_EQ(compare(lowered, generated, count, type, op, in_place, salt++), 0u)
              << schedule.algorithm << " " << to_string(type) << " " << to_string(op) << " count " << count
              << (in_place ? " in place" : " out of place");
        }
    // Ranges over many chunks.
    EXPECT_EQ(compare(lowered, generated, 1000003, DataType::Float32, ReduceOp::Sum, false, salt++), 0u)
        << schedule.algorithm << " float32 sum, 1000003";
  }
  // The plan's own choice by size, and a result that is the all-reduce, not only equal.
  lowered.force_algorithm("");
  generated.force_algorithm("");
  std::string detail;
  EXPECT_EQ(allreduce_and_check(generated, 65521, DataType::Int32, ReduceOp::Sum, true, salt++, &detail), 0u) << detail;
}

void library_of_another_plan_is_refused() {
  const ir::Plan plan = every_algorithm_plan(world_size(), 31);
  const ir::Plan other = plan_for(random_tree(world_size(), 32), "flexreduce");
  const std::string library = build_library(other, "another-plan");
  if (library.empty()) return;
  Options options = Options::from_env();
  options.program_library = library;
  try {
    Communicator comm(plan, MPI_COMM_WORLD, options);
    ADD_FAILURE() << "a library generated for another plan was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("generated for another plan"), std::string::npos) << e.what();
  }
  options.program_library = job_folder() + "/no-such-library.so";
  EXPECT_THROW(Communicator(plan, MPI_COMM_WORLD, options), RuntimeError);
}

template <typename F>
void add_test(const char* suite, const char* name, F body) {
  class Body : public testing::Test {
   public:
    explicit Body(F f) : f_(std::move(f)) {}
    void TestBody() override { f_(); }

   private:
    F f_;
  };
  testing::RegisterTest(suite, name, nullptr, nullptr, __FILE__, __LINE__,
                        [body]() -> testing::Test* { return new Body(body); });
}

// Rank 0 removes the job's folder when the tests are done.
class RemoveJobFolder : public testing::Environment {
 public:
  void TearDown() override {
    if (world_rank() == 0 && !job_folder().empty()) std::filesystem::remove_all(job_folder());
  }
};

void register_tests() {
  testing::AddGlobalTestEnvironment(new RemoveJobFolder);
  add_test("Generated", "BitIdenticalToTheLoweringForEveryTypeAndOp", bit_identical_for_every_type_and_op);
  add_test("Generated", "LibraryOfAnotherPlanIsRefused", library_of_another_plan_is_refused);
}

}  // namespace
}  // namespace flexplan::mpitest

int main(int argc, char** argv) {
  return flexplan::mpitest::run_all_tests(argc, argv, flexplan::mpitest::register_tests);
}
