// Pipelines and their base (ir/pipeline_form.hpp): a schedule named "x@S" is recognised as a
// pipeline only when it is the expansion of a base op for op, and the verifier, which then
// checks only the base, still rejects every pipeline that is wrong in any slice.
#include <gtest/gtest.h>

#include <string>

#include "ir/pipeline_form.hpp"
#include "ir/verify.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

using testing::hierarchical_schedule;
using testing::plan_of;
using testing::ring_schedule;
using testing::tree_schedule;

TEST(PipelineForm, ExpansionsGiveBackTheirBase) {
  for (const Schedule& base : {ring_schedule(5), tree_schedule(7), hierarchical_schedule(8, 4)}) {
    const uint32_t m = static_cast<uint32_t>(base.steps.size());
    for (uint32_t slices : {2u, 3u, m, m + 4}) {
      const Schedule piped = expand_pipeline(base, slices);
      EXPECT_EQ(piped.steps.size(), base.steps.size() + slices - 1);
      EXPECT_EQ(piped.units, base.units * slices);
      const auto found = pipeline_base(piped);
      ASSERT_TRUE(found) << piped.algorithm;
      EXPECT_EQ(found->slices, slices);
      EXPECT_EQ(found->base, base) << piped.algorithm;
    }
  }
}

TEST(PipelineForm, OnlyExactExpansionsAreRecognised) {
  const Schedule base = ring_schedule(4);
  EXPECT_FALSE(pipeline_base(base)) << "no @ in the name";
  Schedule piped = expand_pipeline(base, 3);
  Schedule renamed = piped;
  renamed.algorithm = "ring@2";
  EXPECT_FALSE(pipeline_base(renamed)) << "wrong slice count";
  renamed.algorithm = "ring@x";
  EXPECT_FALSE(pipeline_base(renamed));
  // One op of the last slice moved to another root: no longer an expansion.
  Schedule tampered = piped;
  tampered.steps.back().ops.back().root = (tampered.steps.back().ops.back().root + 1) % 4;
  EXPECT_FALSE(pipeline_base(tampered));
  // An op dropped from a middle step.
  tampered = piped;
  tampered.steps[2].ops.pop_back();
  EXPECT_FALSE(pipeline_base(tampered));
  // The label of the last step changed: it is base step m - 1's, which step m - 1 also
  // carries. (A label that occurs once is the base's own label, still an expansion.)
  tampered = piped;
  tampered.steps.back().level += 1;
  EXPECT_FALSE(pipeline_base(tampered));
}

// The verifier checks the base of a pipeline; a pipeline wrong in one slice only is not a
// pipeline of any base, so it is checked whole and rejected.
TEST(PipelineForm, VerifierRejectsPipelinesWrongInOneSlice) {
  const Schedule base = ring_schedule(4);
  const Schedule piped = expand_pipeline(base, 3);
  EXPECT_NO_THROW(verify_schedule(piped, 4));
  EXPECT_NO_THROW(verify_plan(plan_of({piped}, 4)));
  for (int32_t slice = 0; slice < 4; ++slice)
    EXPECT_NO_THROW(verify_plan_slice(plan_of({piped}, 4), slice, 4)) << slice;

  // The last step holds only the last slice: drop its one op there.
  Schedule wrong = piped;
  wrong.steps.back().ops.pop_back();
  EXPECT_THROW(verify_schedule(wrong, 4), VerifyError);

  // A wrong base makes a wrong pipeline, reported under the pipeline's name.
  Schedule bad_base = base;
  bad_base.steps.back().ops.pop_back();
  const Schedule bad_piped = expand_pipeline(bad_base, 3);
  ASSERT_TRUE(pipeline_base(bad_piped));
  try {
    verify_schedule(bad_piped, 4);
    ADD_FAILURE() << "a pipeline of a wrong base verified";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("ring@3"), std::string::npos) << e.what();
  }
  bool rejected = false;
  for (int32_t slice = 0; slice < 4; ++slice) {
    try {
      verify_plan_slice(plan_of({bad_piped}, 4), slice, 4);
    } catch (const VerifyError&) {
      rejected = true;
    }
  }
  EXPECT_TRUE(rejected) << "some rank's slice must reject a pipeline of a wrong base";
}

}  // namespace
}  // namespace flexplan::ir
