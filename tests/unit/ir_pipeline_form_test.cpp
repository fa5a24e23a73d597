// Pipelines and their base (ir/pipeline_form.hpp): a schedule named "x@S" is recognised as a
// pipeline only when it is the expansion of a base op for op, and the verifier, which then
// checks only the base, still rejects every pipeline that is wrong in any slice. A pipeline
// held compact is the same pipeline in every form.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/errors.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_json.hpp"
#include "ir/plan_text.hpp"
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

// The expansion by its definition, written out independently of pipeline_form.cpp: slice j
// runs base step k in step j + k, its ranges moved up by j * units; within a step, slices in
// ascending order.
std::vector<std::vector<Op>> expansion_by_definition(const Schedule& base, uint32_t slices) {
  std::vector<std::vector<Op>> steps(base.steps.empty() ? 0 : base.steps.size() + slices - 1);
  for (uint32_t j = 0; j < slices; ++j)
    for (size_t k = 0; k < base.steps.size(); ++k)
      for (Op op : base.steps[k].ops) {
        op.begin += j * base.units;
        op.end += j * base.units;
        steps[j + k].push_back(op);
      }
  return steps;
}

// expand_pipeline and the helpers that read the expansion from its base (step count, labels,
// ops in order, each slice's op offset) agree with the definition on every step.
TEST(PipelineForm, ExpansionReadFromTheBaseMatchesItsDefinition) {
  for (const Schedule& base : {ring_schedule(5), tree_schedule(7), hierarchical_schedule(8, 4)}) {
    const uint32_t m = static_cast<uint32_t>(base.steps.size());
    for (uint32_t slices : {1u, 2u, 3u, m, m + 4}) {
      const auto expected = expansion_by_definition(base, slices);
      const Schedule piped = expand_pipeline(base, slices);
      ASSERT_EQ(expanded_step_count(base, slices), expected.size());
      ASSERT_EQ(piped.steps.size(), expected.size());
      for (size_t t = 0; t < expected.size(); ++t) {
        EXPECT_EQ(piped.steps[t].ops, expected[t]) << piped.algorithm << " step " << t;
        // Labelled by the frontmost slice's step: the first op of step t is base step
        // min(t, m - 1)'s.
        const Step& label = base.steps[expanded_step_label(base, t)];
        EXPECT_EQ(expanded_step_label(base, t), std::min<size_t>(t, m - 1));
        EXPECT_EQ(label.phase, piped.steps[t].phase);
        EXPECT_EQ(label.level, piped.steps[t].level);
        size_t index = 0, previous_slice = SIZE_MAX;
        for_each_expanded_op(base, slices, t, [&](size_t j, const Op& op) {
          if (j != previous_slice) {
            EXPECT_EQ(expanded_op_offset(base, t, j), index) << base.algorithm << " step " << t << " slice " << j;
            previous_slice = j;
          }
          ASSERT_LT(index, expected[t].size());
          Op moved = op;
          moved.begin += j * base.units;
          moved.end += j * base.units;
          EXPECT_EQ(moved, expected[t][index]) << base.algorithm << "@" << slices << " step " << t << " op " << index;
          ++index;
        });
        EXPECT_EQ(index, expected[t].size()) << base.algorithm << "@" << slices << " step " << t;
        EXPECT_EQ(expanded_op_offset(base, t, last_slice_in_step(slices, t) + 1), index);
        // Op by op, from the compact form (as the runtime names a failing op).
        const Schedule compact = compact_pipeline(base, slices);
        for (size_t o = 0; o < expected[t].size(); ++o) {
          const auto [op, offset] = expanded_op(compact, t, o);
          EXPECT_EQ(op->begin + offset, expected[t][o].begin);
          EXPECT_EQ(op->end + offset, expected[t][o].end);
          EXPECT_EQ(op->root, expected[t][o].root);
          EXPECT_EQ(op->group, expected[t][o].group);
        }
        EXPECT_THROW(expanded_op(compact, t, expected[t].size()), std::out_of_range);
      }
    }
  }
  for (const Schedule& base : {ring_schedule(5), tree_schedule(7)})
    for (uint32_t slices : {1u, 4u})
      EXPECT_EQ(expanded_op_count(compact_pipeline(base, slices)), [&] {
        uint64_t ops = 0;
        for (const Step& step : expand_pipeline(base, slices).steps) ops += step.ops.size();
        return ops;
      }());
  Schedule empty = ring_schedule(3);
  empty.steps.clear();
  EXPECT_EQ(expanded_step_count(empty, 4), 0u);
  EXPECT_TRUE(expand_pipeline(empty, 4).steps.empty());
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
  tampered.steps.edit().back().ops.back().root = (tampered.steps.edit().back().ops.back().root + 1) % 4;
  EXPECT_FALSE(pipeline_base(tampered));
  // An op dropped from a middle step.
  tampered = piped;
  tampered.steps.edit()[2].ops.pop_back();
  EXPECT_FALSE(pipeline_base(tampered));
  // The label of the last step changed: it is base step m - 1's, which step m - 1 also
  // carries. (A label that occurs once is the base's own label, still an expansion.)
  tampered = piped;
  tampered.steps.edit().back().level += 1;
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
  wrong.steps.edit().back().ops.pop_back();
  EXPECT_THROW(verify_schedule(wrong, 4), VerifyError);

  // A wrong base makes a wrong pipeline, reported under the pipeline's name.
  Schedule bad_base = base;
  bad_base.steps.edit().back().ops.pop_back();
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

// A pipeline held compact (Schedule::slices) is the same pipeline as the expansion: it
// materializes to it, is written to plan.bin byte for byte alike (and read back compact),
// prints alike, verifies alike, and code that would read it as a whole schedule refuses it.
TEST(PipelineForm, CompactPipelinesAreTheSamePipeline) {
  for (const Schedule& base : {ring_schedule(5), tree_schedule(7), hierarchical_schedule(8, 4)}) {
    const int32_t world = base.algorithm == "hierarchical" ? 8 : base.algorithm == "tree" ? 7 : 5;
    for (uint32_t slices : {2u, 3u, 7u}) {
      const Schedule compact = compact_pipeline(base, slices);
      const Schedule whole = expand_pipeline(base, slices);
      EXPECT_EQ(compact.slices, slices);
      EXPECT_EQ(compact.algorithm, whole.algorithm);
      EXPECT_EQ(expanded_units(compact), whole.units);
      EXPECT_EQ(materialize(compact), whole);
      EXPECT_EQ(materialize(whole), whole);
      const auto found = pipeline_base(compact);
      ASSERT_TRUE(found);
      EXPECT_EQ(found->slices, slices);
      EXPECT_EQ(found->base, base);

      const Plan compact_plan = plan_of({compact}, world), whole_plan = plan_of({whole}, world);
      EXPECT_EQ(encode_plan(compact_plan), encode_plan(whole_plan)) << compact.algorithm;
      EXPECT_EQ(decode_plan(encode_plan(compact_plan), "mem"), compact_plan) << "read back compact";
      EXPECT_EQ(decode_plan(encode_plan(whole_plan), "mem"), compact_plan) << "an expansion too";
      EXPECT_EQ(materialize(compact_plan), whole_plan);
      EXPECT_EQ(print_plan_text(compact_plan), print_plan_text(whole_plan));
      EXPECT_EQ(plan_to_json(compact_plan), plan_to_json(whole_plan));
      EXPECT_NO_THROW(verify_plan(compact_plan));
      for (int32_t part = 0; part < 3; ++part) EXPECT_NO_THROW(verify_plan_slice(compact_plan, part, 3));

      EXPECT_THROW(require_materialized(compact, "test"), std::logic_error);
      EXPECT_NO_THROW(require_materialized(whole, "test"));
      EXPECT_THROW(expand_pipeline(compact, 2), std::invalid_argument) << "a pipeline of a pipeline";
      EXPECT_THROW(compact_pipeline(compact, 2), std::invalid_argument);
    }
  }
}

// A compact pipeline of a wrong base is rejected with the very message its expansion gets, by
// the whole check and by each rank's slice of it: a base missing an op (its first fault is in
// slice 0, where base and expansion agree on steps and units), and a base whose op runs past
// its units (the expansion's first fault is that op in the last slice, a later step).
// The verifier's message for a check, or "verified".
std::string verify_message(const std::function<void()>& check) {
  try {
    check();
  } catch (const VerifyError& e) {
    return std::string(e.what());
  }
  return std::string("verified");
}

TEST(PipelineForm, CompactPipelineOfAWrongBaseIsRejectedAsItsExpansionIs) {
  Schedule missing_op = ring_schedule(4);
  missing_op.steps.edit().back().ops.pop_back();
  Schedule past_units = ring_schedule(4);
  past_units.steps.edit().back().ops.back().end = past_units.units + 1;
  for (const Schedule& bad_base : {missing_op, past_units}) {
    const Plan compact = plan_of({compact_pipeline(bad_base, 3)}, 4);
    const Plan whole = plan_of({expand_pipeline(bad_base, 3)}, 4);
    const std::string expected = verify_message([&] { verify_plan(whole); });
    EXPECT_NE(expected, "verified");
    EXPECT_NE(expected.find("ring@3"), std::string::npos) << expected;
    EXPECT_EQ(verify_message([&] { verify_plan(compact); }), expected);
    int rejected = 0;
    for (int32_t part = 0; part < 4; ++part) {
      const std::string expected_part = verify_message([&] { verify_plan_slice(whole, part, 4); });
      EXPECT_EQ(verify_message([&] { verify_plan_slice(compact, part, 4); }), expected_part) << "part " << part;
      rejected += expected_part != "verified";
    }
    EXPECT_GT(rejected, 0);
  }
}

// A base without steps: its pipeline has none either, and is held whole.
TEST(PipelineForm, CompactPipelineOfAnEmptyBaseIsItsExpansion) {
  Schedule empty = ring_schedule(3);
  empty.steps.clear();
  EXPECT_EQ(compact_pipeline(empty, 4), expand_pipeline(empty, 4));
  EXPECT_EQ(encode_plan(plan_of({compact_pipeline(empty, 4)}, 3)), encode_plan(plan_of({expand_pipeline(empty, 4)}, 3)));
}

// What the limits count: every op a rank takes part in, in its group or as its root, once.
TEST(PipelineForm, FootprintCountsEachRanksOps) {
  Schedule base = ring_schedule(4);
  base.steps = {Step{}};
  base.steps.edit()[0].ops = {Op{OpKind::Reduce, 0, 1, 0, {1, 2}}, Op{OpKind::Reduce, 1, 2, 0, {0, 1}},
                       Op{OpKind::Broadcast, 2, 3, 3, {3}}, Op{OpKind::Reduce, 3, 4, 9, {1}}};
  const PipelineFootprint footprint = pipeline_footprint(base, 4);
  EXPECT_EQ(footprint.ops, 4u);
  EXPECT_EQ(footprint.group_members, 6u);
  EXPECT_EQ(footprint.largest_rank_ops, 3u) << "rank 1: in three groups; rank 9 is outside the world";
  EXPECT_EQ(pipeline_footprint(base, 2).largest_rank_ops, 3u);
  // A world far larger than the schedule is counted by sorting (no table by rank): the same.
  EXPECT_EQ(pipeline_footprint(base, INT32_MAX).largest_rank_ops, 3u);
  // A small plan.bin claiming such a world decodes without a table of two billion ranks.
  Plan huge_world;
  huge_world.world_size = INT32_MAX;
  huge_world.schedules = {compact_pipeline(ring_schedule(4), 2)};
  EXPECT_EQ(decode_plan_unverified(encode_plan(huge_world), "mem"), huge_world);
}

// The limits hold exactly at their values and refuse one more, with the reason named.
TEST(PipelineForm, LimitsHoldExactly) {
  EXPECT_EQ(pipeline_beyond_limits({kMaxExpandedOps / 1000, 0, 1}, 1000), "");
  EXPECT_NE(pipeline_beyond_limits({kMaxExpandedOps / 1000 + 1, 0, 1}, 1000).find("ops"), std::string::npos);
  EXPECT_EQ(pipeline_beyond_limits({1, kMaxExpandedGroupMembers / 1000, 1}, 1000), "");
  EXPECT_NE(pipeline_beyond_limits({1, kMaxExpandedGroupMembers / 1000 + 1, 1}, 1000).find("group members"),
            std::string::npos);
  EXPECT_EQ(pipeline_beyond_limits({1, 1, kMaxRankExpandedOps / 1000}, 1000), "");
  EXPECT_NE(pipeline_beyond_limits({1, 1, kMaxRankExpandedOps / 1000 + 1}, 1000).find("one rank"),
            std::string::npos);
  EXPECT_NE(pipeline_beyond_limits({1, 1, 1}, kMaxPipelineSlices + 1).find("slices"), std::string::npos);
  // No overflow on huge counts.
  EXPECT_NE(pipeline_beyond_limits({uint64_t{1} << 62, 1, 1}, 1000), "");
}

// plan.bin refuses a pipeline beyond the limits, in the whole or in one rank's share, naming
// the schedule; just within them it loads.
TEST(PipelineForm, PlanBinRefusesPipelinesBeyondTheLimits) {
  const auto decode_error = [](const Plan& plan) {
    try {
      decode_plan_unverified(encode_plan(plan), "plan.bin");
    } catch (const PlanFormatError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Rank 0 roots every op of a two-rank base: its share is the whole expansion.
  const auto pairs = [](int32_t world, uint64_t ops) {
    Schedule base;
    base.algorithm = "pairs";
    base.units = ops;
    base.steps = {Step{}};
    for (uint64_t k = 0; k < ops; ++k) {
      const int32_t low = static_cast<int32_t>(2 * (k % static_cast<uint64_t>(world / 2)));
      base.steps.edit()[0].ops.push_back(Op{OpKind::Reduce, k, k + 1, low, {low, low + 1}});
    }
    return base;
  };
  const uint32_t slices = kMaxPipelineSlices;
  const uint64_t rank_ops = kMaxRankExpandedOps / slices;
  EXPECT_EQ(decode_error(plan_of({compact_pipeline(pairs(2, rank_ops), slices)}, 2)), "accepted");
  const std::string share = decode_error(plan_of({compact_pipeline(pairs(2, rank_ops + 1), slices)}, 2));
  EXPECT_NE(share.find("'pairs@1024'"), std::string::npos) << share;
  EXPECT_NE(share.find("one rank would take part in"), std::string::npos) << share;
  // Spread over many ranks, the whole expansion is the limit.
  const uint64_t ops = kMaxExpandedOps / slices + 1;
  const std::string whole = decode_error(plan_of({compact_pipeline(pairs(64, ops), slices)}, 64));
  EXPECT_NE(whole.find("ops and"), std::string::npos) << whole;
}

// Held whole only up to kMaxMaterializedOps: beyond, the tools that print or compile a plan get
// an error naming the schedule, and the pipeline still loads compact.
TEST(PipelineForm, MaterializeRefusesExpansionsTooLargeToHold) {
  Schedule base;
  base.algorithm = "pairs";
  const uint64_t ops = kMaxMaterializedOps / kMaxPipelineSlices + 1;
  base.units = ops;
  base.steps = {Step{}};
  for (uint64_t k = 0; k < ops; ++k) {
    const auto low = static_cast<int32_t>(2 * (k % 32));
    base.steps.edit()[0].ops.push_back(Op{OpKind::Reduce, k, k + 1, low, {low, low + 1}});
  }
  const Schedule big = compact_pipeline(base, kMaxPipelineSlices);
  try {
    materialize(big);
    ADD_FAILURE() << "expanded";
  } catch (const TooLargeToExpand& e) {
    EXPECT_NE(std::string(e.what()).find("'pairs@1024' expands to 32001024 ops"), std::string::npos) << e.what();
  }
  EXPECT_EQ(decode_plan_unverified(encode_plan(plan_of({big}, 64)), "mem").schedules.at(0).slices, kMaxPipelineSlices);
  EXPECT_EQ(materialize(compact_pipeline(ring_schedule(4), 3)), expand_pipeline(ring_schedule(4), 3));
}

// Pipelines of one base hold the same steps and are verified once; a schedule with the same
// steps but other units or another collective is still checked, whole or in parts.
TEST(PipelineForm, RepeatedStepsAreVerifiedOnce) {
  const auto ranged = [](Schedule schedule, uint64_t min_bytes, std::optional<uint64_t> max_bytes) {
    schedule.min_bytes = min_bytes;
    schedule.max_bytes = max_bytes;
    return schedule;
  };
  const Schedule base = ring_schedule(4);
  const Plan shared = plan_of({ranged(compact_pipeline(base, 2), 0, 1024), ranged(compact_pipeline(base, 4), 1024, 4096),
                               ranged(base, 4096, std::nullopt)},
                              4);
  EXPECT_EQ(verify_message([&] { verify_plan(shared); }), "verified");
  // A repeat's own fields are still checked: an empty byte range between two others.
  const Plan empty_range = plan_of({ranged(base, 0, 100), ranged(base, 100, 100), ranged(base, 100, std::nullopt)}, 4);
  EXPECT_NE(verify_message([&] { verify_plan(empty_range); }).find("schedule 1 (ring): message size range [100,100) is empty"),
            std::string::npos)
      << verify_message([&] { verify_plan(empty_range); });
  for (int32_t part = 0; part < 4; ++part)
    EXPECT_NE(verify_message([&] { verify_plan_slice(empty_range, part, 4); }), "verified") << "part " << part;
  Schedule wider = base;
  wider.units *= 2;  // the same steps leave half the units unreduced
  Schedule other = base;
  other.collective = Collective::Broadcast;
  for (const Schedule& repeat : {wider, other}) {
    // Every all-reduce size served once: the repeat takes the larger sizes, or all of its own
    // collective's.
    const bool allreduce = repeat.collective == Collective::AllReduce;
    const Plan plan = plan_of({ranged(compact_pipeline(base, 2), 0, allreduce ? std::optional<uint64_t>(1024) : std::nullopt),
                               ranged(repeat, allreduce ? 1024 : 0, std::nullopt)},
                              4);
    const std::string whole = verify_message([&] { verify_plan(plan); });
    EXPECT_NE(whole.find("schedule 1"), std::string::npos) << whole;
    int rejected = 0;
    for (int32_t part = 0; part < 4; ++part) rejected += verify_message([&] { verify_plan_slice(plan, part, 4); }) != "verified";
    EXPECT_GT(rejected, 0);
  }
}

}  // namespace
}  // namespace flexplan::ir

namespace flexplan::ir {
namespace {

// A rooted collective's pipeline keeps its root when expanded and when its base is recovered
// (expand_pipeline once dropped it: `inspect` and in-process plans then named root 0 for a
// pipeline planned for another root).
TEST(PipelineForm, RootSurvivesExpansionAndBaseRecovery) {
  Schedule base;
  base.algorithm = "bcast";
  base.collective = Collective::Broadcast;
  base.root = 2;
  base.units = 1;
  Step step;
  step.phase = Phase::Broadcast;
  Op op;
  op.kind = OpKind::Broadcast;
  op.begin = 0;
  op.end = 1;
  op.root = 2;
  op.group = RankList({2, 0, 1});
  step.ops.push_back(op);
  base.steps = std::vector<Step>{step};
  verify_schedule(base, 3);
  const Schedule compact = compact_pipeline(base, 4);
  const Schedule whole = expand_pipeline(base, 4);
  EXPECT_EQ(compact.root, 2);
  EXPECT_EQ(whole.root, 2);
  EXPECT_NO_THROW(verify_schedule(whole, 3));
  EXPECT_EQ(materialize(compact).root, 2);
  const auto recovered = pipeline_base(whole);
  ASSERT_TRUE(recovered);
  EXPECT_EQ(recovered->base.root, 2);
  EXPECT_EQ(recovered->slices, 4u);
}

}  // namespace
}  // namespace flexplan::ir
