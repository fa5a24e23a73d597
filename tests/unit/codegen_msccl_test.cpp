// MSCCL export: every algorithm on every bundled topology and on random trees exports (or is
// refused with the limit it breaks), writes XML that reads back equal under the executors' reader
// rules, loads under their checks, and run on host buffers for every gpu computes the all-reduce,
// in place and out of place. Broken files are caught: races, deadlocks, wrong counts, bad syntax.
#include <gtest/gtest.h>

#include "planner_test_trees.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "codegen/msccl.hpp"
#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "planner/plan_builder.hpp"
#include "tests/unit/planner_test_trees.hpp"

namespace flexplan::codegen::msccl {
namespace {

// Every algorithm that suits the tree, with pipelined variants of 2 slices.
std::vector<std::string> algorithms_for(const Topology& topo) { return testing::algorithms_for(topo, {2}); }

ir::Plan single(const Topology& topo, const std::string& algorithm) {
  ir::Plan plan;
  plan.world_size = topo.num_learners();
  plan.topology_name = topo.name();
  plan.topology_hash = topo.hash_hex();
  plan.schedules.push_back(plan_algorithm(topo, algorithm));
  return plan;
}

// Whether a schedule has star ops (a root receiving from or sending to several members).
bool has_star_ops(const ir::Schedule& schedule) {
  for (const auto& step : schedule.steps)
    for (const auto& op : step.ops)
      if (op.shape == ir::OpShape::Star) return true;
  return false;
}

// Exports, writes, reads back, checks and runs; "" on success, "refused: ..." when the export
// refuses, else what failed.
std::string round_trip(const ir::Plan& plan, bool rccl, uint64_t chunks = 0) {
  ExportOptions options;
  options.limits.rccl = rccl;
  options.chunks = chunks;
  Export exported;
  try {
    exported = export_schedule(plan, 0, options);
  } catch (const ExportError& e) {
    return std::string("refused: ") + e.what();
  }
  const std::string xml = to_xml(exported.algorithm);
  Algorithm read;
  try {
    read = parse_xml(xml);
    check_loadable(read, options.limits);
  } catch (const FormatError& e) {
    return std::string("unreadable: ") + e.what();
  }
  if (!(read == exported.algorithm)) return "reads back different";
  return simulate_allreduce(read);
}

TEST(Msccl, PaperFig2ExportsExactlyInBothModes) {
  const Topology topo = load_topology(std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/two-machines-2+3.json");
  const ir::Plan plan = single(topo, "flexreduce");
  for (const bool rccl : {false, true}) {
    ExportOptions options;
    options.limits.rccl = rccl;
    const Export e = export_schedule(plan, 0, options);
    EXPECT_TRUE(e.chunking.exact);
    EXPECT_EQ(e.algorithm.chunks_per_loop, 12);
    EXPECT_EQ(e.algorithm.world, 5);
    EXPECT_EQ(e.algorithm.max_bytes, 0);  // unbounded
    bool any_fused = false;
    for (const Gpu& gpu : e.algorithm.gpus)
      for (const ThreadBlock& tb : gpu.threadblocks)
        for (const Step& step : tb.steps) any_fused |= fused(step.type);
    EXPECT_EQ(any_fused, !rccl);
    EXPECT_EQ(round_trip(plan, rccl), "");
  }
}

TEST(Msccl, XmlFollowsTheExecutorsReaderRules) {
  const ir::Plan plan = single(testing::machines({2, 3}), "ring");
  const std::string xml = to_xml(export_schedule(plan, 0).algorithm);
  EXPECT_EQ(xml.rfind("<algo ", 0), 0u);  // no declaration
  EXPECT_EQ(xml.find('\t'), std::string::npos);
  EXPECT_EQ(xml.find('\''), std::string::npos);
  EXPECT_NE(xml.find("coll=\"allreduce\""), std::string::npos);
  EXPECT_NE(xml.find("outofplace=\"1\""), std::string::npos);
  EXPECT_NE(xml.find("minBytes=\"0\""), std::string::npos);
  EXPECT_NE(xml.find("maxBytes=\"0\""), std::string::npos);
  size_t lines = 0;
  for (size_t at = 0; (at = xml.find('\n', at)) != std::string::npos; ++at) ++lines;
  size_t tags = 0;
  for (size_t at = 0; (at = xml.find('<', at)) != std::string::npos; ++at) ++tags;
  EXPECT_EQ(lines, tags);  // one tag per line
}

TEST(Msccl, ReaderRefusesWhatTheExecutorsRefuse) {
  const ir::Plan plan = single(testing::machines({2, 2}), "ring");
  const std::string xml = to_xml(export_schedule(plan, 0).algorithm);
  const auto refused = [](const std::string& text, const std::string& why) {
    try {
      parse_xml(text);
    } catch (const FormatError& e) {
      return std::string(e.what()).find(why) != std::string::npos ? "" : std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused("<?xml version=\"1.0\"?>\n" + xml, "declaration"), "");
  std::string tabbed = xml;
  tabbed.replace(tabbed.find("  <gpu"), 2, "\t");
  EXPECT_EQ(refused(tabbed, "tab"), "");
  std::string split = xml;
  split.replace(split.find(" proto="), 1, "\n");
  EXPECT_EQ(refused(split, "one tag per line"), "");
  std::string single_quoted = xml;
  single_quoted.replace(single_quoted.find("\"Simple\""), 8, "'Simple'");
  EXPECT_EQ(refused(single_quoted, "single-quoted"), "");
  std::string no_outofplace = xml;
  no_outofplace.replace(no_outofplace.find(" outofplace=\"1\""), 15, "");
  EXPECT_EQ(refused(no_outofplace, "outofplace"), "");
  std::string two_spaces = xml;
  two_spaces.replace(two_spaces.find(" proto="), 1, "  ");
  EXPECT_EQ(refused(two_spaces, "single spaces"), "");
}

TEST(Msccl, SizeRangeIsInclusiveAndEmptyRangesAreRefused) {
  ir::Plan plan = single(testing::machines({2, 2}), "ring");
  plan.schedules[0].min_bytes = 4096;
  plan.schedules[0].max_bytes = 1 << 20;
  const Export e = export_schedule(plan, 0);
  EXPECT_EQ(e.algorithm.min_bytes, 4096);
  EXPECT_EQ(e.algorithm.max_bytes, (1 << 20) - 1);  // the executors' maxBytes is inclusive
  plan.schedules[0].min_bytes = 0;
  plan.schedules[0].max_bytes = 1;
  EXPECT_THROW(export_schedule(plan, 0), ExportError);
}

TEST(Msccl, EveryAlgorithmOnEveryBundledTopology) {
  int exported = 0, refused = 0, stars = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(FLEXPLAN_SOURCE_DIR) + "/topologies")) {
    const Topology topo = load_topology(entry.path().string());
    for (const std::string& algorithm : algorithms_for(topo)) {
      // Algorithms without a size estimate are built; keep them to trees that build fast.
      const auto estimate = find_algorithm(algorithm).estimate(topo);
      if (estimate ? !schedule_fits_limits(*estimate) : topo.num_learners() > 2000) continue;
      const ir::Plan plan = single(topo, algorithm);
      for (const bool rccl : {false, true}) {
        const std::string result = round_trip(plan, rccl);
        SCOPED_TRACE(entry.path().filename().string() + " " + algorithm + (rccl ? " rccl" : ""));
        if (result.rfind("refused: ", 0) == 0) {
          ++refused;
          // Refusals name the limit: world size, steps or threadblocks.
          EXPECT_TRUE(result.find("at most") != std::string::npos) << result;
          if (topo.num_learners() <= 12) ADD_FAILURE() << "small topology refused: " << result;
        } else {
          ++exported;
          stars += has_star_ops(plan.schedules[0]);
          EXPECT_EQ(result, "");
        }
      }
    }
  }
  EXPECT_GT(exported, 80);
  EXPECT_GT(stars, 100);  // flexreduce-bw and rd-leader (and their pipelined variants) export
  EXPECT_GT(refused, 0);  // large-10k cannot load: more gpus than the reader holds
}

TEST(Msccl, EveryAlgorithmOnRandomTrees) {
  testing::RandomTrees trees(77);
  int stars = 0;
  for (int t = 0; t < 60; ++t) {
    const Topology topo = trees.next(16);
    for (const std::string& algorithm : algorithms_for(topo)) {
      const ir::Plan plan = single(topo, algorithm);
      for (const bool rccl : {false, true}) {
        const std::string result = round_trip(plan, rccl);
        stars += has_star_ops(plan.schedules[0]);
        EXPECT_EQ(result, "") << topo.name() << " " << algorithm << (rccl ? " rccl" : "") << " units "
                              << plan.schedules[0].units;
      }
    }
  }
  EXPECT_GT(stars, 100);  // flexreduce-bw and rd-leader have star ops
}

TEST(Msccl, UnevenUnitsRoundToChunksAndStillComputeTheAllReduce) {
  testing::RandomTrees trees(5);
  int rounded = 0;
  for (int t = 0; t < 40; ++t) {
    const Topology topo = trees.next(12);
    const ir::Plan plan = single(topo, "flexreduce");
    for (const uint64_t chunks : {uint64_t{5}, uint64_t{16}, uint64_t{64}}) {
      ExportOptions options;
      options.chunks = chunks;
      const Export e = export_schedule(plan, 0, options);
      EXPECT_LE(e.chunking.largest_shift, 0.5 + 1e-9);
      if (!e.chunking.exact) ++rounded;
      EXPECT_EQ(round_trip(plan, false, chunks), "") << topo.name() << " chunks " << chunks;
      EXPECT_EQ(round_trip(plan, true, chunks), "") << topo.name() << " chunks " << chunks;
    }
  }
  EXPECT_GT(rounded, 10);
}

TEST(Msccl, TooManyStepsSpreadOverChannelsOrAreRefused) {
  const ir::Plan ring = single(testing::machines({12, 12}), "ring");  // 46 steps of 2-3 instructions
  ExportOptions options;
  options.limits.rccl = true;
  const Export spread = export_schedule(ring, 0, options);
  EXPECT_GT(spread.algorithm.channels, 1);
  EXPECT_EQ(simulate_allreduce(spread.algorithm), "");
  options.limits.channels = 1;
  try {
    export_schedule(ring, 0, options);
    ADD_FAILURE() << "a ring of 24 in RCCL mode fits 64 steps on one channel?";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("steps, the executors hold at most 64 per threadblock"), std::string::npos)
        << e.what();
  }
}

// rd-leader on two machines of four: gpu 0 and gpu 4 are star roots. A root reduces over one
// threadblock per member (fused: one rrc each, ordered one after another by dependencies; RCCL:
// r into scratch and re), and broadcasts over one threadblock per member (an s each).
TEST(Msccl, StarRootsUseAThreadblockPerMember) {
  const ir::Plan plan = single(testing::machines({4, 4}), "rd-leader");
  ASSERT_TRUE(has_star_ops(plan.schedules[0]));
  for (const bool rccl : {false, true}) {
    SCOPED_TRACE(rccl ? "rccl" : "fused");
    ExportOptions options;
    options.limits.rccl = rccl;
    const Algorithm a = export_schedule(plan, 0, options).algorithm;
    const Gpu& root = a.gpus[0];
    std::vector<int32_t> reducing, sending;  // members whose threadblock reduces / sends to them
    int ordered = 0;  // reductions that wait on another threadblock
    for (const ThreadBlock& tb : root.threadblocks)
      for (const Step& step : tb.steps) {
        EXPECT_FALSE(rccl && fused(step.type)) << to_string(step.type);
        if (step.type == (rccl ? StepType::Reduce : StepType::RecvReduceCopy) && tb.recv >= 1 && tb.recv <= 3) {
          reducing.push_back(tb.recv);
          ordered += step.depend_tb >= 0;
        }
        if (step.type == StepType::Send && tb.send >= 1 && tb.send <= 3) sending.push_back(tb.send);
      }
    std::sort(reducing.begin(), reducing.end());
    std::sort(sending.begin(), sending.end());
    EXPECT_EQ(reducing, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(sending, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(ordered, 2);  // the second and third member's reductions wait for the one before
    EXPECT_EQ(round_trip(plan, rccl), "");
  }
}

// A star's root needs every member's connection on the star's channel: a star wider than the
// executors' peers per channel is refused, naming the op, in both modes.
TEST(Msccl, StarWiderThanAChannelIsRefused) {
  const ir::Plan wide = single(testing::machines({40}), "rd-leader");
  for (const bool rccl : {false, true}) {
    const std::string result = round_trip(wide, rccl);
    EXPECT_NE(result.find("refused: "), std::string::npos) << result;
    EXPECT_NE(result.find("step 0 op 0 is a star whose root 0 exchanges with 39 members on one channel"),
              std::string::npos)
        << result;
    EXPECT_NE(result.find("at most 32 peers per channel"), std::string::npos) << result;
  }
  // rd-leader on two machines of three: each leader exchanges with its 2 members and the other
  // leader. One peer per channel refuses the stars; at two, the ops spread over more channels
  // until no channel of a leader connects three peers.
  const ir::Plan two_by_three = single(testing::machines({3, 3}), "rd-leader");
  ExportOptions narrow;
  narrow.limits.peers_per_channel = 1;
  try {
    export_schedule(two_by_three, 0, narrow);
    ADD_FAILURE() << "a star of 3 exported with one peer per channel";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("is a star whose root 0 exchanges with 2 members"), std::string::npos)
        << e.what();
  }
  narrow.limits.peers_per_channel = 2;
  const Algorithm spread = export_schedule(two_by_three, 0, narrow).algorithm;
  EXPECT_GT(spread.channels, 1);
  EXPECT_NO_THROW(check_loadable(spread, narrow.limits));
  EXPECT_EQ(simulate_allreduce(spread), "");
}

size_t most_threadblocks(const Algorithm& a) {
  size_t most = 0;
  for (const Gpu& gpu : a.gpus) most = std::max(most, gpu.threadblocks.size());
  return most;
}

// Where a gpu needs more threadblocks than the executors run, threadblocks that only receive
// share with ones that only send; the file still computes the all-reduce. Where even that
// does not fit, the export is refused naming the limit.
TEST(Msccl, OneWayThreadblocksPairUpWhenTooMany) {
  const ir::Plan plan = single(testing::machines({4, 4}), "rd-leader");
  for (const bool rccl : {false, true}) {
    SCOPED_TRACE(rccl ? "rccl" : "fused");
    ExportOptions options;
    options.limits.rccl = rccl;
    const size_t unpaired = most_threadblocks(export_schedule(plan, 0, options).algorithm);
    options.limits.threadblocks_per_gpu = static_cast<int>(unpaired) - 1;
    const Algorithm paired = export_schedule(plan, 0, options).algorithm;
    EXPECT_LT(most_threadblocks(paired), unpaired);
    EXPECT_NO_THROW(check_loadable(paired, options.limits));
    EXPECT_EQ(simulate_allreduce(paired), "");
    options.limits.threadblocks_per_gpu = 2;
    try {
      export_schedule(plan, 0, options);
      ADD_FAILURE() << "a star root of 3 members in 2 threadblocks";
    } catch (const ExportError& e) {
      EXPECT_NE(std::string(e.what()).find("the executors run at most 2"), std::string::npos) << e.what();
    }
  }
}

// --- the checker catches broken files ------------------------------------------------------------

Algorithm exported_fig2(bool rccl) {
  ExportOptions options;
  options.limits.rccl = rccl;
  return export_schedule(single(testing::machines({2, 3}), "flexreduce"), 0, options).algorithm;
}

TEST(Msccl, CheckerCatchesAMissingDependency) {
  Algorithm a = exported_fig2(true);
  bool removed = false;
  for (Gpu& gpu : a.gpus)
    for (ThreadBlock& tb : gpu.threadblocks)
      for (Step& step : tb.steps)
        if (!removed && step.type != StepType::Nop && step.depend_tb >= 0) {
          step.depend_tb = step.depend_step = -1;
          removed = true;
        }
  ASSERT_TRUE(removed);
  EXPECT_NE(simulate_allreduce(a), "");
}

// Without their dependencies, a star root's reductions into one total race.
TEST(Msccl, CheckerCatchesUnorderedStarReductions) {
  Algorithm a = export_schedule(single(testing::machines({4}), "rd-leader"), 0).algorithm;
  int removed = 0;
  for (ThreadBlock& tb : a.gpus[0].threadblocks)
    for (Step& step : tb.steps)
      if (step.type == StepType::RecvReduceCopy && step.depend_tb >= 0) {
        step.depend_tb = step.depend_step = -1;
        ++removed;
      }
  ASSERT_GT(removed, 0);
  const std::string result = simulate_allreduce(a);
  EXPECT_NE(result.find("with nothing ordering them"), std::string::npos) << result;
}

TEST(Msccl, CheckerCatchesSwappedSendsAndWrongCounts) {
  Algorithm a = export_schedule(single(testing::machines({2, 3}), "ring"), 0).algorithm;
  // Swap two transfers of one threadblock that sends at least twice: matching is in order.
  bool swapped = false;
  for (Gpu& gpu : a.gpus)
    for (ThreadBlock& tb : gpu.threadblocks) {
      std::vector<size_t> sends_at;
      for (size_t i = 0; i < tb.steps.size(); ++i)
        if (tb.steps[i].type == StepType::Send) sends_at.push_back(i);
      if (!swapped && sends_at.size() >= 2 && tb.steps[sends_at[0]].src_offset != tb.steps[sends_at[1]].src_offset) {
        std::swap(tb.steps[sends_at[0]], tb.steps[sends_at[1]]);
        swapped = true;
      }
    }
  ASSERT_TRUE(swapped);
  EXPECT_NE(simulate_allreduce(a), "");
  Algorithm b = exported_fig2(false);
  for (Step& step : b.gpus[0].threadblocks[0].steps)
    if (step.type != StepType::Nop) step.count += 1;
  EXPECT_NE(simulate_allreduce(b), "");
}

TEST(Msccl, RcclModeRefusesFusedSteps) {
  const Algorithm a = exported_fig2(false);
  Limits rccl;
  rccl.rccl = true;
  EXPECT_THROW(check_loadable(a, rccl), FormatError);
  EXPECT_NO_THROW(check_loadable(exported_fig2(true), rccl));
}

TEST(Msccl, TooManyGpusAreRefused) {
  const ir::Plan plan = single(testing::machines(std::vector<int>(130, 8)), "hierarchical");
  try {
    export_schedule(plan, 0);
    ADD_FAILURE() << "1040 gpus exported";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 1024 gpu elements"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flexplan::codegen::msccl
