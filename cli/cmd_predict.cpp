// `flexplan predict TOPOLOGY.json -b 64K -e 512M -f 2`: predicted all-reduce time, algbw and
// busbw per algorithm and message size, in the manner of nccl-tests' tables, and the best
// algorithm per size.
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/algorithm_option.hpp"
#include "cli/command.hpp"
#include "planner/algorithms.hpp"
#include "planner/floor.hpp"
#include "planner/prediction.hpp"
#include "planner/size_format.hpp"

namespace flexplan::cli {
namespace {

struct PredictCommand {
  std::string topology_path;
  std::string min_bytes = "64K";
  std::string max_bytes = "512M";
  uint64_t factor = 2;
  std::string dtype = "float";
  std::vector<std::string> algorithms;
  std::string hop_overhead = "0 s";
};

struct Sweep {
  uint64_t min_bytes, max_bytes, factor;
  size_t element;
  CostParams cost;
};

// Argument errors are the user's: report them as such (exit 2).
Sweep parse_sweep(const PredictCommand& command) {
  Sweep sweep{};
  try {
    sweep.min_bytes = parse_size(command.min_bytes);
    sweep.max_bytes = parse_size(command.max_bytes);
    sweep.element = dtype_size(command.dtype);
    sweep.cost.hop_overhead = parse_latency(command.hop_overhead);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  sweep.factor = command.factor;
  if (sweep.min_bytes == 0) throw CLI::ValidationError("-b/--minbytes must be at least 1 byte");
  if (sweep.max_bytes < sweep.min_bytes)
    throw CLI::ValidationError(fmt::format("-e/--maxbytes ({}) is below -b/--minbytes ({})",
                                           command.max_bytes, command.min_bytes));
  if (sweep.factor < 2) throw CLI::ValidationError("-f/--stepfactor must be at least 2");
  return sweep;
}

void run(const PredictCommand& command) {
  const Sweep sweep = parse_sweep(command);
  const auto topo = load_topology(command.topology_path);
  const auto names = command.algorithms.empty() ? algorithm_names() : command.algorithms;
  std::vector<AlgorithmPrediction> predictions;
  for (const auto& name : names) predictions.push_back(predict_algorithm(topo, name, sweep.cost));

  const int learners = topo.num_learners();
  fmt::print("# flexplan predict: topology {} ({}), {} ({} B), hop overhead {}\n", topo.name(),
             describe_topology(topo), command.dtype, sweep.element,
             format_seconds(sweep.cost.hop_overhead));
  const auto floor = cost_floor(topo);
  if (floor.per_byte > 0)
    fmt::print("# floor: the larger of n / {} (bandwidth, set by {}) and {} (latency: the "
               "diameter)\n",
               format_gbps(1 / floor.per_byte), floor.bound_by, format_seconds(floor.latency));
  for (const auto& p : predictions)
    fmt::print("# {:<13} {}{}\n", p.algorithm,
               p.method == "none" ? "no prediction" : "priced by " + p.method,
               p.note.empty() ? "" : " (" + p.note + ")");
  fmt::print("# busbw = algbw * 2(n-1)/n with n = {} learners\n#\n", learners);

  std::string header1 = fmt::format("# {:>12} {:>12}", "", "");
  std::string header2 = fmt::format("# {:>12} {:>12}", "size", "count");
  std::string header3 = fmt::format("# {:>12} {:>12}", "(B)", "(elements)");
  for (const auto& p : predictions) {
    header1 += fmt::format("   {:^30}", p.algorithm);
    header2 += fmt::format("   {:>10} {:>9} {:>9}", "time", "algbw", "busbw");
    header3 += fmt::format("   {:>10} {:>9} {:>9}", "(us)", "(GB/s)", "(GB/s)");
  }
  fmt::print("{}\n{}   {:<17} {:>6} {:>12}\n{}{:>40}\n", header1, header2, "best", "/floor", "floor",
             header3, "(us)");

  for (uint64_t bytes = sweep.min_bytes; bytes <= sweep.max_bytes;) {
    const double n = static_cast<double>(bytes);
    std::string row = fmt::format("  {:>12} {:>12}", bytes, bytes / sweep.element);
    const AlgorithmPrediction* best = nullptr;
    double best_time = 0;
    for (const auto& p : predictions) {
      if (!p.time) {
        row += fmt::format("   {:>10} {:>9} {:>9}", "-", "-", "-");
        continue;
      }
      const double time = p.time(n);
      row += fmt::format("   {:>10.2f} {:>9.3f} {:>9.3f}", time * 1e6,
                         algorithm_bandwidth(n, time) / 1e9, bus_bandwidth(n, time, learners) / 1e9);
      if (!best || time < best_time) {
        best = &p;
        best_time = time;
      }
    }
    const double bound = floor.at(n);
    fmt::print("{}   {:<17} {:>6} {:>12}\n", row, best ? best->algorithm : "-",
               best && bound > 0 ? fmt::format("{:.2f}", best_time / bound) : "-",
               bound > 0 ? fmt::format("{:.2f}", bound * 1e6) : "-");
    if (bytes > sweep.max_bytes / sweep.factor) break;  // the next size would pass the end
    bytes *= sweep.factor;
  }
}

void setup(CLI::App& app) {
  auto command = std::make_shared<PredictCommand>();
  CLI::App* predict = app.add_subcommand(
      "predict", "Predicted all-reduce time, algbw and busbw per algorithm and size");
  predict->add_option("TOPOLOGY", command->topology_path, "topology JSON file")->required();
  predict->add_option("-b,--minbytes", command->min_bytes, "smallest message (64K, 1M, ...)")
      ->capture_default_str();
  predict->add_option("-e,--maxbytes", command->max_bytes, "largest message")
      ->capture_default_str();
  predict->add_option("-f,--stepfactor", command->factor, "multiply the size by this each row")
      ->capture_default_str();
  predict->add_option("-t,--dtype", command->dtype,
                      "element type, for the count column: float, double, half, bfloat16, int8, "
                      "uint8, int32, uint32, int64, uint64")
      ->capture_default_str();
  predict->add_option("-a,--algorithms", command->algorithms,
                      algorithm_help("algorithms to show (default: all, without pipelining):"))
      ->delimiter(',')
      ->check(algorithm_validator());
  predict->add_option("--hop-overhead", command->hop_overhead,
                      "software cost of one hop, added to every hop's latency (\"2 us\")")
      ->capture_default_str();
  predict->callback([command] { run(*command); });
}

const Registration registration("predict", setup);

}  // namespace
}  // namespace flexplan::cli
