// `flexplan whatif TOPOLOGY.json [VARIATION...] [--workload W] [-b 64K -e 256M -f 16]`: what-if analysis
// for cluster designers (docs/whatif.md): a grid of topology variations, each point planned and
// priced, with bottleneck links, upgrade advice and the training step of a workload.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "cli/algorithm_option.hpp"
#include "cli/arguments.hpp"
#include "cli/cost_options.hpp"
#include "planner/algorithm_table.hpp"
#include "cli/command.hpp"
#include "planner/size_format.hpp"
#include "whatif/html_report.hpp"
#include "whatif/records.hpp"
#include "whatif/sweep.hpp"
#include "whatif/upgrade_costs.hpp"

namespace flexplan::cli {
namespace {

struct WhatifCommand {
  std::string topology_path;
  std::vector<std::string> variations;
  std::string sizes;  // the older --sizes list
  std::string min_bytes, max_bytes;
  uint64_t factor = 0;
  std::string reference;
  std::string workload;
  std::string print_workload;
  std::vector<std::string> algorithms;
  std::string format = "text";
  std::string report_dir;
  CostOptions cost_options;
  bool no_advice = false;
  std::string costs;  // upgrade prices (whatif/upgrade_costs.hpp)
  double upgrade_factor = 2;
  size_t upgrade_steps = 3;
  unsigned jobs = 0;  // 0: one per core
  bool quiet = false;
};

using Clock = std::chrono::steady_clock;

// The sizes to report: -b/-e/-f as predict steps them (default 64K to 256M by 16), or the
// older --sizes list.
std::vector<uint64_t> report_sizes(const WhatifCommand& command) {
  const bool sweep = !command.min_bytes.empty() || !command.max_bytes.empty() || command.factor;
  if (!command.sizes.empty()) {
    if (sweep) throw CLI::ValidationError("--sizes: give -b/-e/-f or --sizes, not both");
    warn("--sizes is deprecated: give -b/--minbytes, -e/--maxbytes and -f/--stepfactor "
         "(-b 64K -e 256M -f 16 is the default)");
    std::vector<uint64_t> sizes;
    for (const auto& size : comma_list(command.sizes)) {
      sizes.push_back(size_argument(size, "--sizes"));
      if (sizes.back() == 0) throw CLI::ValidationError("--sizes: a size of 0 bytes");
    }
    if (sizes.empty()) throw CLI::ValidationError("--sizes: no size given");
    return sizes;
  }
  const uint64_t min = size_argument(command.min_bytes.empty() ? "64K" : command.min_bytes,
                                     "-b/--minbytes");
  const uint64_t max = size_argument(command.max_bytes.empty() ? "256M" : command.max_bytes,
                                     "-e/--maxbytes");
  return size_sweep(min, max, command.factor ? command.factor : 16);
}

// Progress on stderr, at most twice a second, once the sweep has run for half a second.
struct Progress {
  Clock::time_point start = Clock::now(), last = start;
  bool shown = false;
  void operator()(size_t done, size_t total) {
    const auto now = Clock::now();
    const bool end = done == total;
    if (!end && now - last < std::chrono::milliseconds(500)) return;
    if (end && !shown) return;  // quick sweeps stay quiet
    last = now;
    shown = true;
    fmt::print(stderr, "whatif: {}/{} points, {:.1f} s{}", done, total,
               std::chrono::duration<double>(now - start).count(), end ? "\n" : "\r");
    std::fflush(stderr);
  }
};

void run(const WhatifCommand& command) {
  if (!command.print_workload.empty()) {
    try {
      fmt::print("{}", whatif::workload_to_json(whatif::load_workload(command.print_workload)));
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
    return;
  }
  if (command.topology_path.empty()) throw CLI::ValidationError("TOPOLOGY is required");
  if (command.format != "text" && command.format != "json" && command.format != "csv")
    throw CLI::ValidationError(
        fmt::format("--format '{}': expected text, json or csv", command.format));

  whatif::AnalysisOptions options;
  options.sizes = report_sizes(command);
  if (!command.reference.empty()) options.reference_bytes = size_argument(command.reference, "--at");
  // "-a flexreduce ring": the second word is no variation (those have an '='), but an algorithm.
  for (const auto& text : command.variations)
    if (text.find('=') == std::string::npos && is_algorithm_name(text))
      throw CLI::ValidationError(fmt::format(
          "'{}' is an algorithm, not a variation (TARGET=V1,V2,...): list algorithms with commas, "
          "-a {}{}",
          text, command.algorithms.empty() ? "" : command.algorithms.back() + ",", text));
  CostParams cost;
  std::vector<whatif::Variation> variations;
  std::optional<whatif::Workload> workload;
  std::optional<whatif::UpgradeCosts> costs;
  try {
    if (!command.costs.empty()) costs = whatif::load_upgrade_costs(command.costs);
    for (const auto& name : command.algorithms) find_algorithm(name);
    cost = command.cost_options.parse();
    for (const auto& text : command.variations) variations.push_back(whatif::parse_variation(text));
    whatif::grid_size(variations);
    if (!command.workload.empty()) workload = whatif::load_workload(command.workload);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  options.workload = workload ? &*workload : nullptr;
  options.advise = !command.no_advice;
  options.costs = costs ? &*costs : nullptr;
  options.upgrade_factor = command.upgrade_factor;
  options.upgrade_steps = command.upgrade_steps;

  const auto topo = load_topology(command.topology_path);
  command.cost_options.apply_topology(cost, topo);
  whatif::SweepOptions sweep_options{command.algorithms, cost, command.jobs};
  if (sweep_options.jobs == 0) sweep_options.jobs = std::max(1u, std::thread::hardware_concurrency());
  Progress progress;
  whatif::Sweep sweep;
  try {
    sweep = whatif::run_sweep(topo, command.topology_path, std::move(variations), options,
                              sweep_options,
                              command.quiet ? std::function<void(size_t, size_t)>() : std::ref(progress));
  } catch (const whatif::VariationError& e) {
    throw CLI::ValidationError(e.what());
  }

  if (command.format == "json") fmt::print("{}", whatif::sweep_json(sweep));
  else if (command.format == "csv") fmt::print("{}", whatif::sweep_csv(sweep));
  else fmt::print("{}", whatif::sweep_text(sweep));
  if (!command.report_dir.empty()) {
    const std::string page = whatif::write_html_report(sweep, command.report_dir);
    if (!command.quiet) fmt::print(stderr, "whatif: report written to {}\n", page);
  }
}

void setup(CLI::App& app) {
  auto command = std::make_shared<WhatifCommand>();
  CLI::App* whatif = app.add_subcommand(
      "whatif", "What-if analysis: sweep topology variations; time, bottlenecks, upgrade advice, "
                "training steps (docs/whatif.md)");
  whatif->add_option("TOPOLOGY", command->topology_path, "topology JSON file");
  whatif->add_option("VARIATION", command->variations,
                     "grid axes, each TARGET=V1,V2,...: machines.bandwidth=25Gbit/s,100Gbit/s; "
                     "under:NODE.latency*=1,2; name:GLOB.bandwidth=...; link:NODE.bandwidth=...; "
                     "count:NODE=2,4; gpus:GLOB=2,8; replace:NODE=a.json,b.json");
  // Single words with commas inside, so that positional arguments may follow them.
  whatif->add_option("-b,--minbytes", command->min_bytes,
                     "smallest all-reduce size to report (default 64K)");
  whatif->add_option("-e,--maxbytes", command->max_bytes, "largest size to report (default 256M)");
  whatif->add_option("-f,--stepfactor", command->factor,
                     "multiply the size by this from one size to the next (default 16)");
  whatif->add_option("--sizes", command->sizes,
                     "deprecated: sizes to report, comma-separated (use -b/-e/-f)");
  whatif->add_option("--at", command->reference,
                     "size at which bottlenecks and upgrades are judged (default: the largest "
                     "of --sizes; with a workload, upgrades are judged by the step time)");
  whatif->add_option("--workload", command->workload,
                     "workload JSON file, or a bundled one: resnet50, bert-large, gpt2-xl");
  whatif->add_option("--print-workload", command->print_workload,
                     "print a workload (bundled or file) as JSON, to edit its assumptions");
  whatif->add_option("-a,--algorithms", command->algorithms,
                     algorithm_help("algorithms to race, comma-separated, as the plan command's "
                                    "-a/--algorithms (default: its race, pipelined variants included):"))
      ->delimiter(',')
      ->allow_extra_args(false)  // one word: the VARIATIONs may follow
      ->check(algorithm_validator());
  add_format_option(*whatif, command->format, {"text", "json", "csv"});
  whatif->add_option("--report", command->report_dir,
                     "also write an HTML report with SVG plots into this directory");
  command->cost_options.add_to(*whatif);
  whatif->add_flag("--no-advice", command->no_advice, "skip the upgrade advice (faster)");
  whatif->add_option("--costs", command->costs,
                     "JSON of upgrade prices per link class: rank upgrades by time saved per cost "
                     "(docs/whatif.md, \"Upgrade costs\")");
  whatif->add_option("--upgrade-factor", command->upgrade_factor,
                     "an upgrade multiplies its links' bandwidth by this")
      ->capture_default_str()
      ->check(CLI::Range(1.0 + 1e-9, 1e6));
  whatif->add_option("--upgrade-steps", command->upgrade_steps,
                     "upgrades in the advised sequence, each on top of the last")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{20}));
  whatif->add_option("-j,--jobs", command->jobs, "worker threads (default: one per core)");
  whatif->add_flag("-q,--quiet", command->quiet, "no progress on stderr");
  whatif->callback([command] { run(*command); });
}

const Registration registration("whatif", setup);

}  // namespace
}  // namespace flexplan::cli
