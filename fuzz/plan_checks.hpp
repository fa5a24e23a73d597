// What the plan decoder harnesses check on every plan a decoder accepts: the text, JSON and
// binary forms round-trip exactly, and on small schedules the verifier (whole, in slices, and
// in windows down to single units) agrees with a brute-force run of the IR's semantics.
// A disagreement aborts, which libFuzzer reports as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/errors.hpp"
#include "ir/plan_binary.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_json.hpp"
#include "ir/plan_text.hpp"
#include "ir/summary_execution.hpp"
#include "ir/verify.hpp"
#include "tests/unit/ir_brute_force.hpp"

namespace flexplan::fuzz {

[[noreturn]] inline void fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz check failed: %s\n%s\n", what, detail.c_str());
  std::abort();
}

// Whether `check` throws VerifyError (the message goes to `message`).
template <typename Check>
bool rejects(Check&& check, std::string* message = nullptr) {
  try {
    check();
  } catch (const ir::VerifyError& e) {
    if (message) *message = e.what();
    return true;
  }
  return false;
}

// Small enough for the brute force (it holds P x units x P counters and walks every unit).
inline bool small_enough(const ir::Schedule& schedule, int32_t world_size) {
  if (world_size > 8 || schedule.units > 64 || schedule.steps.size() > 64) return false;
  size_t ops = 0;
  for (const ir::Step& step : schedule.steps) ops += step.ops.size();
  return ops <= 256;
}

inline void check_schedule(const ir::Schedule& schedule, int32_t world_size) {
  const std::string text = ir::print_plan_text([&] {
    ir::Plan plan;
    plan.world_size = world_size;
    plan.schedules = {schedule};
    return plan;
  }());
  std::string message;
  const bool rejected = rejects([&] { ir::verify_schedule(schedule, world_size); }, &message);
  if (!small_enough(schedule, world_size)) return;
  if (rejects([&] { ir::check_structure(schedule, world_size); })) {
    if (!rejected) fail("a schedule that fails check_structure verified", text);
    return;
  }
  if (schedule.collective != ir::Collective::AllReduce) return;
  if (rejected != !ir::testing::reference_accepts(schedule, world_size))
    fail(rejected ? "the verifier rejects a right schedule" : "the verifier accepts a wrong one",
         message + "\n" + text);
  // A compact pipeline is verified through its base: its expansion must get the same verdict.
  if (schedule.slices != 1) {
    const ir::Schedule whole = ir::materialize(schedule);
    if (small_enough(whole, world_size) && rejected != !ir::testing::reference_accepts(whole, world_size))
      fail("a compact pipeline's verdict differs from its expansion's", message + "\n" + text);
  }
  if (rejected && message.find("that are not each rank's once") != std::string::npos)
    fail("a rejection the exact replay did not explain", message + "\n" + text);
  // In windows down to single units, and in slices as the ranks of a job verify it.
  const bool windowed =
      ir::detail::execute_summaries(schedule, world_size, 0, schedule.units, 1).has_value();
  const bool whole =
      ir::detail::execute_summaries(schedule, world_size, 0, schedule.units).has_value();
  if (windowed != whole) fail("windowed and whole summary execution disagree", text);
  ir::Plan alone;
  alone.world_size = world_size;
  alone.schedules = {schedule};
  alone.schedules[0].min_bytes = 0;
  alone.schedules[0].max_bytes.reset();
  bool some_slice_rejects = false;
  for (int32_t slice = 0; slice < world_size + 1; ++slice)
    some_slice_rejects |= rejects([&] { ir::verify_plan_slice(alone, slice, world_size + 1); });
  if (some_slice_rejects != rejected) fail("the slices and the whole verification disagree", text);
}

inline void check_decoded_plan(const ir::Plan& plan) {
  // The text forms write pipelines whole; plan.bin decodes them compact.
  const ir::Plan whole = ir::materialize(plan);
  const std::string text = ir::print_plan_text(plan);
  if (!(ir::parse_plan_text(text, "round trip") == whole)) fail("text round trip", text);
  const std::string json_text = ir::plan_to_json(plan).dump();
  if (!(ir::plan_from_json(nlohmann::json::parse(json_text)) == whole))
    fail("JSON round trip", json_text);
  if (!rejects([&] { ir::check_plan_fields(plan); })) {
    const auto decoded = ir::decode_fingerprinted_plan(ir::encode_plan(plan), "round trip");
    // Read back compact where written so (an expansion is written as its base).
    if (!(ir::materialize(decoded.plan) == whole)) fail("binary round trip", text);
    // The fingerprint a rank takes from the file is the one of the plan in memory.
    if (decoded.fingerprint != ir::plan_fingerprint(plan)) fail("fingerprint", text);
  }
  for (const ir::Schedule& schedule : plan.schedules) check_schedule(schedule, plan.world_size);
}

}  // namespace flexplan::fuzz
