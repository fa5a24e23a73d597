// The JSON form: its documented shape, round trips, and errors naming the JSON location.
#include <gtest/gtest.h>

#include <string>

#include "ir/plan_json.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

using nlohmann::json;

std::string json_error(const json& document) {
  try {
    plan_from_json(document);
  } catch (const PlanFormatError& e) {
    return e.what();
  }
  return "";
}

TEST(IrJson, HasTheDocumentedShape) {
  const Plan plan = testing::two_range_plan(5);
  const json j = plan_to_json(plan);
  EXPECT_EQ(j["format"], "flexplan-plan");
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["world_size"], 5);
  EXPECT_EQ(j["topology"], (json{{"name", "test-cluster"}, {"hash", "0123456789abcdef"}}));
  EXPECT_EQ(j["ranks"][4], (json{{"rank", 4}, {"name", "switch/m1/gpu0"}}));
  const json& ring = j["schedules"][0];
  EXPECT_EQ(ring["algorithm"], "ring");
  EXPECT_EQ(ring["collective"], "allreduce");
  EXPECT_EQ(ring["min_bytes"], 0);
  EXPECT_EQ(ring["max_bytes"], 32768);
  EXPECT_TRUE(j["schedules"][1]["max_bytes"].is_null());
  EXPECT_EQ(ring["units"], 5);
  EXPECT_EQ(ring["steps"][0]["phase"], "reduce_scatter");
  EXPECT_EQ(ring["steps"][0]["level"], 0);
  EXPECT_EQ(ring["steps"][0]["ops"][0],
            (json{{"op", "reduce"}, {"begin", 0}, {"end", 1}, {"root", 1}, {"group", {0, 1}},
                  {"shape", "chain"}}));
  EXPECT_EQ(ring["steps"][4]["phase"], "allgather");
  EXPECT_EQ(ring["steps"][4]["ops"][0]["op"], "broadcast");
}

TEST(IrJson, RoundTrips) {
  Plan plan = testing::two_range_plan(6);
  EXPECT_EQ(plan_from_json(plan_to_json(plan)), plan);
  plan.topology_hash.clear();
  plan.rank_names.clear();
  plan.schedules[0].units = UINT64_MAX;
  plan.schedules[0].steps.edit()[0].level = -1;
  EXPECT_TRUE(plan_to_json(plan)["topology"]["hash"].is_null());
  EXPECT_EQ(plan_from_json(plan_to_json(plan)), plan);
  // Through text as well: what `inspect --format json` prints parses back to the same plan.
  EXPECT_EQ(plan_from_json(json::parse(plan_to_json(plan).dump(2))), plan);
}

TEST(IrJson, ErrorsNameTheLocation) {
  const json good = plan_to_json(testing::two_range_plan(3));
  json j = good;
  j["schedules"][1]["steps"][2]["ops"][0]["root"] = "one";
  EXPECT_EQ(json_error(j),
            "JSON plan: schedules[1].steps[2].ops[0].root: expected an integer in [0, 2147483647], "
            "found \"one\"");
  j = good;
  j["schedules"][0]["steps"][1]["ops"][1]["group"][1] = -4;
  EXPECT_EQ(json_error(j),
            "JSON plan: schedules[0].steps[1].ops[1].group[1]: expected an integer in [0, "
            "2147483647], found -4");
  j = good;
  j["schedules"][0]["steps"][0]["phase"] = "scatter";
  EXPECT_NE(json_error(j).find("schedules[0].steps[0].phase: unknown phase 'scatter'"),
            std::string::npos)
      << json_error(j);
  j = good;
  j["schedules"][0].erase("units");
  EXPECT_EQ(json_error(j), "JSON plan: schedules[0]: missing field 'units'");
  j = good;
  j["schedules"][0]["steps"][0]["ops"][0]["size"] = 3;
  EXPECT_EQ(json_error(j), "JSON plan: schedules[0].steps[0].ops[0]: unknown field 'size'");
  j = good;
  j["version"] = 1;
  EXPECT_NE(json_error(j).find("version: plan JSON version 1 is not supported"), std::string::npos)
      << json_error(j);
  j = good;
  j["format"] = "other";
  EXPECT_EQ(json_error(j), "JSON plan: format: expected \"flexplan-plan\"");
  j = good;
  j["ranks"][1]["rank"] = 2;
  EXPECT_EQ(json_error(j), "JSON plan: ranks[1].rank: expected 1 (ranks are listed in order)");
  j = good;
  j["schedules"][0]["min_bytes"] = 1.5;
  EXPECT_NE(json_error(j).find("schedules[0].min_bytes: expected an integer"), std::string::npos)
      << json_error(j);
  EXPECT_EQ(json_error(json::array()), "JSON plan: top level: expected an object, found array");
  j = good;
  j["schedules"][0]["steps"][0]["ops"][0]["begin"] = 5;
  j["schedules"][0]["steps"][0]["ops"][0]["end"] = 3;
  EXPECT_EQ(json_error(j), "JSON plan: schedules[0].steps[0].ops[0].end: the range ends at 3, "
                           "before its begin 5");
}

}  // namespace
}  // namespace flexplan::ir
