// `flexplan codegen`: generated C++ compiles into a library whose programs equal the lowering for
// every rank and schedule, of every collective; MSCCL files, the trace and the diagram come out
// right for every collective (MSCCL refusing broadcast and reduce, saying why); malformed input
// exits 2 with the reason.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "codegen/cpp_codegen.hpp"
#include "codegen/lowering.hpp"
#include "codegen/pictures.hpp"
#include "codegen/msccl.hpp"
#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/plan_builder.hpp"
#include "tests/unit/cli_run.hpp"
#include "tests/unit/planner_test_trees.hpp"

namespace flexplan::testing {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kTopology = std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/two-machines-2+3.json";

class CodegenCli : public ScratchDirTest {
 protected:
  std::string plan_file(const Topology& topo, std::vector<std::string> algorithms = {}) {
    PlanOptions options;
    options.algorithms = std::move(algorithms);
    const std::string file = path("plan.bin");
    ir::write_plan_file(file, build_plan(topo, options));
    return file;
  }
  // A plan of every collective, broadcast and reduce for `roots`.
  std::string every_collective_plan(const Topology& topo, std::vector<int32_t> roots, const std::string& name) {
    PlanOptions options;
    options.collectives = {ir::Collective::AllReduce, ir::Collective::ReduceScatter, ir::Collective::AllGather,
                           ir::Collective::Broadcast, ir::Collective::Reduce};
    options.roots = std::move(roots);
    const std::string file = path(name);
    ir::write_plan_file(file, build_plan(topo, options));
    return file;
  }
};

TEST_F(CodegenCli, HelpAndMalformedInput) {
  const CliRun help = run_flexplan("codegen --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--target"), std::string::npos);
  const std::string plan = plan_file(load_topology(kTopology));
  EXPECT_EQ(run_flexplan("codegen '" + plan + "' --target pdf -o x").exit_code, 2);
  EXPECT_EQ(run_flexplan("codegen '" + path("missing.bin") + "' --target dot -o x").exit_code, 2);
  const CliRun no_topology = run_flexplan("codegen '" + plan + "' --target trace -o '" + path("t.json") + "'");
  EXPECT_EQ(no_topology.exit_code, 2);
  EXPECT_NE(no_topology.output.find("needs --topology"), std::string::npos) << no_topology.output;
  const CliRun other = run_flexplan("codegen '" + plan + "' --target trace -o '" + path("t.json") + "' --topology '" +
                                    FLEXPLAN_SOURCE_DIR + "/topologies/paper-2m-5.json'");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.output.find("was made for 'two-machines-2+3'"), std::string::npos) << other.output;
  EXPECT_EQ(run_flexplan("codegen '" + plan + "' --target trace -o '" + path("t.json") + "' --topology '" + kTopology +
                         "' -b 12Q")
                .exit_code,
            2);
  // (Past the plan's last schedule: it has fewer than 99.)
  EXPECT_EQ(run_flexplan("codegen '" + plan + "' --target dot --schedule 99 -o '" + path("p.dot") + "'").exit_code, 2);
}

TEST_F(CodegenCli, TraceFollowsTheCostModel) {
  const Topology topo = load_topology(kTopology);
  const std::string plan = plan_file(topo);
  const CliRun run = run_flexplan("codegen '" + plan + "' --target trace -b 16M --schedule 0 -o '" + path("t.json") +
                                  "' --topology '" + kTopology + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto trace = nlohmann::json::parse(read_text(path("t.json")));
  const ir::Plan loaded = ir::read_plan_file(plan);
  const auto steps = evaluate_steps(topo, loaded.schedules[0]);
  const double bytes = 16 << 20;
  double step_total = 0;
  size_t rank_slices = 0;
  std::map<std::pair<int, size_t>, double> link_busy;  // (row, step) -> busy seconds
  std::vector<std::pair<double, double>> step_spans;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["pid"] == 1) {
      step_total += e["dur"].get<double>();
      step_spans.push_back({e["ts"].get<double>(), e["dur"].get<double>()});
    }
    if (e["pid"] == 2) ++rank_slices;
    if (e["pid"] == 3) link_busy[{e["tid"].get<int>(), e["args"]["step"].get<size_t>()}] += e["dur"].get<double>();
  }
  double predicted = 0;
  for (const auto& s : steps) predicted += s.at(bytes, CostParams{}.chunk_bytes);
  EXPECT_NEAR(step_total, predicted * 1e6, 1e-6 * predicted * 1e6);
  ASSERT_EQ(step_spans.size(), steps.size());
  size_t hops = 0;
  for (const auto& step : loaded.schedules[0].steps)
    for (const auto& op : step.ops) hops += op.group.size() - (op.root_in_group() ? 1 : 0);
  EXPECT_EQ(rank_slices, 2 * hops);  // each transfer on its sender's and its receiver's row
  for (size_t s = 0; s < steps.size(); ++s) {
    double busiest = 0;
    for (const auto& [key, busy] : link_busy)
      if (key.second == s) busiest = std::max(busiest, busy);
    // The busiest link's time is the step's bandwidth term.
    EXPECT_NEAR(busiest, steps[s].per_byte * bytes * 1e6, 1e-6 * busiest + 1e-9) << "step " << s;
  }
}

TEST_F(CodegenCli, DotDrawsEveryHopAndGroupsLargePlansByMachine) {
  // FlexReduce alone: one schedule whose hops are counted below.
  const std::string plan = plan_file(load_topology(kTopology), {"flexreduce"});
  ASSERT_EQ(run_flexplan("codegen '" + plan + "' --target dot -o '" + path("p.dot") + "'").exit_code, 0);
  const std::string dot = read_text(path("p.dot"));
  EXPECT_EQ(dot.find("digraph plan {"), dot.find("digraph"));
  size_t edges = 0;
  for (size_t at = 0; (at = dot.find(" -> ", at)) != std::string::npos; ++at) ++edges;
  size_t hops = 0;
  const ir::Plan loaded = ir::read_plan_file(plan);
  for (const auto& step : loaded.schedules[0].steps)
    for (const auto& op : step.ops) hops += codegen::lower_op(op).size();
  EXPECT_EQ(edges, hops);
  EXPECT_EQ(hops, 32u);  // Fig. 2: 16 reduce hops (8 within machines, 8 across) and 16 broadcast hops
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {  // Graphviz reads it (setup.sh installs it)
    EXPECT_EQ(std::system(("dot -Tsvg '" + path("p.dot") + "' -o '" + path("p.svg") + "'").c_str()), 0);
    EXPECT_NE(read_text(path("p.svg")).find("<svg"), std::string::npos);
  }
  // A ring of 32 over two machines of 16: 62 steps of 32 hops, 1984 in all, drawn as two
  // machines whose hops add up to every hop of the schedule.
  const std::string big = plan_file(machines({16, 16}), {"ring"});
  const CliRun grouped = run_flexplan("codegen '" + big + "' --target dot -o '" + path("big.dot") + "'");
  ASSERT_EQ(grouped.exit_code, 0) << grouped.output;
  const std::string machine_view = read_text(path("big.dot"));
  EXPECT_NE(machine_view.find("1984 hops in 62 steps, more than the 400 drawn one by one, so grouped by machine"),
            std::string::npos)
      << machine_view.substr(0, 400);
  size_t nodes = 0, counted = 0, across = 0;
  for (size_t at = 0; (at = machine_view.find(" [label=\"", at)) != std::string::npos; ++at) {
    const size_t line = machine_view.rfind('\n', at) + 1;
    const std::string entry = machine_view.substr(line, machine_view.find('\n', at) - line);
    if (entry.find(" -> ") == std::string::npos) {
      ++nodes;
      // "N reduce hops within" and "N broadcast hops within" in the node's label.
      for (size_t w = 0; (w = entry.find(" hops within", w)) != std::string::npos; ++w) {
        const size_t number_end = entry.rfind(' ', w - 1);
        const size_t number_begin = entry.rfind("\\n", number_end) + 2;
        counted += std::stoul(entry.substr(number_begin, number_end - number_begin));
      }
    } else {
      const size_t label = entry.find("label=\"") + 7;
      const size_t hops = std::stoul(entry.substr(label));  // "N reduce hops, X vectors"
      counted += hops;
      across += hops;
    }
  }
  EXPECT_EQ(nodes, 2u);
  EXPECT_EQ(counted, 1984u);
  // The ring crosses between the machines twice per step: 124 of its hops, both ways, both kinds.
  EXPECT_EQ(across, 124u);
  EXPECT_NE(machine_view.find("root/m0\\nranks 0-15\\n465 reduce hops within"), std::string::npos) << machine_view;
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    EXPECT_EQ(std::system(("dot -Tsvg '" + path("big.dot") + "' -o '" + path("big.svg") + "'").c_str()), 0);
    EXPECT_NE(read_text(path("big.svg")).find("<svg"), std::string::npos);
  }
}

TEST_F(CodegenCli, MscclFilesPerScheduleAndRefusals) {
  const std::string plan = plan_file(load_topology(kTopology), {"flexreduce", "ring", "hierarchical"});
  const CliRun run = run_flexplan("codegen '" + plan + "' --target msccl-xml --rccl -o '" + path("xml") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const ir::Plan loaded = ir::read_plan_file(plan);
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path("xml"))) {
    ++files;
    const auto algorithm = codegen::msccl::parse_xml(read_text(entry.path().string()));
    codegen::msccl::Limits rccl;
    rccl.rccl = true;
    EXPECT_NO_THROW(codegen::msccl::check_loadable(algorithm, rccl));
    EXPECT_EQ(codegen::msccl::simulate_allreduce(algorithm), "") << entry.path();
  }
  EXPECT_EQ(files, loaded.schedules.size());
  // A ring of 24 on one channel with 16 steps per threadblock cannot fit, and it has no
  // shallower variant: refused, exit 3.
  const std::string ring = plan_file(machines({12, 12}), {"ring"});
  const CliRun refused = run_flexplan("codegen '" + ring + "' --target msccl-xml --max-steps 16 --max-channels 1 -o '" +
                                      path("ring") + "'");
  EXPECT_EQ(refused.exit_code, 3);
  EXPECT_NE(refused.output.find("refused"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("at most 16 per threadblock"), std::string::npos) << refused.output;
}

// --format json: one document on stdout naming every file written and every refusal, the notes
// staying on stderr; the text lines are not printed.
TEST_F(CodegenCli, FormatJsonListsWhatWasWritten) {
  const std::string plan = plan_file(load_topology(kTopology), {"flexreduce", "ring", "hierarchical"});
  const ir::Plan loaded = ir::read_plan_file(plan);
  const CliRun xml = run_flexplan("codegen '" + plan + "' --target msccl-xml --format json -o '" + path("xml") + "'",
                                  "2>/dev/null");
  ASSERT_EQ(xml.exit_code, 0) << xml.output;
  const auto doc = nlohmann::json::parse(xml.output);
  EXPECT_EQ(doc["format"], "flexplan-codegen");
  EXPECT_EQ(doc["target"], "msccl-xml");
  ASSERT_EQ(doc["files"].size(), loaded.schedules.size());
  EXPECT_TRUE(doc["refused"].empty());
  for (const auto& file : doc["files"]) {
    EXPECT_TRUE(std::filesystem::exists(file["path"].get<std::string>())) << file;
    EXPECT_EQ(file["collective"], "allreduce");
    EXPECT_GT(file["chunks"].get<uint64_t>(), 0u);
  }
  // The refused ring of the test above: exit 3, and the refusal in the document.
  const std::string ring = plan_file(machines({12, 12}), {"ring"});
  const CliRun refused = run_flexplan("codegen '" + ring + "' --target msccl-xml --max-steps 16 --max-channels 1 "
                                      "--format json -o '" + path("ring") + "'",
                                      "2>/dev/null");
  EXPECT_EQ(refused.exit_code, 3);
  const auto refusal = nlohmann::json::parse(refused.output);
  EXPECT_TRUE(refusal["files"].empty());
  ASSERT_EQ(refusal["refused"].size(), 1u);
  EXPECT_NE(refusal["refused"][0]["reason"].get<std::string>().find("at most 16 per threadblock"), std::string::npos);
  const CliRun dot = run_flexplan("codegen '" + plan + "' --target dot --format json -o '" + path("p.dot") + "'",
                                  "2>/dev/null");
  ASSERT_EQ(dot.exit_code, 0) << dot.output;
  const auto drawn = nlohmann::json::parse(dot.output);
  ASSERT_EQ(drawn["files"].size(), 1u);
  EXPECT_EQ(drawn["files"][0]["path"], path("p.dot"));
  EXPECT_EQ(drawn["files"][0]["schedule"], 0);
  EXPECT_EQ(run_flexplan("codegen '" + plan + "' --target dot --format yaml -o x").exit_code, 2);
}

// Generated C++, built with this build's compiler and loaded, emits exactly the lowering.
TEST_F(CodegenCli, GeneratedCodeEmitsTheLoweredPrograms) {
  RandomTrees trees(91);
  const Topology topo = trees.next(9);
  // Every algorithm that wins a size range, then star algorithms (their roots' several sources
  // or destinations take the general form of the call).
  // The last plan holds every collective (broadcast and reduce from two roots).
  const std::vector<std::vector<std::string>> choices{{}, {"rd-leader"}, {"flexreduce-bw", "flexreduce-bw@4"}, {}};
  for (size_t c = 0; c < choices.size(); ++c) {
    SCOPED_TRACE("plan " + std::to_string(c));
    const bool every = c + 1 == choices.size();
    const std::string plan = every ? every_collective_plan(topo, {0, topo.num_learners() - 1}, "every.bin") : plan_file(topo, choices[c]);
    const std::string gen = path("gen" + std::to_string(c));
    ASSERT_EQ(run_flexplan("codegen '" + plan + "' --target cpp -o '" + gen + "'").exit_code, 0);
    const ir::Plan loaded = ir::read_plan_file(plan);
    if (every) {  // each schedule's title names its contract
      const std::string rank0 = read_text(gen + "/rank_0.cpp");
      for (const ir::Schedule& schedule : loaded.schedules)
        EXPECT_NE(rank0.find(" " + ir::describe_contract(schedule) + ", bytes"), std::string::npos)
            << ir::describe_contract(schedule);
    } else if (c > 0) {  // star roots with several members are there, in the general form
      std::string all;
      for (int32_t r = 0; r < loaded.world_size; ++r) all += read_text(gen + "/rank_" + std::to_string(r) + ".cpp");
      EXPECT_NE(all.find("_star("), std::string::npos);
    }
    const std::string library = path("libplan" + std::to_string(c) + ".so");
    const std::string build = std::string("'") + FLEXPLAN_CXX + "' -std=c++17 -O1 -shared -fPIC -fvisibility=hidden -o '" +
                              library + "' '" + gen + "'/*.cpp 2>&1";
    ASSERT_EQ(std::system(build.c_str()), 0) << build;
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle, nullptr) << dlerror();
    using Entry = const flexplan_generated_plan* (*)();
    const auto entry = reinterpret_cast<Entry>(dlsym(handle, "flexplan_generated_plan_v1"));
    ASSERT_NE(entry, nullptr);
    const flexplan_generated_plan* generated = entry();
    EXPECT_EQ(generated->abi, static_cast<uint32_t>(FLEXPLAN_PROGRAM_ABI));
    EXPECT_EQ(generated->plan_hash, ir::plan_fingerprint(loaded));
    EXPECT_EQ(generated->world_size, loaded.world_size);
    ASSERT_EQ(generated->schedules, loaded.schedules.size());
    for (uint32_t s = 0; s < generated->schedules; ++s) {
      const ir::Schedule& schedule = loaded.schedules[s];
      // The plan holds pipelines compact; the programs number the whole schedule's steps.
      const size_t steps = ir::expanded_step_count(schedule, schedule.slices);
      EXPECT_EQ(generated->schedule_steps[s], steps);
      for (int32_t r = 0; r < loaded.world_size; ++r) {
        codegen::ProgramCollector collector(steps, ir::expanded_units(schedule));
        ASSERT_EQ(generated->emit(r, s, collector.sink()), 0);
        EXPECT_EQ(collector.error(), "");
        EXPECT_TRUE(collector.take() == codegen::lower_rank_program(schedule, r)) << "rank " << r << " schedule " << s;
      }
      codegen::ProgramCollector unused(steps, ir::expanded_units(schedule));
      EXPECT_EQ(generated->emit(loaded.world_size, s, unused.sink()), -1);
    }
    dlclose(handle);
  }
}

}  // namespace
}  // namespace flexplan::testing

namespace flexplan::testing {
namespace {

// Every collective through every target: MSCCL files for all-reduce, all-gather and
// reduce-scatter (each running its contract), refusals naming the reason for broadcast and
// reduce; C++; a diagram and a trace of every schedule; the trace's -b picking by
// --collective and --root.
TEST_F(CodegenCli, EveryCollectiveThroughEveryTarget) {
  const Topology topo = load_topology(kTopology);
  const std::string plan = every_collective_plan(topo, {0, 3}, "every.bin");
  const ir::Plan loaded = ir::materialize(ir::read_plan_file(plan));
  std::map<std::string, size_t> planned;  // MSCCL's coll -> schedules
  size_t rooted = 0;
  for (const ir::Schedule& schedule : loaded.schedules) {
    const std::string name(ir::to_string(schedule.collective));
    if (ir::has_root(schedule.collective)) ++rooted;
    else ++planned[name == "reduce_scatter" ? "reducescatter" : name];
  }
  ASSERT_EQ(planned.size(), 3u);
  ASSERT_GT(rooted, 3u);

  // Broadcast and reduce are left out with one note naming each (the format has no root); the
  // rest is written, exit 0. A plan of rooted schedules alone is refused, exit 3.
  const CliRun xml = run_flexplan("codegen '" + plan + "' --target msccl-xml -o '" + path("xml") + "'");
  EXPECT_EQ(xml.exit_code, 0) << xml.output;
  EXPECT_EQ(xml.output.find("refused"), std::string::npos) << xml.output;
  size_t notes = 0;
  for (size_t at = 0; (at = xml.output.find("names no root", at)) != std::string::npos; ++at) ++notes;
  EXPECT_EQ(notes, 1u) << xml.output;
  size_t named = 0;
  for (size_t i = 0; i < loaded.schedules.size(); ++i) {
    const ir::Schedule& s = loaded.schedules[i];
    if (!ir::has_root(s.collective)) continue;
    ++named;
    EXPECT_NE(xml.output.find(fmt::format("{} ({} from root {})", i, ir::to_string(s.collective), s.root)),
              std::string::npos) << xml.output;
  }
  EXPECT_EQ(named, rooted);
  const CliRun skipped = run_flexplan("codegen '" + plan + "' --target msccl-xml --format json -o '" + path("xml-json") + "'",
                                      "2>/dev/null");
  ASSERT_EQ(skipped.exit_code, 0) << skipped.output;
  const auto document = nlohmann::json::parse(skipped.output);
  EXPECT_EQ(document["skipped"].size(), rooted);
  EXPECT_TRUE(document["refused"].empty());
  {
    PlanOptions options;
    options.collectives = {ir::Collective::Broadcast};
    options.roots = {3};
    ir::write_plan_file(path("broadcast.bin"), build_plan(topo, options));
    const CliRun alone = run_flexplan("codegen '" + path("broadcast.bin") + "' --target msccl-xml -o '" +
                                      path("xml-broadcast") + "'");
    EXPECT_EQ(alone.exit_code, 3) << alone.output;
    EXPECT_NE(alone.output.find("a broadcast from root 3: not exported"), std::string::npos) << alone.output;
  }
  EXPECT_NE(xml.output.find("allgather calls whose count per rank (sendcount)"), std::string::npos) << xml.output;
  std::map<std::string, size_t> written;
  for (const auto& entry : std::filesystem::directory_iterator(path("xml"))) {
    const auto algorithm = codegen::msccl::parse_xml(read_text(entry.path().string()));
    EXPECT_NO_THROW(codegen::msccl::check_loadable(algorithm));
    EXPECT_EQ(codegen::msccl::simulate(algorithm), "") << entry.path();
    ++written[algorithm.collective];
    // The file of schedule i carries schedule i's collective and byte range.
    const size_t index = std::stoul(entry.path().filename().string());
    ASSERT_LT(index, loaded.schedules.size());
    const ir::Schedule& schedule = loaded.schedules[index];
    EXPECT_EQ(algorithm.collective, schedule.collective == ir::Collective::ReduceScatter ? "reducescatter"
                                    : schedule.collective == ir::Collective::AllGather   ? "allgather"
                                                                                         : "allreduce");
    EXPECT_EQ(algorithm.min_bytes, static_cast<int64_t>(schedule.min_bytes));
  }
  EXPECT_EQ(written, planned);

  ASSERT_EQ(run_flexplan("codegen '" + plan + "' --target cpp -o '" + path("gen") + "'").exit_code, 0);
  const std::string rank3 = read_text(path("gen/rank_3.cpp"));
  EXPECT_NE(rank3.find("broadcast (root 3)"), std::string::npos);
  EXPECT_NE(rank3.find("allgather (equal shards)"), std::string::npos);

  for (size_t i = 0; i < loaded.schedules.size(); ++i) {
    const ir::Schedule& schedule = loaded.schedules[i];
    const std::string dot = path("s" + std::to_string(i) + ".dot");
    const CliRun drawn = run_flexplan("codegen '" + plan + "' --target dot --schedule " + std::to_string(i) + " -o '" +
                                      dot + "'");
    ASSERT_EQ(drawn.exit_code, 0) << drawn.output;
    const std::string text = read_text(dot);
    EXPECT_NE(text.find(schedule.algorithm + " " + ir::describe_contract(schedule) + " on"), std::string::npos)
        << text.substr(0, 200);
    size_t edges = 0, hops = 0;
    for (size_t at = 0; (at = text.find(" -> ", at)) != std::string::npos; ++at) ++edges;
    for (const auto& step : schedule.steps)
      for (const auto& op : step.ops) hops += codegen::lower_op(op).size();
    // Every hop drawn, or past kMaxDrawnHops (a pipeline's slices count) grouped by machine.
    hops *= schedule.slices;
    if (hops <= codegen::kMaxDrawnHops)
      EXPECT_EQ(edges, hops) << "schedule " << i;
    else
      EXPECT_NE(text.find("grouped by"), std::string::npos) << "schedule " << i << ": " << text.substr(0, 300);

    const std::string trace_file = path("s" + std::to_string(i) + ".json");
    const CliRun traced = run_flexplan("codegen '" + plan + "' --target trace -b 4M --schedule " +
                                       std::to_string(i) + " -o '" + trace_file + "' --topology '" + kTopology + "'");
    ASSERT_EQ(traced.exit_code, 0) << traced.output;
    const auto trace = nlohmann::json::parse(read_text(trace_file));
    EXPECT_EQ(trace["otherData"]["contract"], ir::describe_contract(schedule));
    double predicted = 0;
    for (const auto& s : evaluate_steps(topo, schedule)) predicted += s.at(4 << 20, CostParams{}.chunk_bytes);
    EXPECT_NEAR(trace["otherData"]["predicted_seconds"].get<double>(), predicted, 1e-9 * predicted);
  }

  // -b picks the schedule of --collective (and --root) serving that size.
  const auto traced_index = [&](const std::string& options) {
    const CliRun run = run_flexplan("codegen '" + plan + "' --target trace -b 1M " + options + " -o '" +
                                    path("pick.json") + "' --topology '" + kTopology + "'");
    EXPECT_EQ(run.exit_code, 0) << options << ": " << run.output;
    return nlohmann::json::parse(read_text(path("pick.json")))["otherData"]["schedule"].get<size_t>();
  };
  EXPECT_EQ(traced_index("--collective allgather"), *ir::find_schedule(loaded, {ir::Collective::AllGather, 1 << 20}));
  EXPECT_EQ(traced_index("--collective reduce_scatter"),
            *ir::find_schedule(loaded, {ir::Collective::ReduceScatter, 1 << 20}));
  EXPECT_EQ(traced_index("--collective broadcast --root 3"),
            *ir::find_schedule(loaded, {ir::Collective::Broadcast, 1 << 20, 3}));
  EXPECT_EQ(traced_index(""), *ir::find_schedule(loaded, {ir::Collective::AllReduce, 1 << 20}));
  const CliRun unplanned = run_flexplan("codegen '" + plan + "' --target trace --collective reduce --root 2 -o '" +
                                        path("x.json") + "' --topology '" + kTopology + "'");
  EXPECT_EQ(unplanned.exit_code, 2);
  EXPECT_NE(unplanned.output.find("no reduce root 2 schedule"), std::string::npos) << unplanned.output;
  EXPECT_NE(unplanned.output.find("reduce (root 3)"), std::string::npos) << unplanned.output;
  EXPECT_EQ(run_flexplan("codegen '" + plan + "' --target trace --collective gather -o '" + path("x.json") +
                         "' --topology '" + kTopology + "'")
                .exit_code,
            2);

  // A plan without an all-reduce: the trace takes its first schedule's collective.
  PlanOptions gather_only;
  gather_only.collectives = {ir::Collective::AllGather};
  ir::write_plan_file(path("gather.bin"), build_plan(topo, gather_only));
  const CliRun gather = run_flexplan("codegen '" + path("gather.bin") + "' --target trace -o '" + path("g.json") +
                                     "' --topology '" + kTopology + "'");
  ASSERT_EQ(gather.exit_code, 0) << gather.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(path("g.json")))["otherData"]["collective"], "allgather");
}

}  // namespace
}  // namespace flexplan::testing
