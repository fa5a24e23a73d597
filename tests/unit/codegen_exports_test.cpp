// Exports that always work: `flexplan codegen --target msccl-xml` exits 0 on the default plan of
// bundled topologies and random trees, every file it writes loads under the executors' rules and
// computes its collective on host buffers, and a pipeline beyond the executors' limits is
// exported as the deepest variant of it that fits (export_fitting).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/msccl.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "planner/plan_builder.hpp"
#include "tests/unit/cli_run.hpp"
#include "tests/unit/planner_test_trees.hpp"
#include "topology/topology_writer.hpp"

namespace flexplan::testing {
namespace {

using codegen::msccl::DoesNotFit;
using codegen::msccl::ExportOptions;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Exports : public ScratchDirTest {
 protected:
  // Plans `topology` (a JSON file) with the plan command's defaults and exports it; expects exit
  // 0 and, for every schedule but broadcast and reduce, one file that loads and computes its
  // collective. Returns how
  // many schedules were exported as a shallower pipeline than planned or as another schedule.
  size_t plan_and_export(const std::string& topology, const std::string& name) {
    const std::string plan = path(name + ".bin"), dir = path(name + "-xml");
    const CliRun planned = run_flexplan("'" + topology + "' -o '" + plan + "'");
    EXPECT_EQ(planned.exit_code, 0) << name << ": " << planned.output;
    if (planned.exit_code != 0) return 0;
    const CliRun exported = run_flexplan("codegen '" + plan + "' --target msccl-xml -o '" + dir + "'");
    EXPECT_EQ(exported.exit_code, 0) << name << ": " << exported.output;
    const ir::Plan loaded = ir::read_plan_file(plan);
    std::map<size_t, std::string> files;  // schedule -> file
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      files[std::stoul(entry.path().filename().string())] = entry.path().string();
    // Broadcast and reduce (rooted) are left out with a note: the format has no root.
    const auto rooted = std::count_if(loaded.schedules.begin(), loaded.schedules.end(),
                                      [](const ir::Schedule& s) { return ir::has_root(s.collective); });
    EXPECT_GT(rooted, 0) << name << ": the plan command's default plan holds broadcast and reduce";
    EXPECT_EQ(files.size() + static_cast<size_t>(rooted), loaded.schedules.size()) << name << ": " << exported.output;
    for (const auto& [index, file] : files) {
      SCOPED_TRACE(file);
      EXPECT_LT(index, loaded.schedules.size());
      const auto algorithm = codegen::msccl::parse_xml(read_text(file));
      EXPECT_NO_THROW(codegen::msccl::check_loadable(algorithm));
      EXPECT_EQ(codegen::msccl::simulate(algorithm), "");
      EXPECT_EQ(algorithm.world, loaded.world_size);
    }
    size_t shallower = 0;
    for (size_t at = 0; (at = exported.output.find("flexplan: note: schedule ", at)) != std::string::npos; ++at)
      ++shallower;
    return shallower;
  }
};

// Every bundled topology but four: asym-3level-a, asym-3level-b and cloud-16x8-25gbe (51, 34
// and 128 ranks) take 12-27 s each to export on a shared 2-core machine, and large-10k (10072
// ranks, more than the 1024 gpus the executors' reader holds) is refused, exit 3;
// bench/codegen/msccl_sweep.sh runs all of them (docs/codegen.md, "Every plan exports").
TEST_F(Exports, BundledTopologiesExport) {
  const std::filesystem::path dir = std::filesystem::path(FLEXPLAN_SOURCE_DIR) / "topologies";
  const std::vector<std::string> in_the_bench{"asym-3level-a", "asym-3level-b", "cloud-16x8-25gbe", "large-10k"};
  size_t topologies = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    if (std::find(in_the_bench.begin(), in_the_bench.end(), entry.path().stem().string()) != in_the_bench.end())
      continue;
    const auto start = std::chrono::steady_clock::now();
    const size_t shallower = plan_and_export(entry.path().string(), entry.path().stem().string());
    std::printf("%s: %zu schedule(s) exported shallower or as another, %.2f s\n", entry.path().stem().c_str(),
                shallower, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    ++topologies;
  }
  EXPECT_GE(topologies, 11u);
}

// Random trees of up to 40 learners: FLEXPLAN_EXPORT_TREES of them (default 4; the sweep over 20
// is bench/codegen/msccl_sweep.sh), of at least FLEXPLAN_EXPORT_MIN_LEARNERS learners (default
// 2: every tree drawn), each one's size and time printed.
TEST_F(Exports, RandomTreesExport) {
  const char* count = std::getenv("FLEXPLAN_EXPORT_TREES");
  const char* least = std::getenv("FLEXPLAN_EXPORT_MIN_LEARNERS");
  const int trees_wanted = count ? std::atoi(count) : 4;
  const int min_learners = least ? std::atoi(least) : 2;
  RandomTrees trees(4141);
  for (int i = 0; i < trees_wanted; ++i) {
    Topology topo = trees.next(40);
    for (int draws = 0; topo.num_learners() < min_learners && draws < 10000; ++draws) topo = trees.next(40);
    const std::string file = path("tree" + std::to_string(i) + ".json");
    std::ofstream(file) << topology_to_json(topo);
    const auto start = std::chrono::steady_clock::now();
    const size_t shallower = plan_and_export(file, "tree" + std::to_string(i));
    std::printf("tree %d: %d learners, %zu schedule(s) exported shallower or as another, %.2f s\n", i,
                topo.num_learners(), shallower,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

// A pipeline beyond the limits is exported as the deepest of its variants that fits: the planned
// one and the next deeper are refused, the one exported loads and runs; a base that does not fit
// is refused, naming the variants tried.
TEST_F(Exports, DeepestPipelineThatFits) {
  const Topology topo = machines({3, 4, 2});
  PlanOptions options;
  options.algorithms = {"flexreduce@64"};
  options.compact_pipelines = true;
  const ir::Plan compact = build_plan(topo, options);
  ASSERT_EQ(compact.schedules.size(), 1u);
  ASSERT_EQ(compact.schedules[0].slices, 64u);
  const ir::Plan whole = ir::materialize(compact);
  const auto pipeline = ir::pipeline_base(whole.schedules[0]);
  ASSERT_TRUE(pipeline);

  ExportOptions tight;
  tight.limits.steps_per_threadblock = 24;
  tight.limits.channels = 2;
  EXPECT_THROW(codegen::msccl::export_schedule(whole, 0, tight), DoesNotFit);
  for (const ir::Plan* plan : {&compact, &whole}) {
    const auto fitted = codegen::msccl::export_fitting(*plan, 0, tight);
    EXPECT_EQ(fitted.planned, "flexreduce@64");
    EXPECT_EQ(fitted.planned_slices, 64u);
    ASSERT_GT(fitted.slices, 1u);
    ASSERT_LT(fitted.slices, 64u);
    EXPECT_EQ(fitted.algorithm, "flexreduce@" + std::to_string(fitted.slices));
    EXPECT_NE(fitted.why.find("flexreduce@64"), std::string::npos) << fitted.why;
    EXPECT_NE(fitted.why.find("at most 24 per threadblock"), std::string::npos) << fitted.why;
    ASSERT_FALSE(fitted.too_deep.empty());
    EXPECT_EQ(fitted.too_deep.front(), "flexreduce@64");
    EXPECT_EQ(fitted.too_deep.back(), "flexreduce@" + std::to_string(fitted.slices + 1));
    // The next deeper variant does not fit; the one exported does, and computes the all-reduce.
    ir::Plan deeper = whole;
    deeper.schedules[0] = ir::materialize(ir::compact_pipeline(pipeline->base, fitted.slices + 1));
    EXPECT_THROW(codegen::msccl::export_schedule(deeper, 0, tight), DoesNotFit);
    const auto& algorithm = fitted.exported.algorithm;
    EXPECT_NO_THROW(codegen::msccl::check_loadable(codegen::msccl::parse_xml(codegen::msccl::to_xml(algorithm)),
                                                   tight.limits));
    EXPECT_EQ(codegen::msccl::simulate_allreduce(algorithm), "");
    EXPECT_EQ(algorithm.min_bytes, static_cast<int64_t>(whole.schedules[0].min_bytes));
    for (const auto& gpu : algorithm.gpus)
      for (const auto& tb : gpu.threadblocks) EXPECT_LE(tb.steps.size(), 24u);
  }
  // As planned where it fits.
  const auto roomy = codegen::msccl::export_fitting(compact, 0);
  EXPECT_EQ(roomy.slices, 64u);
  EXPECT_EQ(roomy.algorithm, "flexreduce@64");
  EXPECT_TRUE(roomy.why.empty());
  EXPECT_TRUE(roomy.too_deep.empty());

  // Not even the base fits: refused with the base's reason and the variants tried.
  ExportOptions none = tight;
  none.limits.steps_per_threadblock = 2;
  none.limits.channels = 1;
  try {
    codegen::msccl::export_fitting(compact, 0, none);
    ADD_FAILURE() << "exported under 2 steps per threadblock";
  } catch (const DoesNotFit& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("schedule 0 (flexreduce): cannot fit"), std::string::npos) << what;
    EXPECT_NE(what.find("nor does any pipeline of it: flexreduce@64, flexreduce@32"), std::string::npos) << what;
  }
}

// A star of more members than the executors connect on one channel (the direct exchange among
// 40 learners: 39 peers, at most 32) fits at no slice count and over no number of channels: the
// nearest schedule of the plan that fits serves its sizes, as for any schedule that does not fit
// (topologies/asym-3level-a.json's default plan has such a `direct` below 17 B).
TEST_F(Exports, AStarBeyondThePeerLimitIsServedByTheNearestSchedule) {
  const Topology topo = machines({40});
  PlanOptions options;
  options.algorithms = {"direct", "ring"};
  const ir::Plan plan = build_plan(topo, options);
  ASSERT_EQ(plan.schedules.size(), 2u);
  ASSERT_EQ(plan.schedules[0].algorithm, "direct");
  EXPECT_THROW(codegen::msccl::export_schedule(plan, 0), DoesNotFit);
  const auto exports = codegen::msccl::export_plan(plan, ExportOptions{});
  ASSERT_EQ(exports.size(), 2u);
  ASSERT_TRUE(exports[0].fitted) << exports[0].refused;
  EXPECT_EQ(exports[0].source, 1u);
  EXPECT_NE(exports[0].substituted_because.find("39 members on one channel"), std::string::npos)
      << exports[0].substituted_because;
  const auto& algorithm = exports[0].fitted->exported.algorithm;
  EXPECT_EQ(algorithm.min_bytes, 0);
  EXPECT_EQ(algorithm.max_bytes, static_cast<int64_t>(*plan.schedules[0].max_bytes - 1));
  EXPECT_EQ(codegen::msccl::simulate_allreduce(algorithm), "");
}

// Through the command: the note on stderr names the planned and the exported variant, exit 0;
// a schedule with no variant that fits exits 3.
TEST_F(Exports, CommandSaysWhichVariantItExported) {
  PlanOptions options;
  options.algorithms = {"flexreduce@64"};
  const std::string plan = path("deep.bin");
  ir::write_plan_file(plan, build_plan(machines({3, 4, 2}), options));
  const CliRun run =
      run_flexplan("codegen '" + plan + "' --target msccl-xml --max-steps 24 --max-channels 2 -o '" + path("x") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("flexplan: note: schedule 0 (flexreduce@64) exported as flexreduce@"), std::string::npos)
      << run.output;
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path("x"))) {
    ++files;
    EXPECT_EQ(entry.path().filename().string().rfind("0-flexreduce@", 0), 0u) << entry.path();
    codegen::msccl::Limits limits;
    limits.steps_per_threadblock = 24;
    limits.channels = 2;
    const auto algorithm = codegen::msccl::parse_xml(read_text(entry.path().string()));
    EXPECT_NO_THROW(codegen::msccl::check_loadable(algorithm, limits));
    EXPECT_EQ(codegen::msccl::simulate_allreduce(algorithm), "");
  }
  EXPECT_EQ(files, 1u);
  const CliRun refused =
      run_flexplan("codegen '" + plan + "' --target msccl-xml --max-steps 2 --max-channels 1 -o '" + path("y") + "'");
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_NE(refused.output.find("flexplan: refused: schedule 0 (flexreduce): cannot fit"), std::string::npos)
      << refused.output;
}

}  // namespace
}  // namespace flexplan::testing
