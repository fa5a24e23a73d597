// `flexplan inspect` and `flexplan verify`: output forms, and exit codes 0 (ok), 1 (a plan that
// does not verify) and 2 (a malformed or missing file) with their messages.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "ir/plan_binary.hpp"
#include "ir/plan_json.hpp"
#include "ir/plan_text.hpp"
#include "tests/unit/cli_run.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

using flexplan::testing::run_flexplan;

class IrCli : public flexplan::testing::ScratchDirTest {
 protected:
  std::string write_text(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return "'" + path(name) + "'";
  }
  std::string write_bytes(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream(path(name), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return "'" + path(name) + "'";
  }
};

TEST_F(IrCli, InspectPrintsTextByDefaultAndJsonOnRequest) {
  const Plan plan = testing::two_range_plan(5);
  write_plan_file(path("plan.bin"), plan);
  const auto text = run_flexplan("inspect '" + path("plan.bin") + "'", "2>/dev/null");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_EQ(text.output, print_plan_text(plan));

  const auto json = run_flexplan("inspect '" + path("plan.bin") + "' --format json", "2>/dev/null");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(plan_from_json(nlohmann::json::parse(json.output)), plan);

  const auto bad = run_flexplan("inspect '" + path("plan.bin") + "' --format yaml");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

TEST_F(IrCli, InspectReadsTheTextFormToo) {
  const Plan plan = testing::two_range_plan(4);
  const std::string file = write_text("plan.txt", "# hand-edited\n" + print_plan_text(plan));
  const auto result = run_flexplan("inspect " + file + " --format json", "2>/dev/null");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(plan_from_json(nlohmann::json::parse(result.output)), plan);
}

TEST_F(IrCli, VerifyReportsEachSchedule) {
  write_plan_file(path("plan.bin"), testing::two_range_plan(6));
  const auto result = run_flexplan("verify '" + path("plan.bin") + "'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("ok: ring 10 steps 60 ops, 6 ranks, verified in "),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("ok: tree 6 steps 10 ops, 6 ranks, verified in "), std::string::npos)
      << result.output;
}

TEST_F(IrCli, VerifyFailureExitsOneNamingTheFault) {
  Plan plan = testing::two_range_plan(4);
  plan.schedules[1].steps.edit().back().ops.back().end =
      2;  // the tree's last broadcast, 2 -> 3, cut short
  const std::string file = write_bytes("wrong.bin", encode_plan(plan));
  const auto result = run_flexplan("verify " + file);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("ok: ring 6 steps 24 ops, 4 ranks"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("FAILED: schedule 1 (tree): after the last step rank 3 holds 1 of 4 "
                               "contributions on units [2,4)"),
            std::string::npos)
      << result.output;

  const auto inspect = run_flexplan("inspect " + file);
  EXPECT_EQ(inspect.exit_code, 1) << inspect.output;
  EXPECT_NE(inspect.output.find("flexplan: error: verification failed: schedule 1 (tree)"),
            std::string::npos)
      << inspect.output;
}

TEST_F(IrCli, MalformedFilesExitTwo) {
  auto bytes = encode_plan(testing::two_range_plan(3));
  bytes[bytes.size() - 3] ^= 0x10;
  const auto corrupted = run_flexplan("verify " + write_bytes("corrupt.bin", bytes));
  EXPECT_EQ(corrupted.exit_code, 2) << corrupted.output;
  EXPECT_NE(corrupted.output.find("flexplan: error: plan: "), std::string::npos)
      << corrupted.output;
  EXPECT_NE(corrupted.output.find("fails its checksum"), std::string::npos)
      << corrupted.output;

  bytes.resize(30);
  const auto truncated = run_flexplan("inspect " + write_bytes("short.bin", bytes));
  EXPECT_EQ(truncated.exit_code, 2) << truncated.output;
  EXPECT_NE(truncated.output.find("short.bin: byte 30: truncated"), std::string::npos)
      << truncated.output;

  const auto text =
      run_flexplan("verify " + write_text("bad.txt", "flexplan-plan 1\nworld_size two\n"));
  EXPECT_EQ(text.exit_code, 2) << text.output;
  EXPECT_NE(text.output.find("bad.txt:2:12: world size must be an integer"), std::string::npos)
      << text.output;

  const auto missing = run_flexplan("verify '" + path("missing.bin") + "'");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("missing.bin: cannot open"), std::string::npos) << missing.output;

  const auto empty = run_flexplan("inspect " + write_text("empty.bin", ""));
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_NE(empty.output.find("empty.bin: the file is empty"), std::string::npos) << empty.output;

  const auto directory = run_flexplan("verify '" + dir_.string() + "'");
  EXPECT_EQ(directory.exit_code, 2) << directory.output;
  EXPECT_NE(directory.output.find("is a directory, not a plan file"), std::string::npos)
      << directory.output;
}

// A plan holding a name that is not UTF-8 is malformed input: exit 2 with the byte offset, for
// every command, rather than a JSON library's error half-way through printing.
TEST_F(IrCli, NonUtf8NamesAreMalformedInput) {
  Plan plan = testing::two_range_plan(3);
  plan.rank_names[1] = "m0/gpu\xff";
  const std::string file = write_bytes("latin1.bin", encode_plan(plan));
  for (const std::string& command : {"inspect " + file + " --format json", "inspect " + file,
                                    "verify " + file}) {
    const auto result = run_flexplan(command);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.output;
    EXPECT_NE(result.output.find("flexplan: error: plan: "), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("rank name 1 is not valid UTF-8"), std::string::npos)
        << result.output;
  }
}

// A plan whose size ranges leave messages without a schedule fails verification (exit 1).
TEST_F(IrCli, PlansThatCannotServeEverySizeFail) {
  Plan plan = testing::two_range_plan(3);
  plan.schedules[0].min_bytes = 1 << 20;
  plan.schedules[0].max_bytes.reset();
  plan.schedules.pop_back();
  const auto result = run_flexplan("verify " + write_bytes("gap.bin", encode_plan(plan)));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("no allreduce schedule serves messages of [0,1048576) bytes"),
            std::string::npos)
      << result.output;
  plan.schedules.clear();
  const auto empty = run_flexplan("verify " + write_bytes("none.bin", encode_plan(plan)));
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_NE(empty.output.find("the plan has no schedule"), std::string::npos)
      << empty.output;
}

// A file with neither the plan.bin magic nor the text header is named as no plan at all, not
// reported as a syntax error at its first odd byte.
TEST_F(IrCli, FilesThatAreNoPlanAreNamedSo) {
  const auto binary = run_flexplan("verify " + write_bytes("random.bin", {0x16, 0x03, 0x01, 0xff}));
  EXPECT_EQ(binary.exit_code, 2) << binary.output;
  EXPECT_NE(binary.output.find("random.bin: not a flexplan plan"), std::string::npos)
      << binary.output;

  const auto json = run_flexplan(
      "inspect " + write_text("plan.json", "# notes\n" R"({"format": "flexplan-plan"})"));
  EXPECT_EQ(json.exit_code, 2) << json.output;
  EXPECT_NE(json.output.find("plan.json: not a flexplan plan"), std::string::npos) << json.output;
}

}  // namespace
}  // namespace flexplan::ir
