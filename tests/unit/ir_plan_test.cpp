// Enum names, their inverses, Op::root_in_group and select_schedule.
#include <gtest/gtest.h>

#include "ir/plan.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

TEST(IrPlan, NamesRoundTrip) {
  for (OpKind kind : {OpKind::Reduce, OpKind::Broadcast})
    EXPECT_EQ(op_kind_from_string(to_string(kind)), kind);
  for (Phase phase : {Phase::ReduceScatter, Phase::AllGather, Phase::Reduce, Phase::Broadcast}) {
    EXPECT_EQ(phase_from_string(to_string(phase)), phase);
  }
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                       Collective::Broadcast, Collective::Reduce}) {
    EXPECT_EQ(collective_from_string(to_string(c)), c);
  }
  EXPECT_EQ(to_string(Collective::AllReduce), "allreduce");
  EXPECT_EQ(to_string(Phase::ReduceScatter), "reduce_scatter");
}

TEST(IrPlan, UnknownNamesAreRejectedByName) {
  try {
    phase_from_string("gather");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown phase 'gather'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("reduce_scatter"), std::string::npos) << e.what();
  }
  EXPECT_THROW(op_kind_from_string("Reduce"), std::invalid_argument);
  EXPECT_THROW(collective_from_string(""), std::invalid_argument);
}

TEST(IrPlan, RootInGroup) {
  EXPECT_TRUE((Op{OpKind::Reduce, 0, 1, 2, {1, 2}}.root_in_group()));
  EXPECT_FALSE((Op{OpKind::Reduce, 0, 1, 3, {1, 2}}.root_in_group()));
}

// The one selection: by collective, root and size; a forced algorithm serves every size, by its
// schedule for the size where it has one.
TEST(IrPlan, FindScheduleIsTheOneSelection) {
  Plan plan = testing::two_range_plan(4);  // allreduce: ring [0, 32768), tree [32768, inf)
  Schedule broadcast = plan.schedules[0];
  broadcast.collective = Collective::Broadcast;
  broadcast.root = 2;
  broadcast.max_bytes.reset();
  broadcast.algorithm = "chain";
  plan.schedules.push_back(broadcast);
  EXPECT_EQ(find_schedule(plan, {Collective::AllReduce, 100}), 0u);
  EXPECT_EQ(find_schedule(plan, {Collective::AllReduce, 1 << 20}), 1u);
  EXPECT_EQ(find_schedule(plan, {Collective::AllReduce, 1 << 20, 0, "ring"}), 0u);  // forced
  EXPECT_EQ(find_schedule(plan, {Collective::AllReduce, 100, 0, "tree"}), 1u);
  EXPECT_EQ(find_schedule(plan, {Collective::AllReduce, 100, 0, "chain"}), std::nullopt);
  EXPECT_EQ(find_schedule(plan, {Collective::Broadcast, 100, 2}), 2u);
  EXPECT_EQ(find_schedule(plan, {Collective::Broadcast, 100, 1}), std::nullopt);
  EXPECT_EQ(algorithms_of(plan, Collective::AllReduce), (std::vector<std::string>{"ring", "tree"}));
  EXPECT_EQ(algorithms_of(plan, Collective::Broadcast, 2), (std::vector<std::string>{"chain"}));
}

TEST(IrPlan, SelectScheduleBySize) {
  const Plan plan = testing::two_range_plan(4);
  EXPECT_EQ(select_schedule(plan, Collective::AllReduce, 0).algorithm, "ring");
  EXPECT_EQ(select_schedule(plan, Collective::AllReduce, 32767).algorithm, "ring");
  EXPECT_EQ(select_schedule(plan, Collective::AllReduce, 32768).algorithm, "tree");
  EXPECT_EQ(select_schedule(plan, Collective::AllReduce, UINT64_MAX).algorithm, "tree");
  EXPECT_THROW(select_schedule(plan, Collective::Broadcast, 10), std::out_of_range);
  Plan gap = plan;
  gap.schedules[1].min_bytes = 40000;
  EXPECT_THROW(select_schedule(gap, Collective::AllReduce, 35000), std::out_of_range);
}

TEST(IrPlan, UnitToElementSpreadsEvenly) {
  EXPECT_EQ(unit_to_element(0, 12, 100), 0u);
  EXPECT_EQ(unit_to_element(6, 12, 100), 50u);
  EXPECT_EQ(unit_to_element(12, 12, 100), 100u);
  EXPECT_EQ(unit_to_element(UINT64_MAX, UINT64_MAX, 7), 7u);
}

}  // namespace
}  // namespace flexplan::ir
