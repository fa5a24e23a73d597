// `flexplan predict TOPOLOGY.json -b 64K -e 512M -f 2`: predicted all-reduce time, algbw and
// busbw per algorithm and message size, in the manner of nccl-tests' tables, and the best
// algorithm per size. With --sparse, a second table: the sparse all-reduce's predicted time at
// a few densities beside the best dense plan, and the density below which sparse wins.
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
#include "planner/sparse_cost.hpp"

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
  bool sparse = false;
  double mstopk_ns = SparseCostParams{}.mstopk_seconds_per_element * 1e9;
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

// The sparse all-reduce beside the best dense plan (planner/sparse_cost.hpp).
void print_sparse(const PredictCommand& command, const Sweep& sweep, const Topology& topo,
                  const std::vector<AlgorithmPrediction>& predictions) {
  SparseCostParams sparse;
  sparse.mstopk_seconds_per_element = command.mstopk_ns * 1e-9;
  const double element = static_cast<double>(sweep.element);
  const double densities[] = {0.001, 0.01, 0.05};
  fmt::print("#\n# sparse all-reduce (docs/sparse.md): MSTopK at {} ns/element, {}-byte indices\n",
             command.mstopk_ns, sparse.index_bytes);
  fmt::print("# {:>12} {:>17} {:>12}", "size (B)", "best dense", "dense (us)");
  for (double density : densities) fmt::print(" {:>12}", fmt::format("d={} (us)", density));
  fmt::print(" {:>22}\n", "sparse wins below d=");
  for (uint64_t bytes = sweep.min_bytes; bytes <= sweep.max_bytes;) {
    const double n = static_cast<double>(bytes);
    const AlgorithmPrediction* best = nullptr;
    double best_time = 0;
    for (const auto& p : predictions) {
      if (!p.time) continue;
      const double time = p.time(n);
      if (!best || time < best_time) {
        best = &p;
        best_time = time;
      }
    }
    std::string row = fmt::format("  {:>12} {:>17} {:>12}", bytes, best ? best->algorithm : "-",
                                  best ? fmt::format("{:.2f}", best_time * 1e6) : "-");
    for (double density : densities)
      row += fmt::format(" {:>12.2f}",
                         sparse_allreduce_cost(topo, n, element, density, sweep.cost, sparse).total() * 1e6);
    std::string wins = "-";
    if (best) {
      const auto rho = sparse_break_even_density(topo, n, element, best_time, sweep.cost, sparse);
      wins = !rho ? "never" : *rho >= 1.0 ? "always (even 1)" : fmt::format("{:.4g}", *rho);
    }
    fmt::print("{} {:>22}\n", row, wins);
    if (bytes > sweep.max_bytes / sweep.factor) break;
    bytes *= sweep.factor;
  }
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
  if (command.sparse) print_sparse(command, sweep, topo, predictions);
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
  predict->add_flag("--sparse", command->sparse,
                    "also predict the sparse all-reduce and the density below which it beats the "
                    "best dense plan");
  predict->add_option("--mstopk-ns", command->mstopk_ns,
                      "MSTopK's time per element for --sparse, in nanoseconds (bench/sparse)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  predict->callback([command] { run(*command); });
}

const Registration registration("predict", setup);

}  // namespace
}  // namespace flexplan::cli
