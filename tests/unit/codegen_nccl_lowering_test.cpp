// The NCCL lowering (codegen/nccl_lowering.hpp) on every bundled topology and on random trees,
// for every algorithm the planner has: the communicator table is well formed, every rank's
// calls replayed together compute the all-reduce (an interpreter of NCCL semantics on numbers),
// no unstaged write races another call of its group, and the issue-order check passes, while
// it names the communicator when one rank's order is tampered with. Also its pricing
// (planner/nccl_cost.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "codegen/nccl_lowering.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/verify.hpp"
#include "planner/nccl_cost.hpp"
#include "planner/plan_builder.hpp"
#include "tests/unit/planner_test_trees.hpp"
#include "topology/topology.hpp"

namespace flexplan {
namespace {

using codegen::NcclCall;
using codegen::NcclCallKind;
using codegen::NcclCommTable;
using codegen::NcclRankProgram;

std::vector<NcclRankProgram> lower_all(const ir::Schedule& schedule, const NcclCommTable& table, int world) {
  std::vector<NcclRankProgram> programs;
  for (int r = 0; r < world; ++r) programs.push_back(codegen::lower_nccl_rank(schedule, table, r));
  return programs;
}

// Runs every rank's calls with NCCL's semantics on `count` uint64 elements per rank (sums wrap)
// and returns "" when every rank ends with the sum of all inputs, else what is wrong. A step's
// calls are one group: each matching call instance (same communicator, same op) is found by
// pairing the members' calls in order; reads see the buffer as of the step's start (what
// staging guarantees on a device, checked separately by hazards()).
std::string interpret(const ir::Schedule& schedule, const NcclCommTable& table,
                      const std::vector<NcclRankProgram>& programs, int world, size_t count) {
  std::mt19937_64 rng(count * 7919 + static_cast<uint64_t>(world));
  std::vector<std::vector<uint64_t>> buffer(static_cast<size_t>(world), std::vector<uint64_t>(count));
  std::vector<uint64_t> expected(count, 0);
  for (auto& rank_buffer : buffer)
    for (size_t i = 0; i < count; ++i) {
      rank_buffer[i] = rng();
      expected[i] += rank_buffer[i];
    }
  const auto element = [&](uint64_t unit) { return ir::unit_to_element(unit, schedule.units, count); };
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const auto before = buffer;
    // (comm, op index) -> the members' calls.
    std::map<std::pair<int32_t, uint32_t>, std::vector<std::pair<int, const NcclCall*>>> instances;
    for (int r = 0; r < world; ++r)
      for (const NcclCall& call : programs[static_cast<size_t>(r)].steps[s].calls)
        instances[{call.comm, call.op_index}].push_back({r, &call});
    for (const auto& [key, calls] : instances) {
      const codegen::NcclGroup& group = table.groups[static_cast<size_t>(key.first)];
      if (calls.size() != group.members.size())
        return "step " + std::to_string(s) + ": " + codegen::describe(*calls.front().second) + " issued by " +
               std::to_string(calls.size()) + " of " + std::to_string(group.members.size()) + " members";
      const NcclCall& first = *calls.front().second;
      const int root = group.members[static_cast<size_t>(first.root)];
      const size_t b = element(first.unit_begin), e = element(first.unit_end);
      for (const auto& [rank, call] : calls)
        if (call->kind != first.kind || call->root != first.root || call->unit_begin != first.unit_begin)
          return "members disagree on " + codegen::describe(first);
      for (size_t i = b; i < e; ++i) {
        if (first.kind == NcclCallKind::Reduce) {
          uint64_t sum = 0;
          for (const auto& [rank, call] : calls)
            if (!call->send_identity) sum += before[static_cast<size_t>(rank)][i];  // identity: + 0
          buffer[static_cast<size_t>(root)][i] = sum;
        } else {
          for (const auto& [rank, call] : calls) buffer[static_cast<size_t>(rank)][i] = before[static_cast<size_t>(root)][i];
        }
      }
    }
  }
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < count; ++i)
      if (buffer[static_cast<size_t>(r)][i] != expected[i])
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + " of " + std::to_string(count) +
               " is not the sum";
  return "";
}

// A call writing without staging must not overlap any other call of its step on that rank
// (the group's calls run concurrently on the device).
std::string hazards(const std::vector<NcclRankProgram>& programs) {
  for (const NcclRankProgram& program : programs)
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const auto& calls = program.steps[s].calls;
      for (size_t i = 0; i < calls.size(); ++i) {
        const bool writes = calls[i].kind == NcclCallKind::Reduce ? calls[i].is_root : !calls[i].is_root;
        if (!writes || calls[i].stage_write) continue;
        for (size_t j = 0; j < calls.size(); ++j)
          if (j != i && calls[j].unit_begin < calls[i].unit_end && calls[i].unit_begin < calls[j].unit_end)
            return "rank " + std::to_string(program.rank) + " step " + std::to_string(s) + ": " +
                   codegen::describe(calls[i]) + " writes unstaged over " + codegen::describe(calls[j]);
      }
    }
  return "";
}

void check_table(const NcclCommTable& table, int world) {
  for (uint32_t split = 0; split < table.splits; ++split) {
    std::vector<int> seen(static_cast<size_t>(world), 0);
    for (const codegen::NcclGroup& group : table.groups) {
      if (group.split != split) continue;
      ASSERT_GE(group.members.size(), 2u);
      ASSERT_TRUE(std::is_sorted(group.members.begin(), group.members.end()));
      for (int32_t m : group.members) ASSERT_EQ(seen[static_cast<size_t>(m)]++, 0) << "split " << split << " overlaps at " << m;
    }
    for (int r = 0; r < world; ++r) {
      const int32_t g = table.group_of(split, r);
      EXPECT_EQ(table.color(split, r), g < 0 ? -1 : table.groups[static_cast<size_t>(g)].color);
    }
  }
}

void check_schedule(const ir::Schedule& schedule, int world, const std::string& label) {
  SCOPED_TRACE(label);
  const std::vector<const ir::Schedule*> one{&schedule};
  const NcclCommTable table = codegen::build_nccl_comm_table(one, world);
  check_table(table, world);
  const auto programs = lower_all(schedule, table, world);
  EXPECT_EQ(codegen::check_nccl_issue_order(programs, table), "");
  EXPECT_EQ(hazards(programs), "");
  for (size_t count : {size_t{1}, static_cast<size_t>(2 * world + 3), size_t{997}})
    EXPECT_EQ(interpret(schedule, table, programs, world, count), "") << "count " << count;
}

void check_topology(const Topology& topology, const std::string& label) {
  for (const std::string& algorithm : testing::algorithms_for(topology, {2})) {
    PlanOptions options;
    options.algorithms = {algorithm};
    const ir::Plan plan = build_plan(topology, options);
    for (const ir::Schedule& schedule : plan.schedules)
      check_schedule(schedule, topology.num_learners(), label + " " + schedule.algorithm);
  }
}

TEST(NcclLowering, BundledTopologiesEveryAlgorithm) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FLEXPLAN_SOURCE_DIR "/topologies")) {
    const Topology topology = load_topology(entry.path().string());
    // Lowering every rank of a 10,000-learner job here would take minutes; its communicator
    // table is checked below.
    if (topology.num_learners() > 200) continue;
    check_topology(topology, entry.path().filename().string());
    ++checked;
  }
  EXPECT_GE(checked, 14);
}

TEST(NcclLowering, LargeTopologyTable) {
  const Topology topology = load_topology(FLEXPLAN_SOURCE_DIR "/topologies/large-10k.json");
  PlanOptions options;
  options.algorithms = {"hierarchical"};
  const ir::Plan plan = build_plan(topology, options);
  const NcclCommTable table = codegen::build_nccl_comm_table(plan);
  check_table(table, topology.num_learners());
  // Machine-local groups are disjoint and share split calls: far fewer splits than groups.
  EXPECT_LT(table.splits * 10, table.groups.size());
}

TEST(NcclLowering, RandomTreesEveryAlgorithm) {
  testing::RandomTrees trees(20261123);
  for (int i = 0; i < 12; ++i) {
    const Topology topology = trees.next(24);
    check_topology(topology, topology.name());
  }
}

// Reduce with the root outside its group: a call over group + root, the root sending the
// identity.
TEST(NcclLowering, RootOutsideGroupSendsIdentity) {
  // A simpler hand schedule that the verifier accepts: ranks 0,1 reduce [0,2) into rank 2,
  // which is not in the group, while rank 2's own data goes to rank 0 first.
  ir::Schedule s;
  s.algorithm = "hand";
  s.units = 2;
  ir::Step one;
  one.ops.push_back({ir::OpKind::Reduce, 0, 2, 0, {0, 2}});  // rank 0 = r0 + r2
  ir::Step two;
  two.ops.push_back({ir::OpKind::Reduce, 0, 2, 2, {0, 1}});  // rank 2 = (r0 + r2) + r1, root outside
  ir::Step three;
  three.ops.push_back({ir::OpKind::Broadcast, 0, 2, 2, {0, 1, 2}});
  s.steps = {one, two, three};
  ASSERT_NO_THROW(ir::verify_schedule(s, 3));
  const std::vector<const ir::Schedule*> just{&s};
  const NcclCommTable table = codegen::build_nccl_comm_table(just, 3);
  const auto programs = lower_all(s, table, 3);
  ASSERT_EQ(programs[2].steps[1].calls.size(), 1u);
  const NcclCall& root_call = programs[2].steps[1].calls[0];
  EXPECT_TRUE(root_call.send_identity);
  EXPECT_EQ(table.groups[static_cast<size_t>(root_call.comm)].members, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_FALSE(programs[0].steps[1].calls[0].send_identity);
  check_schedule(s, 3, "root outside");
  // Priced: one fill of the whole vector on rank 2 in step two.
  const NcclLocalWork work = nccl_local_work(s, 3);
  EXPECT_DOUBLE_EQ(work.identity_fill, 1.0);
  EXPECT_EQ(work.groups, 3u);
  NcclCostParams params;
  EXPECT_NEAR(nccl_lowering_overhead(s, 3, 1e9, params), 3 * params.group_launch + 1e9 / params.device_bandwidth, 1e-12);
}

TEST(NcclLowering, OverlappingWritesAreStaged) {
  // Recursive doubling style: ranks 0 and 1 each reduce the whole range into themselves in one
  // step; each rank's write overlaps the range it sends.
  ir::Schedule s;
  s.algorithm = "hand";
  s.units = 1;
  ir::Step step;
  step.ops.push_back({ir::OpKind::Reduce, 0, 1, 0, {0, 1}});
  step.ops.push_back({ir::OpKind::Reduce, 0, 1, 1, {1, 0}});
  s.steps = {step};
  ASSERT_NO_THROW(ir::verify_schedule(s, 2));
  const std::vector<const ir::Schedule*> just{&s};
  const NcclCommTable table = codegen::build_nccl_comm_table(just, 2);
  EXPECT_EQ(table.groups.size(), 1u);  // one member set {0,1}
  const auto programs = lower_all(s, table, 2);
  for (const auto& p : programs) {
    ASSERT_EQ(p.steps[0].calls.size(), 2u);
    for (const NcclCall& c : p.steps[0].calls) EXPECT_EQ(c.stage_write, c.is_root) << codegen::describe(c);
  }
  check_schedule(s, 2, "overlap");
}

TEST(NcclLowering, DisjointGroupsShareSplits) {
  const Topology topology = testing::machines({4, 4, 4, 4});
  PlanOptions options;
  options.algorithms = {"hierarchical"};
  const ir::Plan plan = build_plan(topology, options);
  const NcclCommTable table = codegen::build_nccl_comm_table(plan);
  // Four machine-local groups, disjoint: one split; the leaders' ring pairs need a few more.
  size_t local = 0;
  for (const auto& g : table.groups) local += g.members.size() == 4;
  EXPECT_EQ(local, 4u);
  EXPECT_LT(table.splits, table.groups.size());
}

TEST(NcclLowering, TamperedOrderIsNamed) {
  const Topology topology = testing::machines({3, 2, 3});
  const ir::Plan plan = build_plan(topology, [] {
    PlanOptions o;
    o.algorithms = {"ring"};
    return o;
  }());
  const ir::Schedule& schedule = plan.schedules.front();
  const NcclCommTable table = codegen::build_nccl_comm_table(plan);
  auto programs = lower_all(schedule, table, topology.num_learners());
  ASSERT_EQ(codegen::check_nccl_issue_order(programs, table), "");
  // Rank 3 swaps two steps: its calls no longer line up with its peers'.
  auto swapped = programs;
  std::swap(swapped[3].steps[0], swapped[3].steps[1]);
  const std::string problem = codegen::check_nccl_issue_order(swapped, table);
  EXPECT_NE(problem.find("communicator"), std::string::npos) << problem;
  EXPECT_NE(problem.find("rank 3"), std::string::npos) << problem;
  // A different root on one rank.
  auto rerooted = programs;
  for (auto& step : rerooted[2].steps)
    if (!step.calls.empty()) {
      step.calls[0].root ^= 1;
      break;
    }
  EXPECT_NE(codegen::check_nccl_issue_order(rerooted, table), "");
  // A call left out on one rank.
  auto dropped = programs;
  for (auto& step : dropped[0].steps)
    if (!step.calls.empty()) {
      step.calls.pop_back();
      break;
    }
  EXPECT_NE(codegen::check_nccl_issue_order(dropped, table), "");
}

}  // namespace
}  // namespace flexplan

namespace flexplan {
namespace {

// A pipeline held compact has the communicator table and, rank by rank, the NCCL calls of its
// expansion, for every pipelining algorithm on random trees.
TEST(NcclLowering, CompactPipelinesLowerAsTheirExpansion) {
  int compared = 0;
  testing::for_each_random_pipeline(20261124, 12, 24, [&](const Topology& topo, const ir::Schedule& base,
                                                         uint32_t slices, int tree) {
    const ir::Schedule compact = ir::compact_pipeline(base, slices);
    const ir::Schedule whole = ir::expand_pipeline(base, slices);
    const auto table = codegen::build_nccl_comm_table({&whole}, topo.num_learners());
    EXPECT_EQ(codegen::build_nccl_comm_table({&compact}, topo.num_learners()), table) << whole.algorithm;
    for (int32_t rank = 0; rank < topo.num_learners(); ++rank) {
      EXPECT_EQ(codegen::lower_nccl_rank(compact, table, rank), codegen::lower_nccl_rank(whole, table, rank))
          << whole.algorithm << " tree " << tree << " rank " << rank;
      ++compared;
    }
  });
  EXPECT_GT(compared, 500);
}

}  // namespace
}  // namespace flexplan
