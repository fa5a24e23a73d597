// The sparse all-reduce's layout (ir/sparse_layout.hpp): machines from learner names, slices
// that cover the vector once per machine, and which slices meet.
#include <gtest/gtest.h>

#include "ir/sparse_layout.hpp"

namespace flexplan::ir {
namespace {

Plan named_plan(std::vector<std::string> names) {
  Plan plan;
  plan.world_size = static_cast<int32_t>(names.size());
  plan.rank_names = std::move(names);
  return plan;
}

TEST(SparseLayout, MachinesFromNamesInRankOrder) {
  // 2 + 3 learners, ranks interleaved across machines.
  const auto layout = sparse_layout(named_plan({"sw/m2/g0", "sw/m1/g0", "sw/m2/g1", "sw/m1/g1", "sw/m2/g2"}));
  ASSERT_EQ(layout.machines.size(), 2u);
  EXPECT_EQ(layout.machines[0], (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(layout.machines[1], (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(layout.machine_names[0], "sw/m2");
  EXPECT_EQ(layout.local_index[3], 1);
  EXPECT_EQ(layout.machine_of[4], 0);
}

TEST(SparseLayout, SlicesCoverTheVectorOncePerMachine) {
  const auto layout = sparse_layout(named_plan({"a/m0/g0", "a/m0/g1", "a/m0/g2", "a/m1/g0", "a/m1/g1",
                                                "a/m2/g0", "a/m2/g1", "a/m2/g2", "a/m2/g3"}));
  for (uint64_t count : {0u, 1u, 2u, 7u, 1000003u}) {
    for (const auto& machine : layout.machines) {
      uint64_t next = 0;
      for (int32_t rank : machine) {
        const auto s = layout.slice(rank, count);
        EXPECT_EQ(s.begin, next);
        EXPECT_LE(s.begin, s.end);
        next = s.end;
      }
      EXPECT_EQ(next, count);
    }
  }
  // 3 vs 4 learners on 12 elements: rank 1's slice [4, 8) meets m2's [3, 6) and [6, 9).
  EXPECT_EQ(layout.overlapping(2, layout.slice(1, 12), 12), (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(layout.overlapping(1, layout.slice(1, 12), 12), (std::vector<int32_t>{3, 4}));
  EXPECT_TRUE(layout.overlapping(0, layout.slice(3, 0), 0).empty());  // empty slices meet nothing
}

TEST(SparseLayout, UnnamedPlansGiveOneMachinePerRank) {
  Plan plan;
  plan.world_size = 3;
  const auto layout = sparse_layout(plan);
  EXPECT_EQ(layout.machines.size(), 3u);
  EXPECT_EQ(layout.slice(2, 10).begin, 0u);
  EXPECT_EQ(layout.slice(2, 10).end, 10u);
}

TEST(SparseLayout, NamesThatDoNotMatchTheWorldAreRefused) {
  Plan plan = named_plan({"a/m0/g0", "a/m0/g1"});
  plan.world_size = 3;
  EXPECT_THROW(sparse_layout(plan), std::invalid_argument);
}

}  // namespace
}  // namespace flexplan::ir
