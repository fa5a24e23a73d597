// The text form: printing the example plan, round trips, comments, and parse errors that name
// line and column.
#include <gtest/gtest.h>

#include <string>

#include "ir/plan_binary.hpp"
#include "ir/plan_text.hpp"
#include "ir/verify.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

// The two-machine example (2 + 3 GPUs) with a hand-written two-level schedule over 6 units.
Plan example_plan() {
  Plan plan;
  plan.world_size = 5;
  plan.topology_name = "two-machines-2+3";
  plan.topology_hash = "1f2e3d4c5b6a7980";
  plan.rank_names = {"switch/m0/gpu0", "switch/m0/gpu1", "switch/m1/gpu0", "switch/m1/gpu1",
                     "switch/m1/gpu2"};
  Schedule schedule;
  schedule.algorithm = "flexreduce";
  schedule.units = 12;
  schedule.steps = {
      Step{Phase::ReduceScatter,
           0,
           {Op{OpKind::Reduce, 0, 6, 0, {0, 1}}, Op{OpKind::Reduce, 6, 12, 1, {0, 1}}}}};
  plan.schedules = {schedule};
  return plan;
}

std::string parse_error(const std::string& text) {
  try {
    parse_plan_text(text, "plan.txt");
  } catch (const PlanFormatError& e) {
    return e.what();
  }
  return "";
}

TEST(IrText, PrintsOneOpALine) {
  EXPECT_EQ(print_plan_text(example_plan()),
            "flexplan-plan 1\n"
            "world_size 5\n"
            "topology \"two-machines-2+3\" 1f2e3d4c5b6a7980\n"
            "rank 0 \"switch/m0/gpu0\"\n"
            "rank 1 \"switch/m0/gpu1\"\n"
            "rank 2 \"switch/m1/gpu0\"\n"
            "rank 3 \"switch/m1/gpu1\"\n"
            "rank 4 \"switch/m1/gpu2\"\n"
            "schedule flexreduce allreduce bytes 0..inf units 12\n"
            "  step reduce_scatter level 0\n"
            "    reduce [0,6) root 0 group 0 1\n"
            "    reduce [6,12) root 1 group 0 1\n");
}

TEST(IrText, RoundTrips) {
  for (const Plan& plan : {example_plan(), testing::two_range_plan(6),
                           testing::plan_of({testing::hierarchical_schedule(19, 4)}, 19)}) {
    EXPECT_EQ(parse_plan_text(print_plan_text(plan), "mem"), plan);
  }
}

TEST(IrText, RoundTripsAwkwardNames) {
  Plan plan = testing::two_range_plan(3);
  plan.topology_name = "";
  plan.topology_hash.clear();
  plan.rank_names = {"a b", "quote\"back\\slash", "tab\tnew\nline\x01#"};
  plan.schedules[0].algorithm = "my ring";
  plan.schedules[1].algorithm = "";
  plan.schedules[1].steps.edit()[0].level = -3;
  plan.schedules[0].max_bytes = UINT64_MAX;
  const std::string text = print_plan_text(plan);
  EXPECT_NE(text.find("topology \"\" -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\"tab\\tnew\\nline\\x01#\""), std::string::npos) << text;
  EXPECT_EQ(parse_plan_text(text, "mem"), plan);
}

// Found by fuzzing: a hash that is the text "-" was printed bare, which reads back as no hash.
TEST(IrText, RoundTripsAHashSpelledLikeNoHash) {
  Plan plan = testing::two_range_plan(3);
  plan.topology_hash = "-";
  const std::string text = print_plan_text(plan);
  EXPECT_NE(text.find(" \"-\"\n"), std::string::npos) << text;
  EXPECT_EQ(parse_plan_text(text, "mem"), plan);
  plan.topology_hash.clear();
  EXPECT_EQ(parse_plan_text(print_plan_text(plan), "mem"), plan);
}

TEST(IrText, CommentsAndIndentationAreFree) {
  const std::string text =
      "# a plan written by hand\n"
      "flexplan-plan 1   # format\n"
      "\n"
      "world_size 2\n"
      "topology \"pair # not a comment\" -\n"
      "schedule ring allreduce bytes 0..100 units 2\n"
      "step reduce_scatter level 0\n"
      "reduce [0,1) root 1 group 0 1 # chunk 0\n"
      "        reduce [1,2) root 0 group 1 0\n";
  const Plan plan = parse_plan_text(text, "mem");
  EXPECT_EQ(plan.topology_name, "pair # not a comment");
  ASSERT_EQ(plan.schedules.size(), 1u);
  EXPECT_EQ(plan.schedules[0].max_bytes, 100u);
  ASSERT_EQ(plan.schedules[0].steps.size(), 1u);
  EXPECT_EQ(plan.schedules[0].steps[0].ops[1], (Op{OpKind::Reduce, 1, 2, 0, {1, 0}}));
}

// The text form holds whatever plan.bin and JSON hold, wrong plans included, so that every
// form round-trips; the verifier then says what is wrong (found by fuzzing: an empty group).
TEST(IrText, HoldsWhatTheVerifierRejects) {
  Plan plan = testing::two_range_plan(3);
  plan.schedules[0].steps.edit()[0].ops[0].group.clear();
  plan.schedules[1].units = 0;
  const Plan back = parse_plan_text(print_plan_text(plan), "plan.txt");
  EXPECT_EQ(back, plan);
  EXPECT_EQ(decode_plan_unverified(encode_plan(plan), "plan.bin"), back);
  try {
    verify_plan(back);
    ADD_FAILURE() << "verified";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("empty group"), std::string::npos) << e.what();
  }
}

TEST(IrText, ErrorsNameLineAndColumn) {
  const std::string head = "flexplan-plan 1\nworld_size 2\ntopology \"t\" -\n";
  EXPECT_EQ(parse_error(""),
            "plan.txt:1:1: unexpected end of text, expected the header 'flexplan-plan 1'");
  EXPECT_EQ(
      parse_error("flexplan-plan 2\n"),
      "plan.txt:1:15: text format version 2 is not supported (this flexplan reads version 1)");
  EXPECT_EQ(parse_error("flexplan-plan 1\nworld_size -3\n"),
            "plan.txt:2:12: world size must be an integer of at least 1, found '-3'");
  EXPECT_EQ(parse_error(head + "rank 1 \"x\"\n"),
            "plan.txt:4:6: expected rank 0 next (rank lines list the ranks in order)");
  EXPECT_EQ(
      parse_error(head + "schedule ring allreduce bytes 0..inf units 2\n  step gather level 0\n"),
      "plan.txt:5:8: unknown phase 'gather' (expected one of: reduce_scatter, allgather, reduce, "
      "broadcast)");
  EXPECT_EQ(
      parse_error(head + "schedule ring allreduce bytes 0..inf units 2\n  step reduce level 0\n"
                         "    reduce [0,3 root 1 group 0 1\n"),
      "plan.txt:6:12: expected a unit range [BEGIN,END), found '[0,3'");
  EXPECT_EQ(
      parse_error(head + "schedule ring allreduce bytes 0..inf units 2\n  step reduce level 0\n"
                         "    reduce [0,1) root 1 group x\n"),
      "plan.txt:6:31: a group member must be an integer of at least 0, found 'x'");
  EXPECT_EQ(
      parse_error(head + "schedule ring allreduce bytes 0..inf units 2\n  step reduce level 0\n"
                         "    reduse [0,1) root 1 group 0\n"),
      "plan.txt:6:5: expected a 'schedule', 'step', 'reduce' or 'broadcast' line, found 'reduse'");
  EXPECT_EQ(
      parse_error(head + "schedule ring allreduce bytes 0..inf units 9\n  step reduce level 0\n"
                         "    reduce [5,3) root 1 group 0\n"),
      "plan.txt:6:12: the unit range [5,3) ends before it begins");
  EXPECT_EQ(parse_error(head + "schedule ring allreduce bytes 0..inf units 2 extra\n"),
            "plan.txt:4:46: unexpected 'extra' at the end of the line");
  EXPECT_EQ(parse_error(head + "schedule ring allreduce bytes 5 units 2\n"),
            "plan.txt:4:31: expected MIN..MAX bytes, found '5'");
  EXPECT_EQ(parse_error(head + "schedule ring allreduce bytes 0..inf units\n"),
            "plan.txt:4:43: expected units at the end of the line");
  EXPECT_EQ(parse_error("flexplan-plan 1\nworld_size 2\ntopology \"open\n"),
            "plan.txt:3:10: unterminated string");
  EXPECT_EQ(parse_error("flexplan-plan 1\nworld_size 2\ntopology \"bad\\q\" -\n"),
            "plan.txt:3:14: unknown escape '\\q'");
  EXPECT_EQ(parse_error("flexplan-plan 1\nworld_size 99999999999\n"),
            "plan.txt:2:12: world size must be an integer of at least 1, found '99999999999'");
}

}  // namespace
}  // namespace flexplan::ir
