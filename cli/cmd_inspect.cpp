// `flexplan inspect PLAN [--format text|json]`: prints a plan (plan.bin, or the text form) as
// readable text, one op a line, or as JSON (docs/ir.md). The plan is verified on load.
#include <fmt/core.h>

#include <memory>
#include <string>

#include "cli/command.hpp"
#include "ir/plan_json.hpp"
#include "ir/plan_load.hpp"
#include "ir/plan_text.hpp"

namespace flexplan::cli {
namespace {

struct InspectOptions {
  std::string path;
  std::string format = "text";
};

void inspect(const InspectOptions& options) {
  const ir::Plan plan = ir::load_plan_file(options.path);
  if (options.format == "json")
    fmt::print("{}\n", ir::plan_to_json(plan).dump(2));
  else
    fmt::print("{}", ir::print_plan_text(plan));
}

void setup(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* command = app.add_subcommand("inspect", "Print a plan as text (one op a line) or JSON");
  command->add_option("PLAN", options->path, "plan.bin, or a plan in the text form")->required();
  command->add_option("--format", options->format, "output form")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->callback([options] { inspect(*options); });
}

const Registration registration("inspect", setup);

}  // namespace
}  // namespace flexplan::cli
