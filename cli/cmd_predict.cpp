// `flexplan predict TOPOLOGY.json -b 64K -e 512M -f 2 [--collective C] [--root R]`: predicted
// time, algbw and busbw of a collective per algorithm and message size, in the manner of
// nccl-tests' tables: per size the schedule the plan command would write, its time and its
// bandwidths, then every algorithm's time (algorithms as rows, so that it fits 100 columns).
// With --sparse, a third table: the sparse all-reduce's predicted time at a few densities
// beside the best dense plan, and the density below which sparse wins.
// --format json prints the same records.
#include <algorithm>
#include <functional>
#include <memory>
#include <tuple>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/algorithm_option.hpp"
#include "cli/arguments.hpp"
#include "cli/cost_options.hpp"
#include "cli/command.hpp"
#include "ir/collective_contract.hpp"
#include "planner/algorithms.hpp"
#include "planner/collective_planner.hpp"
#include "planner/floor.hpp"
#include "planner/plan_builder.hpp"
#include "planner/plan_price.hpp"
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
  std::string dtype = "float32";
  std::vector<std::string> algorithms;
  CostOptions cost;
  bool sparse = false;
  double mstopk_ns = SparseCostParams{}.mstopk_seconds_per_element * 1e9;
  std::vector<double> densities{0.001, 0.01, 0.05};
  std::string format = "text";
  std::string collective = "allreduce";
  int32_t root = 0;
};

// nccl-tests' bus-bandwidth factor: 2(P-1)/P for all-reduce, (P-1)/P for all-gather and
// reduce-scatter, 1 for broadcast and reduce.
double bus_factor(ir::Collective collective, int learners) {
  const double p = learners;
  if (collective == ir::Collective::AllReduce) return 2 * (p - 1) / p;
  return ir::has_shards(collective) ? (p - 1) / p : 1.0;
}

// What the plan command would write for each size: the winner of its race (pipelined variants
// included), as one narrow query.
struct WrittenPlan {
  std::function<std::pair<std::string, double>(uint64_t bytes)> at;
};

WrittenPlan written_plan(const Topology& topo, ir::Collective collective, int32_t root,
                         const CostParams& cost) {
  if (collective == ir::Collective::AllReduce) {
    PlanOptions options;
    options.cost = cost;
    auto price = std::make_shared<PlanPrice>(price_plan(topo, options));  // as whatif prices
    return {[price](uint64_t bytes) { return std::pair(price->at(bytes).algorithm, price->time(bytes)); }};
  }
  auto planned = std::make_shared<CollectivePlan>(plan_collective(topo, collective, root, {}, cost));
  return {[planned](uint64_t bytes) {
    const CollectiveCandidate& chosen = planned->chosen(bytes);
    return std::pair(chosen.algorithm, chosen.cost.at(static_cast<double>(bytes)));
  }};
}

struct Sweep {
  uint64_t min_bytes, max_bytes, factor;
  size_t element;
  CostParams cost;
};

// Argument errors are the user's: report them as such (exit 2).
Sweep parse_sweep(const PredictCommand& command) {
  Sweep sweep{};
  sweep.min_bytes = size_argument(command.min_bytes, "-b/--minbytes");
  sweep.max_bytes = size_argument(command.max_bytes, "-e/--maxbytes");
  sweep.element = dtype_argument(command.dtype);
  try {
    sweep.cost = command.cost.parse();
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  sweep.factor = command.factor;
  size_sweep(sweep.min_bytes, sweep.max_bytes, sweep.factor);  // checks the three
  return sweep;
}

// One size of the sweep: every algorithm's time, the best, the floor and, with --sparse, the
// sparse all-reduce at each density (planner/sparse_cost.hpp).
struct SparsePoint {
  double density;
  SparseCost cost;
};
struct SizeRecord {
  uint64_t bytes;
  std::vector<std::optional<double>> seconds;  // by algorithm, as `predictions`
  int best = -1;                                // index into `predictions`
  double floor_seconds = 0;
  std::string plan_algorithm;  // what the plan command writes for this size
  double plan_seconds = 0;
  std::vector<SparsePoint> sparse;
  std::optional<double> sparse_break_even;      // sparse wins below this density
};

std::vector<SizeRecord> sweep_records(const PredictCommand& command, const Sweep& sweep,
                                      const Topology& topo,
                                      const std::vector<AlgorithmPrediction>& predictions,
                                      const CostFloor& floor, const SparseCostParams& sparse,
                                      const WrittenPlan& plan) {
  std::vector<SizeRecord> records;
  const double element = static_cast<double>(sweep.element);
  for (uint64_t bytes = sweep.min_bytes; bytes <= sweep.max_bytes;) {
    const double n = static_cast<double>(bytes);
    SizeRecord record{bytes, {}, -1, floor.at(n), {}, 0, {}, std::nullopt};
    std::tie(record.plan_algorithm, record.plan_seconds) = plan.at(bytes);
    for (size_t i = 0; i < predictions.size(); ++i) {
      if (!predictions[i].time) {
        record.seconds.emplace_back();
        continue;
      }
      const double time = predictions[i].time(n);
      record.seconds.emplace_back(time);
      if (record.best < 0 || time < *record.seconds[static_cast<size_t>(record.best)])
        record.best = static_cast<int>(i);
    }
    if (command.sparse) {
      for (double density : command.densities)
        record.sparse.push_back(
            {density, sparse_allreduce_cost(topo, n, element, density, sweep.cost, sparse)});
      if (record.best >= 0)
        record.sparse_break_even = sparse_break_even_density(
            topo, n, element, *record.seconds[static_cast<size_t>(record.best)], sweep.cost, sparse);
    }
    records.push_back(std::move(record));
    if (bytes > sweep.max_bytes / sweep.factor) break;  // the next size would pass the end
    bytes *= sweep.factor;
  }
  return records;
}

// The sparse all-reduce beside the best dense plan.
void print_sparse(const PredictCommand& command, const std::vector<SizeRecord>& records,
                  const std::vector<AlgorithmPrediction>& predictions, const SparseCostParams& sparse) {
  fmt::print("#\n# sparse all-reduce (docs/sparse.md): MSTopK at {} ns/element, {}-byte indices\n",
             command.mstopk_ns, sparse.index_bytes);
  fmt::print("# {:>10} {:<18} {:>10}", "size (B)", "best dense", "dense");
  for (double density : command.densities) fmt::print(" {:>10}", fmt::format("d={}", density));
  fmt::print(" {:>16}\n", "sparse wins if d<");
  for (const SizeRecord& record : records) {
    const bool has_best = record.best >= 0;
    const auto best = static_cast<size_t>(std::max(record.best, 0));
    std::string row = fmt::format("  {:>10} {:<18} {:>10}", record.bytes,
                                  has_best ? predictions[best].algorithm : "-",
                                  has_best ? format_seconds(*record.seconds[best]) : "-");
    for (const SparsePoint& point : record.sparse) row += fmt::format(" {:>10}", format_seconds(point.cost.total()));
    std::string wins = "-";
    if (has_best) {
      const auto& rho = record.sparse_break_even;
      wins = !rho ? "never" : *rho >= 1.0 ? "always" : fmt::format("{:.4g}", *rho);
    }
    fmt::print("{} {:>16}\n", row, wins);
  }
}

// Sizes per block of the time-by-algorithm table, so that it fits 100 columns.
constexpr size_t kSizesPerBlock = 7;

void print_text(const PredictCommand& command, const Sweep& sweep, const Topology& topo,
                const std::vector<AlgorithmPrediction>& predictions, const CostFloor& floor,
                const std::vector<SizeRecord>& records, const SparseCostParams& sparse,
                ir::Collective collective) {
  const int learners = topo.num_learners();
  const double factor = bus_factor(collective, learners);
  fmt::print("# flexplan predict: {}{}, topology {} ({})\n# {} ({} B), hop overhead {} (from {}), incast loss {:g}{}, "
             "slices progress per {}{}\n",
             ir::to_string(collective),
             ir::has_root(collective) ? fmt::format(" from root {}", command.root) : "",
             topo.name(), describe_topology(topo), command.dtype, sweep.element,
             format_seconds(sweep.cost.hop_overhead), command.cost.hop_overhead_source(topo), sweep.cost.incast_loss,
             sweep.cost.reduce_bandwidth > 0
                 ? ", reductions at " + format_bandwidth(sweep.cost.reduce_bandwidth)
                 : std::string(),
             sweep.cost.slice_progress == SliceProgress::PerSlice ? "slice" : "rank",
             sweep.cost.host_cores > 0 ? fmt::format(", learners sharing {} host cores", sweep.cost.host_cores)
                                       : std::string());
  if (floor.per_byte > 0)
    fmt::print("# floor: the larger of n / {} (bandwidth, set by {})\n#   and {} (latency: {})\n",
               format_gbps(1 / floor.per_byte), floor.bound_by, format_seconds(floor.latency),
               ir::has_root(collective) ? "the farthest learner from the root" : "the diameter");
  if (floor.per_byte > 0)
    fmt::print("# latency floor D = {}; reference n / {} + D (the data across the bottleneck,\n"
               "#   then across the diameter: what a pipelined tree approaches)\n",
               format_seconds(floor.latency), format_gbps(1 / floor.per_byte));
  fmt::print("# plan: what `flexplan TOPO -o plan.bin` writes for the size, and its time;\n"
             "# busbw = algbw * {} with n = {} learners\n#\n",
             collective == ir::Collective::AllReduce ? "2(n-1)/n"
             : ir::has_shards(collective)            ? "(n-1)/n"
                                                     : "1",
             learners);
  fmt::print("# {:>12} {:>12}  {:<18} {:>10} {:>8} {:>8} {:>7} {:>10}\n", "size", "count", "plan",
             "time", "algbw", "busbw", "/floor", "floor");
  fmt::print("# {:>12} {:>12}  {:<18} {:>10} {:>8} {:>8} {:>7} {:>10}\n", "(B)", "(elements)", "",
             "(us)", "(GB/s)", "(GB/s)", "", "(us)");
  for (const SizeRecord& record : records) {
    const double n = static_cast<double>(record.bytes);
    const double time = record.plan_seconds, bound = record.floor_seconds;
    const double algbw = time > 0 ? algorithm_bandwidth(n, time) : 0;
    fmt::print("  {:>12} {:>12}  {:<18} {:>10.2f} {:>8.3f} {:>8.3f} {:>7} {:>10.2f}\n", record.bytes,
               record.bytes / sweep.element, record.plan_algorithm, time * 1e6, algbw / 1e9,
               algbw * factor / 1e9, bound > 0 ? fmt::format("{:.2f}", time / bound) : "-",
               bound * 1e6);
  }

  // Every algorithm's time, algorithms as rows and sizes as columns, in blocks.
  fmt::print("#\n# time by algorithm, without pipelining (* the fastest of them at the size):\n");
  for (const auto& p : predictions)
    fmt::print("# {:<18} {}{}\n", p.algorithm,
               p.method == "none" ? "no prediction" : "priced by " + p.method,
               p.note.empty() ? "" : " (" + p.note + ")");
  for (size_t first = 0; first < records.size(); first += kSizesPerBlock) {
    const size_t last = std::min(records.size(), first + kSizesPerBlock);
    std::string header = fmt::format("# {:<18}", "size");
    for (size_t r = first; r < last; ++r)
      header += fmt::format(" {:>10}", format_bytes(static_cast<double>(records[r].bytes)));
    fmt::print("{}\n", header);
    for (size_t i = 0; i < predictions.size(); ++i) {
      std::string row = fmt::format("  {:<18}", predictions[i].algorithm);
      for (size_t r = first; r < last; ++r) {
        const auto& time = records[r].seconds[i];
        const bool best = records[r].best == static_cast<int>(i);
        row += fmt::format(" {:>10}", time ? format_seconds(*time) + (best ? "*" : " ") : "- ");
      }
      while (!row.empty() && row.back() == ' ') row.pop_back();
      fmt::print("{}\n", row);
    }
  }
  if (command.sparse) print_sparse(command, records, predictions, sparse);
}

// --format json: the same records (docs/cli.md, "predict --format json").
void print_json(const PredictCommand& command, const Sweep& sweep, const Topology& topo,
                const std::vector<AlgorithmPrediction>& predictions, const CostFloor& floor,
                const std::vector<SizeRecord>& records, const SparseCostParams& sparse) {
  using nlohmann::json;
  json algorithms = json::array();
  for (const auto& p : predictions)
    algorithms.push_back({{"name", p.algorithm}, {"method", p.method}, {"note", p.note}});
  json rows = json::array();
  for (const SizeRecord& record : records) {
    json seconds = json::object();
    for (size_t i = 0; i < predictions.size(); ++i)
      seconds[predictions[i].algorithm] = record.seconds[i] ? json(*record.seconds[i]) : json(nullptr);
    json row{{"bytes", record.bytes},
             {"count", record.bytes / sweep.element},
             {"seconds", seconds},
             {"best", record.best >= 0 ? json(predictions[static_cast<size_t>(record.best)].algorithm) : json(nullptr)},
             {"best_seconds", record.best >= 0 ? json(*record.seconds[static_cast<size_t>(record.best)]) : json(nullptr)},
             {"floor_seconds", record.floor_seconds},
             {"plan", {{"algorithm", record.plan_algorithm}, {"seconds", record.plan_seconds}}}};
    if (command.sparse) {
      json points = json::array();
      for (const SparsePoint& point : record.sparse)
        points.push_back({{"density", point.density},
                          {"seconds", point.cost.total()},
                          {"reduce_scatter_seconds", point.cost.reduce_scatter},
                          {"topk_seconds", point.cost.topk},
                          {"exchange_seconds", point.cost.exchange},
                          {"all_gather_seconds", point.cost.all_gather}});
      row["sparse"] = points;
      row["sparse_wins_below_density"] =
          record.sparse_break_even ? json(std::min(*record.sparse_break_even, 1.0)) : json(nullptr);
    }
    rows.push_back(std::move(row));
  }
  json document{{"format", "flexplan-predict"},
                {"topology", topo.name()},
                {"learners", topo.num_learners()},
                {"collective", command.collective},
                {"root", ir::has_root(ir::collective_from_string(command.collective))
                             ? json(command.root)
                             : json(nullptr)},
                {"dtype", command.dtype},
                {"element_bytes", sweep.element},
                {"hop_overhead_seconds", sweep.cost.hop_overhead},
                {"hop_overhead_from", command.cost.hop_overhead_source(topo)},
                {"incast_loss", sweep.cost.incast_loss},
                {"slice_progress", sweep.cost.slice_progress == SliceProgress::PerSlice ? "slice" : "rank"},
                {"host_cores", sweep.cost.host_cores > 0 ? json(sweep.cost.host_cores) : json(nullptr)},
                {"reduce_bytes_per_second", sweep.cost.reduce_bandwidth > 0
                                                ? json(sweep.cost.reduce_bandwidth)
                                                : json(nullptr)},
                {"floor", {{"seconds_per_byte", floor.per_byte},
                           {"bound_by", floor.bound_by},
                           {"latency_seconds", floor.latency},
                           {"reference", "seconds_per_byte * n + latency_seconds"}}},
                {"algorithms", algorithms},
                {"records", rows}};
  if (command.sparse) {
    document["mstopk_ns_per_element"] = command.mstopk_ns;
    document["index_bytes"] = sparse.index_bytes;
  }
  fmt::print("{}\n", document.dump(2));
}

void run(const PredictCommand& command) {
  Sweep sweep = parse_sweep(command);
  const auto topo = load_topology(command.topology_path);
  command.cost.apply_topology(sweep.cost, topo);
  const ir::Collective collective = ir::collective_from_string(command.collective);
  if (command.sparse && collective != ir::Collective::AllReduce)
    throw CLI::ValidationError("--sparse predicts the sparse all-reduce: leave out --collective");
  if (command.root < 0 || command.root >= topo.num_learners())
    throw CLI::ValidationError(fmt::format("--root {} is not among the {} learners", command.root,
                                           topo.num_learners()));
  std::vector<AlgorithmPrediction> predictions;
  if (collective == ir::Collective::AllReduce) {
    const auto names = command.algorithms.empty() ? algorithm_names() : command.algorithms;
    for (const auto& name : names) {
      try {
        find_algorithm(name);  // -a takes every collective's names; this one must be all-reduce's
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError(e.what());
      }
      predictions.push_back(predict_algorithm(topo, name, sweep.cost));
    }
  } else {
    std::vector<std::string> names;
    for (const std::string& name : command.algorithms) {
      try {
        plan_collective_algorithm_name_check(collective, name);
        names.push_back(name);
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError(e.what());
      }
    }
    if (names.empty()) names = collective_algorithm_names(collective);
    for (const auto& name : names) {
      const ir::Schedule schedule = plan_collective_algorithm(topo, collective, name, command.root);
      const auto cost = std::make_shared<ScheduleCost>(evaluate_schedule(topo, schedule, sweep.cost));
      cost->busy_floor = host_busy_floor(lowered_hop_count(schedule), sweep.cost);  // as the planner's
      predictions.push_back(
          {name, "evaluator", "", [cost](double bytes) { return cost->at(bytes); }});
    }
  }
  const auto floor = collective_floor(topo, collective, command.root);
  const WrittenPlan plan = written_plan(topo, collective, command.root, sweep.cost);
  SparseCostParams sparse;
  sparse.mstopk_seconds_per_element = command.mstopk_ns * 1e-9;
  const auto records = sweep_records(command, sweep, topo, predictions, floor, sparse, plan);
  if (command.format == "json")
    print_json(command, sweep, topo, predictions, floor, records, sparse);
  else
    print_text(command, sweep, topo, predictions, floor, records, sparse, collective);
}

void setup(CLI::App& app) {
  auto command = std::make_shared<PredictCommand>();
  CLI::App* predict = app.add_subcommand(
      "predict", "Predicted time, algbw and busbw of a collective per algorithm and size");
  predict->add_option("TOPOLOGY", command->topology_path, "topology JSON file")->required();
  predict->add_option("-b,--minbytes", command->min_bytes, "smallest message (64K, 1M, ...)")
      ->capture_default_str();
  predict->add_option("-e,--maxbytes", command->max_bytes, "largest message")
      ->capture_default_str();
  predict->add_option("-f,--stepfactor", command->factor, "multiply the size by this each row")
      ->capture_default_str();
  predict->add_option("-t,--dtype", command->dtype,
                      fmt::format("element type, for the count column: {} (float, double, half, "
                                  "int and char still work, with a warning)",
                                  dtype_names()))
      ->capture_default_str();
  predict->add_option("-a,--algorithms", command->algorithms,
                      algorithm_help("algorithms to show (default: all, without pipelining):"))
      ->delimiter(',')
      ->allow_extra_args(false)  // one word, a comma list: positional arguments may follow
      ->check(algorithm_validator());
  predict->add_option("--collective", command->collective,
                      "allreduce, reduce_scatter, allgather, broadcast or reduce")
      ->capture_default_str()
      ->check(CLI::IsMember({"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}));
  predict->add_option("--root", command->root, "root of a broadcast or reduce")
      ->capture_default_str();
  command->cost.add_to(*predict);
  predict->add_flag("--sparse", command->sparse,
                    "also predict the sparse all-reduce and the density below which it beats the "
                    "best dense plan");
  predict->add_option("--mstopk-ns", command->mstopk_ns,
                      "MSTopK's time per element for --sparse, in nanoseconds (bench/sparse)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  predict->add_option("--densities", command->densities,
                      "densities for --sparse, each in (0, 1] (default 0.001,0.01,0.05)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0) & CLI::Validator(
                  [](const std::string& text) {
                    return std::stod(text) > 0 ? std::string() : "a density must be above 0";
                  },
                  "", "positive"));
  add_format_option(*predict, command->format);
  predict->callback([command] { run(*command); });
}

const Registration registration("predict", setup);

}  // namespace
}  // namespace flexplan::cli
