// The verifier accepts hand-built schedules that compute an all-reduce and rejects each kind of
// mutation with a message naming the step, op, rank and range at fault.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/verify.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

using testing::hierarchical_schedule;
using testing::plan_of;
using testing::ring_schedule;
using testing::tree_schedule;

// The VerifyError message, or "" when the schedule verifies.
std::string verify_message(const Schedule& schedule, int32_t world_size) {
  try {
    verify_schedule(schedule, world_size);
  } catch (const VerifyError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REJECTED(schedule, world_size, ...)                        \
  do {                                                                    \
    const std::string message = verify_message(schedule, world_size);     \
    ASSERT_FALSE(message.empty()) << "the mutated schedule was accepted"; \
    for (const std::string& part : std::initializer_list<std::string>{__VA_ARGS__}) \
      EXPECT_NE(message.find(part), std::string::npos)                    \
          << "message lacks '" << part << "': " << message;               \
  } while (0)

TEST(IrVerify, RingVerifiesForEveryWorldSize) {
  for (int32_t p = 1; p <= 12; ++p) EXPECT_NO_THROW(verify_schedule(ring_schedule(p), p)) << p;
}

TEST(IrVerify, TreeVerifiesForEveryWorldSize) {
  for (int32_t p = 1; p <= 17; ++p) EXPECT_NO_THROW(verify_schedule(tree_schedule(p), p)) << p;
}

TEST(IrVerify, HierarchicalVerifiesWithUnevenGroups) {
  for (int32_t p : {1, 2, 7, 8, 9, 23, 64}) {
    EXPECT_NO_THROW(verify_schedule(hierarchical_schedule(p, 8), p)) << p;
  }
}

TEST(IrVerify, TenThousandRanksHierarchicalVerifies) {
  const int32_t p = 10'000;
  EXPECT_NO_THROW(verify_schedule(hierarchical_schedule(p, 8), p));
}

TEST(IrVerify, UnevenRangesAcrossOpsVerify) {
  // Two ranks exchange halves of different widths: reduce-scatter then all-gather with units 5.
  Schedule schedule;
  schedule.units = 5;
  schedule.steps = {
      Step{Phase::ReduceScatter,
           0,
           {Op{OpKind::Reduce, 0, 2, 0, {0, 1}}, Op{OpKind::Reduce, 2, 5, 1, {0, 1}}}},
      Step{Phase::AllGather,
           0,
           {Op{OpKind::Broadcast, 0, 2, 0, {0, 1}}, Op{OpKind::Broadcast, 2, 5, 1, {1, 0}}}}};
  EXPECT_NO_THROW(verify_schedule(schedule, 2));
}

TEST(IrVerify, RootOutsideGroupReceivesTheSum) {
  // Rank 2 collects ranks 0 and 1 and broadcasts the sum: its own contribution is lost.
  Schedule lost;
  lost.units = 1;
  lost.steps = {Step{Phase::Reduce, 0, {Op{OpKind::Reduce, 0, 1, 2, {0, 1}}}},
                Step{Phase::Broadcast, 0, {Op{OpKind::Broadcast, 0, 1, 2, {2, 0, 1}}}}};
  EXPECT_REJECTED(lost, 3, "step 0 op 0 (reduce [0,1) root 2 group 0 1)",
                  "writing rank 2 on unit 0 discards the last copy of the contribution of rank 2, "
                  "held there since the start");
  // Collecting into rank 0 from ranks 1 and 2, then into rank 2 from rank 0 alone, is right.
  Schedule good;
  good.units = 1;
  good.steps = {Step{Phase::Reduce, 0, {Op{OpKind::Reduce, 0, 1, 0, {0, 1, 2}}}},
                Step{Phase::Reduce, 0, {Op{OpKind::Reduce, 0, 1, 2, {0}}}},
                Step{Phase::Broadcast, 0, {Op{OpKind::Broadcast, 0, 1, 2, {1}}}}};
  EXPECT_NO_THROW(verify_schedule(good, 3));
}

TEST(IrVerify, UnwrittenRankIsNamedBeforeExecution) {
  Schedule ring = ring_schedule(5);
  for (Step& step : ring.steps.edit()) {
    std::erase_if(step.ops, [](const Op& op) {
      return op.root == 3 || (op.kind == OpKind::Broadcast && op.group[1] == 3);
    });
  }
  EXPECT_REJECTED(
      ring, 5,
      "rank 3 is never written by any op, so it cannot end with the other ranks' contributions");
  // A world far larger than the ops could write is rejected without a world-sized state.
  EXPECT_REJECTED(ring_schedule(4), 2'000'000'000, "rank 4 is never written by any op");
}

// ---- mutations of a correct ring (P = 5): each must be rejected, naming where

TEST(IrVerify, DroppedAllGatherOpLeavesARankIncomplete) {
  Schedule ring = ring_schedule(5);
  ring.steps.edit()[6].ops.erase(ring.steps.edit()[6].ops.begin() + 2);  // all-gather step 2: rank 2 -> 3
  // Rank 3 keeps its reduce-scatter partial sum of chunk 1 (ranks 1+2+3).
  EXPECT_REJECTED(ring, 5, "after the last step rank 3 holds 3 of 5 contributions on units [1,2)",
                  "lacks the contribution of ranks {0, 4}",
                  "has not changed since step 1 op 2 (reduce [1,2) root 3 group 2 3)");
}

TEST(IrVerify, DroppedReduceScatterOpIsNamed) {
  Schedule ring = ring_schedule(5);
  ring.steps.edit()[1].ops.erase(ring.steps.edit()[1].ops.begin() + 1);
  // Chunk 0 stops at rank 1 after step 0; the all-gather later overwrites that last copy.
  EXPECT_REJECTED(ring, 5,
                  "step 5 op 0 (broadcast [0,1) root 0 group 0 1): writing rank 1 on unit 0 "
                  "discards the last copy of the contribution of rank 0, held there since step 0 "
                  "op 0 (reduce [0,1) root 1 group 0 1)");
}

TEST(IrVerify, ChangedRootLosesTheNewRootsContribution) {
  Schedule ring = ring_schedule(5);
  ring.steps.edit()[0].ops[1].root = 3;  // chunk 1 of ranks 1+2 lands on rank 3 instead of rank 2
  // Rank 3 is not in the group, so its own contribution on unit 1, held nowhere else, is gone.
  EXPECT_REJECTED(ring, 5, "step 0 op 1 (reduce [1,2) root 3 group 1 2)",
                  "writing rank 3 on unit 1 discards the last copy of the contribution of rank 3");
}

TEST(IrVerify, WidenedGroupCountsTwice) {
  Schedule ring = ring_schedule(5);
  // In reduce-scatter step 1, rank 2 adds chunk 0 from rank 1, which already holds ranks 0+1.
  // Adding rank 0 again counts rank 0 twice, and the ring then hands that sum to every rank.
  ring.steps.edit()[1].ops[1].group = {1, 2, 0};
  ASSERT_EQ(ring.steps[1].ops[1].begin, 0u);
  EXPECT_REJECTED(ring, 5,
                  "after the last step rank 0 holds the contribution of rank 0 more than once on "
                  "units [0,1) (checked exactly on unit 0)",
                  "it was first counted twice at step 1 op 1 (reduce [0,1) root 2 group 1 2 0), "
                  "where group members ranks {1, 0} both brought it to rank 2");
}

// Intermediate values may count a contribution more than once, even hold more than P
// contributions: such a value can never become part of a right result (a reduce only adds),
// so only what ranks end with is judged. P = 2: reduce to 0, reduce to 1 over {0, 1} (rank 1
// then holds rank 1's contribution twice), broadcast from 0 overwrites it.
TEST(IrVerify, DiscardedOverCountsAreAccepted) {
  Schedule schedule;
  schedule.algorithm = "redundant";
  schedule.units = 3;
  schedule.steps = {Step{Phase::Reduce, 0, {Op{OpKind::Reduce, 0, 3, 0, {0, 1}}}},
                    Step{Phase::Reduce, 0, {Op{OpKind::Reduce, 0, 3, 1, {0, 1}}}},
                    Step{Phase::Broadcast, 0, {Op{OpKind::Broadcast, 0, 3, 0, {0, 1}}}}};
  EXPECT_NO_THROW(verify_schedule(schedule, 2));
  // Without the broadcast on [1,3), rank 1 ends there with the over-count, and is told so.
  schedule.steps.edit()[2].ops[0].end = 1;
  EXPECT_REJECTED(schedule, 2,
                  "after the last step rank 1 holds the contribution of rank 1 more than once on "
                  "units [1,3) (checked exactly on unit 1)",
                  "it was first counted twice at step 1 op 0 (reduce [0,3) root 1 group 0 1), where "
                  "group members ranks {0, 1} both brought it to rank 1",
                  "its value there has not changed since step 1 op 0");
  // Repeated doubling: multiplicities would reach 2^64 and wrap in any fixed-width count.
  Schedule doubling;
  doubling.algorithm = "doubling";
  doubling.units = 1;
  for (int i = 0; i < 70; ++i) {
    doubling.steps.push_back(Step{Phase::Reduce, 0, {Op{OpKind::Reduce, 0, 1, 0, {0, 1}}}});
    doubling.steps.push_back(Step{Phase::Broadcast, 0, {Op{OpKind::Broadcast, 0, 1, 0, {0, 1}}}});
  }
  EXPECT_REJECTED(doubling, 2, "after the last step rank 0 holds the contribution of rank 0 more "
                               "than once");
  doubling.steps.push_back(Step{Phase::Reduce, 0, {Op{OpKind::Reduce, 0, 1, 0, {1}}}});
  EXPECT_REJECTED(doubling, 2, "after the last step rank 0 holds the contribution of rank 0 more "
                               "than once");
}

TEST(IrVerify, NarrowedGroupLosesAContribution) {
  Schedule ring = ring_schedule(5);
  ring.steps.edit()[0].ops[0].group = {1};  // rank 1 no longer adds rank 0's chunk 0
  EXPECT_REJECTED(ring, 5,
                  "writing rank 0 on unit 0 discards the last copy of the contribution of rank 0, "
                  "held there since the start");
}

TEST(IrVerify, TwoWritesInOneStepAreRejectedFirst) {
  Schedule ring = ring_schedule(4);
  Op extra = ring.steps[0].ops[0];  // reduce [0,1) root 1 group 0 1
  extra.group = {3, 1};
  ring.steps.edit()[0].ops.push_back(extra);
  EXPECT_REJECTED(ring, 4, "step 0: op 0 (reduce [0,1) root 1 group 0 1)",
                  "op 4 (reduce [0,1) root 1 group 3 1)", "both write rank 1 on units [0,1)");
}

// Many ops of one step writing one rank: in unit order they are checked against the latest
// end; out of order, against each other, and past a few by sorting them.
TEST(IrVerify, ManyWritesToOneRankInOneStep) {
  for (bool reversed : {false, true}) {
    Schedule schedule;
    schedule.algorithm = "many";
    schedule.units = 100;
    Step gather{Phase::Reduce, 0, {}};
    for (uint64_t i = 0; i < 100; ++i) {
      const uint64_t u = reversed ? 99 - i : i;
      gather.ops.push_back(Op{OpKind::Reduce, u, u + 1, 0, {0, 1}});
    }
    schedule.steps = {gather, Step{Phase::Broadcast, 0, {Op{OpKind::Broadcast, 0, 100, 0, {0, 1}}}}};
    EXPECT_NO_THROW(verify_schedule(schedule, 2)) << reversed;
    schedule.steps.edit()[0].ops.push_back(Op{OpKind::Reduce, 50, 52, 0, {1, 0}});
    const std::string first = reversed ? "op 49 (reduce [50,51) root 0 group 0 1)"
                                       : "op 50 (reduce [50,51) root 0 group 0 1)";
    EXPECT_REJECTED(schedule, 2, "step 0: " + first, "op 100 (reduce [50,52) root 0 group 1 0)",
                    "both write rank 0 on units [50,51)");
  }
}

// A rank's adjacent writes in a step are kept as one run (a chain's receiver takes block after
// block); a write overlapping the run still names the latest op it overlaps, in a short step
// (checked write by write) and past the writes checked one by one.
TEST(IrVerify, AConflictInsideARunOfWritesNamesTheLatestOp) {
  for (uint64_t writes : {10, 40}) {
    Schedule schedule;
    schedule.algorithm = "run";
    schedule.units = writes;
    Step gather{Phase::Reduce, 0, {}};
    for (uint64_t u = 0; u < writes; ++u) gather.ops.push_back(Op{OpKind::Reduce, u, u + 1, 0, {0, 1}});
    gather.ops.push_back(Op{OpKind::Reduce, 5, 7, 0, {1, 0}});
    schedule.steps = {gather, Step{Phase::Broadcast, 0, {Op{OpKind::Broadcast, 0, writes, 0, {0, 1}}}}};
    // Write by write the latest overlapping op is 6; sorted by begin, op 5 comes first.
    const std::string first = writes == 10 ? "op 6 (reduce [6,7) root 0 group 0 1)"
                                            : "op 5 (reduce [5,6) root 0 group 0 1)";
    EXPECT_REJECTED(schedule, 2, "step 0: " + first,
                    "op " + std::to_string(writes) + " (reduce [5,7) root 0 group 1 0)",
                    writes == 10 ? "both write rank 0 on units [6,7)" : "both write rank 0 on units [5,6)");
  }
}

TEST(IrVerify, BroadcastAndReduceWritingOneRankConflict) {
  Schedule schedule = tree_schedule(4, 6);
  // Step 0 reduces 0<-1 and 2<-3 on [0,6); a broadcast from 3 into 2's [2,4) collides.
  schedule.steps.edit()[0].ops.push_back(Op{OpKind::Broadcast, 2, 4, 3, {3, 2}});
  EXPECT_REJECTED(schedule, 4, "step 0:", "op 1", "op 2", "both write rank 2 on units [2,4)");
}

TEST(IrVerify, RangeBeyondUnitsIsRejected) {
  Schedule ring = ring_schedule(5);
  ring.steps.edit()[3].ops[4].end = 9;
  EXPECT_REJECTED(ring, 5, "step 3 op 4", "end 9 exceeds the schedule's 5 units");
}

TEST(IrVerify, EmptyRangeIsRejected) {
  Schedule ring = ring_schedule(3);
  ring.steps.edit()[0].ops[1].end = ring.steps.edit()[0].ops[1].begin;
  EXPECT_REJECTED(ring, 3, "step 0 op 1", "empty range");
}

TEST(IrVerify, RankOutOfRangeIsRejected) {
  Schedule ring = ring_schedule(5);
  ring.steps.edit()[2].ops[0].group[1] = 7;
  EXPECT_REJECTED(ring, 5, "step 2 op 0", "group member 7 is not among the 5 ranks");
  ring = ring_schedule(5);
  ring.steps.edit()[2].ops[3].root = -1;
  EXPECT_REJECTED(ring, 5, "step 2 op 3", "root -1 is not among the 5 ranks");
}

TEST(IrVerify, DuplicateMemberAndEmptyGroupAreRejected) {
  Schedule ring = ring_schedule(4);
  ring.steps.edit()[1].ops[2].group = {2, 2};
  EXPECT_REJECTED(ring, 4, "step 1 op 2", "rank 2 appears twice in the group");
  ring = ring_schedule(4);
  ring.steps.edit()[1].ops[2].group.clear();
  EXPECT_REJECTED(ring, 4, "step 1 op 2", "empty group");
}

// The runtime's tags tell at most 2^20 sources of a star reduce apart (runtime/tag.hpp): a plan
// with more is refused when it is verified, that is when it is written, naming the op; 2^20
// pass, and a star broadcast or a chain of any size is not limited.
TEST(IrVerify, StarReducesBeyondTheTagsSourcesAreRejected) {
  const auto star = [](OpKind kind, OpShape shape, int32_t members, int32_t root) {
    Schedule schedule;
    schedule.units = 1;
    std::vector<int32_t> group(static_cast<size_t>(members));
    for (int32_t r = 0; r < members; ++r) group[static_cast<size_t>(r)] = r;
    schedule.steps.push_back({Phase::Reduce, 0, {Op{kind, 0, 1, root, RankList(group), shape}}});
    return schedule;
  };
  const auto limit = static_cast<int32_t>(kMaxStarSources);
  const auto message = [](const Schedule& schedule, int32_t world) -> std::string {
    try {
      check_structure(schedule, world);
    } catch (const VerifyError& e) {
      return e.what();
    }
    return "";
  };
  // The root in the group: members - 1 sources; outside it: every member is one.
  EXPECT_EQ(message(star(OpKind::Reduce, OpShape::Star, limit + 1, 0), limit + 1), "");
  EXPECT_EQ(message(star(OpKind::Reduce, OpShape::Star, limit, limit), limit + 1), "");
  const std::string over = message(star(OpKind::Reduce, OpShape::Star, limit + 2, 0), limit + 2);
  EXPECT_NE(over.find("step 0 op 0"), std::string::npos) << over;
  EXPECT_NE(over.find("a star reduce of 1048577 sources"), std::string::npos) << over;
  EXPECT_NE(message(star(OpKind::Reduce, OpShape::Star, limit + 1, limit + 1), limit + 2), "");
  EXPECT_EQ(message(star(OpKind::Broadcast, OpShape::Star, limit + 2, 0), limit + 2), "");
  EXPECT_EQ(message(star(OpKind::Reduce, OpShape::Chain, limit + 2, 0), limit + 2), "");
  // A rank's part of plan.bin checks each of its ops so (ir/plan_slice.hpp).
  const Schedule beyond = star(OpKind::Reduce, OpShape::Star, limit + 2, 0);
  EXPECT_THROW(check_op_structure(beyond.steps[0].ops[0], 1, limit + 2, "schedule", 0, 0), VerifyError);
}

TEST(IrVerify, ScheduleFieldsAreChecked) {
  Schedule ring = ring_schedule(3);
  ring.units = 0;
  EXPECT_REJECTED(ring, 3, "units must be at least 1");
  ring = ring_schedule(3);
  ring.min_bytes = 100;
  ring.max_bytes = 100;
  EXPECT_REJECTED(ring, 3, "message size range [100,100) is empty");
  EXPECT_REJECTED(ring_schedule(3), 0, "world size 0 must be at least 1");
}

// The all-reduce ring read as an all-gather: its reduces are refused before anything runs.
TEST(IrVerify, CopyingCollectivesRefuseReduceOps) {
  Schedule ring = ring_schedule(3);
  ring.collective = Collective::AllGather;
  EXPECT_REJECTED(ring, 3, "a reduce op, but allgather copies data and never combines it");
  ring.collective = Collective::Broadcast;
  EXPECT_REJECTED(ring, 3, "a reduce op, but broadcast copies data and never combines it");
}

TEST(IrVerify, MissingStepsLeaveRanksIncomplete) {
  Schedule ring = ring_schedule(6);
  ring.steps.pop_back();
  EXPECT_REJECTED(ring, 6, "after the last step rank", "holds 5 of 6 contributions");
  Schedule nothing;
  nothing.units = 3;
  EXPECT_REJECTED(nothing, 2, "rank 0 is never written by any op");
  EXPECT_NO_THROW(verify_schedule(nothing, 1));
}

TEST(IrVerify, ErrorsNameTheSchedule) {
  Schedule ring = ring_schedule(4);
  ring.steps.pop_back();
  EXPECT_REJECTED(ring, 4, "schedule ring: ");
  Plan plan = plan_of({ring_schedule(4), ring}, 4);
  plan.schedules[0].max_bytes = 10;
  plan.schedules[1].min_bytes = 10;
  try {
    verify_plan(plan);
    FAIL() << "accepted";
  } catch (const VerifyError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("schedule 1 (ring): ", 0), 0u) << e.what();
  }
}

TEST(IrVerify, LargeMutationIsFoundAndNamed) {
  // A 10,000-rank hierarchical plan whose local broadcast in the group of ranks 4800..4807
  // skips rank 4801: it ends with its own contribution alone, and the error says so.
  Schedule schedule = hierarchical_schedule(10'000, 8);
  Step& last = schedule.steps.edit().back();
  ASSERT_EQ(last.ops[600].group[1], 4801);
  last.ops[600].group.erase(last.ops[600].group.begin() + 1);
  EXPECT_REJECTED(schedule, 10'000, "rank 4801 is never written by any op");
  // Broadcasting only part of the range to it instead leaves units [625,1250) behind.
  schedule = hierarchical_schedule(10'000, 8);
  schedule.steps.edit().back().ops.push_back(Op{OpKind::Broadcast, 0, 625, 4800, {4800, 4801}});
  schedule.steps.edit().back().ops[600].group.erase(schedule.steps.edit().back().ops[600].group.begin() + 1);
  EXPECT_REJECTED(
      schedule, 10'000,
      "after the last step rank 4801 holds 1 of 10000 contributions on units [625,1250)",
      "(9999 in all)", "was never written");
}

// Verifying in slices (one per rank of a job): each structural fault is found by some slice,
// whatever the number of slices, with the same message verify_plan gives.
// Each schedule's slices are a permutation of the parts, and schedules of one unit (the latency
// algorithms') have their execution checked by different parts, not all by the last rank.
TEST(VerifySlice, SchedulesRotateTheirSlicesOverTheParts) {
  for (int32_t slices : {1, 2, 5, 128521}) {
    for (size_t schedules : {size_t{1}, size_t{3}, size_t{5}}) {
      std::vector<int32_t> checks_unit_zero;
      for (size_t i = 0; i < schedules; ++i) {
        std::vector<bool> seen(static_cast<size_t>(slices), false);
        for (int32_t part = 0; part < slices; ++part) {
          const int32_t slice = schedule_slice(i, schedules, part, slices);
          ASSERT_GE(slice, 0);
          ASSERT_LT(slice, slices);
          ASSERT_FALSE(seen[static_cast<size_t>(slice)]) << "slice " << slice << " twice";
          seen[static_cast<size_t>(slice)] = true;
          const UnitRange one_unit = unit_slice(1, slice, slices);
          if (one_unit.begin < one_unit.end) checks_unit_zero.push_back(part);
        }
      }
      std::sort(checks_unit_zero.begin(), checks_unit_zero.end());
      const size_t distinct = static_cast<size_t>(
          std::unique(checks_unit_zero.begin(), checks_unit_zero.end()) - checks_unit_zero.begin());
      EXPECT_EQ(distinct, std::min<size_t>(schedules, static_cast<size_t>(slices)))
          << schedules << " one-unit schedules over " << slices << " parts";
    }
  }
}

TEST(IrVerify, SlicesTogetherCheckEveryOp) {
  std::vector<std::pair<Schedule, std::string>> faults;
  Schedule ring = ring_schedule(5);
  ring.steps.edit()[2].ops[0].group[1] = 7;
  faults.emplace_back(ring, "step 2 op 0 (reduce [3,4) root 1 group 0 7): group member 7 is not "
                            "among the 5 ranks");
  ring = ring_schedule(5);
  ring.steps.edit()[6].ops[3].group = {3, 3};
  faults.emplace_back(ring, "step 6 op 3 (broadcast [2,3) root 3 group 3 3): rank 3 appears twice");
  ring = ring_schedule(5);
  ring.steps.edit()[7].ops[4].end = ring.steps.edit()[7].ops[4].begin;
  faults.emplace_back(ring, "step 7 op 4 (broadcast [2,2) root 4 group 4 0): empty range");
  for (const auto& [schedule, expected] : faults) {
    const Plan plan = plan_of({schedule}, 5);
    std::string whole;
    try {
      verify_plan(plan);
    } catch (const VerifyError& e) {
      whole = e.what();
    }
    EXPECT_NE(whole.find(expected), std::string::npos) << "whole plan: " << whole;
    for (int32_t slices = 1; slices <= 9; ++slices) {
      std::string found;
      for (int32_t slice = 0; slice < slices; ++slice) {
        try {
          verify_plan_slice(plan, slice, slices);
        } catch (const VerifyError& e) {
          if (std::string(e.what()).find(expected) != std::string::npos) found = e.what();
        }
      }
      EXPECT_FALSE(found.empty()) << slices << " slices: no slice found '" << expected << "'";
    }
  }
  EXPECT_NO_THROW(verify_plan_slice(plan_of({ring_schedule(5)}, 5), 4, 5));
  EXPECT_THROW(verify_plan_slice(plan_of({ring_schedule(5)}, 5), 5, 5), std::invalid_argument);
}

// ---- plan-level fields

TEST(IrVerifyPlan, AcceptsAWellFormedPlan) {
  EXPECT_NO_THROW(verify_plan(testing::two_range_plan(6)));
}

TEST(IrVerifyPlan, RejectsBadPlanFields) {
  auto message = [](const Plan& plan) -> std::string {
    try {
      verify_plan(plan);
    } catch (const VerifyError& e) {
      return e.what();
    }
    return "";
  };
  Plan plan = testing::two_range_plan(4);
  plan.rank_names.pop_back();
  EXPECT_NE(message(plan).find("3 rank names for a world size of 4"), std::string::npos)
      << message(plan);
  plan = testing::two_range_plan(4);
  plan.topology_hash = "XYZ";
  EXPECT_NE(message(plan).find("topology hash 'XYZ'"), std::string::npos) << message(plan);
  plan = testing::two_range_plan(4);
  plan.schedules[1].min_bytes = 1000;  // overlaps the ring's [0, 32768)
  EXPECT_NE(message(plan).find("both serve allreduce messages of 1000 bytes"), std::string::npos)
      << message(plan);
  plan = testing::two_range_plan(4);
  plan.world_size = 0;
  EXPECT_NE(message(plan).find("world size 0"), std::string::npos) << message(plan);
  plan = testing::two_range_plan(4);
  plan.rank_names.clear();
  plan.topology_hash.clear();
  EXPECT_EQ(message(plan), "");
}

// Schedules verified before (VerifiedSchedules): one that does not verify is not kept; an equal
// copy at the same world size is held, a changed one or another world size is not; verify_plan
// takes a held schedule as verified and still rejects one changed after it was kept.
TEST(IrVerify, VerifiedSchedulesHoldOnlyWhatVerified) {
  const int32_t p = 6;
  VerifiedSchedules verified;
  Schedule broken = ring_schedule(p);
  broken.steps.edit()[1].ops.pop_back();
  EXPECT_FALSE(verified.verify_and_keep(broken, p));
  EXPECT_FALSE(verified.holds(broken, p));

  const Schedule ring = ring_schedule(p);
  ASSERT_TRUE(verified.verify_and_keep(ring, p));
  const Schedule copy = ring;  // shares its steps
  EXPECT_TRUE(verified.holds(copy, p));
  EXPECT_TRUE(verified.holds(ring_schedule(p), p));  // equal, built again
  EXPECT_FALSE(verified.holds(ring, p + 1));
  Schedule changed = ring;
  changed.steps.edit()[1].ops.pop_back();
  EXPECT_FALSE(verified.holds(changed, p));
  Schedule renamed = ring;
  renamed.max_bytes = 4096;
  EXPECT_FALSE(verified.holds(renamed, p));

  EXPECT_NO_THROW(verify_plan(plan_of({ring}, p), &verified));
  EXPECT_THROW(verify_plan(plan_of({changed}, p), &verified), VerifyError);
  EXPECT_THROW(verify_plan(plan_of({broken}, p), &verified), VerifyError);
}

}  // namespace
}  // namespace flexplan::ir
