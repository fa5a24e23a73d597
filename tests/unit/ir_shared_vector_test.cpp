// SharedVector (ir/shared_vector.hpp): copies share their elements until one is changed, a change
// is never seen by another holder, and schedules that plan.bin names another's steps for, and the
// planner's pipelines of one base, hold their steps once.
#include <gtest/gtest.h>

#include <vector>

#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/shared_vector.hpp"
#include "ir/verify.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

TEST(SharedVector, CopiesShareUntilOneChanges) {
  SharedVector<int> a = std::vector<int>{1, 2, 3};
  SharedVector<int> b = a;
  EXPECT_TRUE(a.shares(b));
  EXPECT_EQ(&a[0], &b[0]);
  b.edit()[1] = 20;  // b takes its own copy first
  EXPECT_FALSE(a.shares(b));
  EXPECT_EQ(a.get(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(b.get(), (std::vector<int>{1, 20, 3}));
  b.push_back(4);
  EXPECT_EQ(a.size(), 3u);
  // Reading a copy never detaches it.
  SharedVector<int> c = a;
  int sum = 0;
  for (int x : c) sum += x;
  EXPECT_EQ(sum, 6);
  EXPECT_TRUE(c.shares(a));
  // Equal whether shared or not; an empty one shares nothing.
  EXPECT_EQ(c, SharedVector<int>(std::vector<int>{1, 2, 3}));
  SharedVector<int> empty, other_empty;
  EXPECT_EQ(empty, other_empty);
  EXPECT_FALSE(empty.shares(other_empty));
  EXPECT_TRUE(empty.empty());
  empty.emplace_back(7);
  EXPECT_EQ(empty.front(), 7);
  c.clear();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(a.size(), 3u);
  // insert and erase at positions read before the copy.
  SharedVector<int> d = a;
  const std::vector<int> more{9, 9};
  d.insert(d.begin() + 1, more.begin(), more.end());
  d.erase(d.begin(), d.begin() + 1);
  EXPECT_EQ(d.get(), (std::vector<int>{9, 9, 2, 3}));
  EXPECT_EQ(a.get(), (std::vector<int>{1, 2, 3}));
}

// plan.bin writes a pipeline's base once and names it for the other slice counts; decoded, they
// hold one copy of the steps, and changing one leaves the others as they were.
TEST(SharedVector, DecodedNamedStepsAreHeldOnce) {
  const Schedule base = testing::ring_schedule(4);
  Plan plan = testing::plan_of({compact_pipeline(base, 2), compact_pipeline(base, 4), base}, 4);
  plan.schedules[0].max_bytes = 1024;
  plan.schedules[1].min_bytes = 1024;
  plan.schedules[1].max_bytes = 4096;
  plan.schedules[2].min_bytes = 4096;
  Plan decoded = decode_plan_unverified(encode_plan(plan), "mem");
  ASSERT_EQ(decoded, plan);
  EXPECT_TRUE(decoded.schedules[1].steps.shares(decoded.schedules[0].steps));
  EXPECT_TRUE(decoded.schedules[2].steps.shares(decoded.schedules[0].steps));
  verify_plan(decoded);
  decoded.schedules[2].steps.edit()[0].ops.clear();
  EXPECT_EQ(decoded.schedules[0].steps, plan.schedules[0].steps);
  EXPECT_THROW(verify_plan(decoded), VerifyError) << "the changed copy is checked on its own";
}

}  // namespace
}  // namespace flexplan::ir
