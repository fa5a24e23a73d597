// `flexplan verify PLAN`: proves every schedule of a plan computes its collective and prints
// one line per schedule, "ok: ..." or the fault (--format json: one record per schedule). Exit 1
// when any schedule fails, 2 when the file is malformed.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "cli/arguments.hpp"
#include "cli/command.hpp"
#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_load.hpp"
#include "ir/verify.hpp"

namespace flexplan::cli {
namespace {

struct VerifyOptions {
  std::string path;
  std::string format = "text";
};

void verify(const VerifyOptions& options) {
  const bool json = options.format == "json";
  const ir::Plan plan = ir::load_plan_file(options.path, ir::LoadCheck::FormatOnly);
  nlohmann::json schedules = nlohmann::json::array();
  if (json) {
    // A plan-wide fault (a size no schedule serves) is the plan's verdict, not a malformed file.
    try {
      ir::check_plan_fields(plan);
    } catch (const ir::VerifyError& e) {
      exit_status() = kExitFailed;
      fmt::print("{}\n", nlohmann::json{{"format", "flexplan-verify"},
                                        {"ok", false},
                                        {"error", e.what()},
                                        {"schedules", schedules}}
                             .dump(2));
      return;
    }
  } else {
    ir::check_plan_fields(plan);
  }
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const ir::Schedule& schedule = plan.schedules[i];
    const auto start = std::chrono::steady_clock::now();
    try {
      ir::verify_schedule(schedule, plan.world_size, ir::schedule_label(plan, i));
    } catch (const ir::VerifyError& e) {
      if (json)
        schedules.push_back({{"index", i}, {"algorithm", schedule.algorithm},
                             {"collective", ir::to_string(schedule.collective)},
                             {"ok", false}, {"error", e.what()}});
      else
        fmt::print(stderr, "FAILED: {}\n", e.what());
      exit_status() = kExitFailed;
      continue;
    }
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    if (json) {
      schedules.push_back({{"index", i}, {"algorithm", schedule.algorithm},
                           {"collective", ir::to_string(schedule.collective)},
                           {"contract", ir::describe_contract(schedule)},
                           {"ok", true},
                           {"steps", ir::expanded_step_count(schedule, schedule.slices)},
                           {"ops", ir::expanded_op_count(schedule)},
                           {"seconds", elapsed.count() / 1e3}});
      continue;
    }
    // The collective where it is not all-reduce: "ok: tree-chains (allgather (equal shards)) ...".
    const std::string what = schedule.collective == ir::Collective::AllReduce
                                 ? schedule.algorithm
                                 : fmt::format("{} ({})", schedule.algorithm,
                                               ir::describe_contract(schedule));
    fmt::print("ok: {} {} steps {} ops, {} ranks, verified in {:.2f} ms\n", what,
               ir::expanded_step_count(schedule, schedule.slices), ir::expanded_op_count(schedule),
               plan.world_size, elapsed.count());
  }
  if (json)
    fmt::print("{}\n", nlohmann::json{{"format", "flexplan-verify"},
                                      {"ok", exit_status() == kExitOk},
                                      {"ranks", plan.world_size},
                                      {"schedules", schedules}}
                           .dump(2));
}

void setup(CLI::App& app) {
  auto options = std::make_shared<VerifyOptions>();
  CLI::App* command =
      app.add_subcommand("verify", "Prove that every schedule of a plan computes its collective");
  command->add_option("PLAN", options->path, "plan.bin, or a plan in the text form")->required();
  add_format_option(*command, options->format);
  command->callback([options] { verify(*options); });
}

const Registration registration("verify", setup);

}  // namespace
}  // namespace flexplan::cli
