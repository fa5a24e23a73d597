// `flexplan verify PLAN`: proves every schedule of a plan computes its collective and prints
// one line per schedule, "ok: ..." or the fault. Exit 1 when any schedule fails, 2 when the
// file is malformed.
#include <fmt/core.h>

#include <chrono>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_load.hpp"
#include "ir/verify.hpp"

namespace flexplan::cli {
namespace {

void verify(const std::string& path) {
  const ir::Plan plan = ir::load_plan_file(path, ir::LoadCheck::FormatOnly);
  ir::check_plan_fields(plan);
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const ir::Schedule& schedule = plan.schedules[i];
    const auto start = std::chrono::steady_clock::now();
    try {
      ir::verify_schedule(schedule, plan.world_size, ir::schedule_label(plan, i));
    } catch (const ir::VerifyError& e) {
      fmt::print(stderr, "FAILED: {}\n", e.what());
      exit_status() = kExitFailed;
      continue;
    }
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    // The collective where it is not all-reduce: "ok: tree-chains (allgather (equal shards)) ...".
    const std::string what = schedule.collective == ir::Collective::AllReduce
                                 ? schedule.algorithm
                                 : fmt::format("{} ({})", schedule.algorithm,
                                               ir::describe_contract(schedule));
    fmt::print("ok: {} {} steps {} ops, {} ranks, verified in {:.2f} ms\n", what,
               ir::expanded_step_count(schedule, schedule.slices), ir::expanded_op_count(schedule),
               plan.world_size, elapsed.count());
  }
}

void setup(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* command =
      app.add_subcommand("verify", "Prove that every schedule of a plan computes its collective");
  command->add_option("PLAN", *path, "plan.bin, or a plan in the text form")->required();
  command->callback([path] { verify(*path); });
}

const Registration registration("verify", setup);

}  // namespace
}  // namespace flexplan::cli
