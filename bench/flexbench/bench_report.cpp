#include "bench/flexbench/bench_report.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace flexplan::bench {

TimeStats summarize(std::vector<double> times_us) {
  TimeStats stats;
  if (times_us.empty()) return stats;
  std::sort(times_us.begin(), times_us.end());
  const size_t n = times_us.size();
  stats.median_us = n % 2 ? times_us[n / 2] : (times_us[n / 2 - 1] + times_us[n / 2]) / 2;
  stats.min_us = times_us.front();
  stats.max_us = times_us.back();
  return stats;
}

double algbw_gbps(uint64_t bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0;
}

double bus_factor(ir::Collective collective, int world) {
  const double n = world;
  switch (collective) {
    case ir::Collective::AllReduce: return 2 * (n - 1) / n;
    case ir::Collective::ReduceScatter:
    case ir::Collective::AllGather: return (n - 1) / n;
    case ir::Collective::Broadcast:
    case ir::Collective::Reduce: return 1;
  }
  return 1;
}

double busbw_gbps(uint64_t bytes, double time_us, int world, ir::Collective collective) {
  return algbw_gbps(bytes, time_us) * bus_factor(collective, world);
}

const char* mpi_name(ir::Collective collective) {
  switch (collective) {
    case ir::Collective::AllReduce: return "MPI_Allreduce";
    case ir::Collective::ReduceScatter: return "MPI_Reduce_scatter_block";
    case ir::Collective::AllGather: return "MPI_Allgather";
    case ir::Collective::Broadcast: return "MPI_Bcast";
    case ir::Collective::Reduce: return "MPI_Reduce";
  }
  return "MPI";
}

void print_header(const BenchArgs& args, const ProgressMode& mode, const std::string& topology, int world) {
  const bool combines = args.collective == ir::Collective::AllReduce ||
                        args.collective == ir::Collective::ReduceScatter || args.collective == ir::Collective::Reduce;
  const std::string root = (args.collective == ir::Collective::Broadcast || args.collective == ir::Collective::Reduce)
                               ? fmt::format(" from root {}", args.root)
                               : "";
  fmt::print("# flexbench: {}{}, plan {} (topology {}), {} ranks, {}{}{}, {} iterations after {} warmup, {} progress{}\n",
             ir::to_string(args.collective), root, args.plan_path, topology, world, to_string(args.type),
             combines ? " " : "", combines ? to_string(args.op) : std::string_view{}, args.iterations, args.warmup,
             mode.blocking ? "blocking" : "busy-polling", mode.why.empty() ? "" : " (" + mode.why + ")");
  fmt::print("# algorithm: {}; times are medians of the slowest rank per iteration{}; MPI = {}{}\n",
             args.algorithm.empty() ? "the plan's choice per size" : args.algorithm,
             args.agg_iters > 1 ? fmt::format(" of {} calls back to back, per call", args.agg_iters) : "",
             mpi_name(args.collective),
             combines && args.op == ReduceOp::Avg ? " with MPI_SUM (MPI has no avg)" : "");
  fmt::print("# size is the whole buffer's (an all-gather's receive, a reduce-scatter's send), count its "
             "elements; busbw = algbw x {:.3f}\n", bus_factor(args.collective, world));
  fmt::print("#\n");
  fmt::print("# {:>12} {:>12} {:>8} {:>6} {:>13} {:>10} {:>8} {:>8} {:>7} {:>10} {:>8} {:>8}\n", "size",
             "count", "type", "redop", "algorithm", "time(us)", "algbw", "busbw", "#wrong", "mpi(us)",
             "mpi_bus", "fp/mpi");
  fmt::print("# {:>12} {:>12} {:>8} {:>6} {:>13} {:>10} {:>8} {:>8} {:>7} {:>10} {:>8} {:>8}\n", "(B)",
             "(elements)", "", "", "", "", "(GB/s)", "(GB/s)", "", "", "(GB/s)", "");
}

void print_row(const BenchArgs& args, const Row& row, int world) {
  const std::string check = args.check ? fmt::format("{}", row.wrong) : "N/A";
  std::string mpi_columns = fmt::format("{:>10} {:>8} {:>8}", "n/a", "n/a", "n/a");
  if (row.mpi) {
    mpi_columns = fmt::format("{:>10.1f} {:>8.3f} {:>8.2f}", row.mpi->median_us,
                              busbw_gbps(row.bytes, row.mpi->median_us, world, args.collective),
                              row.flexplan.median_us / row.mpi->median_us);
  }
  fmt::print("  {:>12} {:>12} {:>8} {:>6} {:>13} {:>10.1f} {:>8.3f} {:>8.3f} {:>7} {}\n", row.bytes,
             row.count, to_string(args.type), to_string(args.op), row.algorithm,
             row.flexplan.median_us, algbw_gbps(row.bytes, row.flexplan.median_us),
             busbw_gbps(row.bytes, row.flexplan.median_us, world, args.collective), check, mpi_columns);
  std::fflush(stdout);
}

void write_json(const std::string& path, const BenchArgs& args, bool blocking, const std::string& topology,
                int world, const std::vector<Row>& rows) {
  nlohmann::json records = nlohmann::json::array();
  for (const Row& row : rows) {
    nlohmann::json record{
        {"bytes", row.bytes},
        {"count", row.count},
        {"dtype", std::string(to_string(args.type))},
        {"redop", std::string(to_string(args.op))},
        {"algorithm", row.algorithm},
        {"time_us_median", row.flexplan.median_us},
        {"time_us_min", row.flexplan.min_us},
        {"time_us_max", row.flexplan.max_us},
        {"algbw_gbps", algbw_gbps(row.bytes, row.flexplan.median_us)},
        {"busbw_gbps", busbw_gbps(row.bytes, row.flexplan.median_us, world, args.collective)},
        {"wrong", args.check ? nlohmann::json(row.wrong) : nlohmann::json(nullptr)},
        {"mpi_time_us_median", row.mpi ? nlohmann::json(row.mpi->median_us) : nlohmann::json(nullptr)},
    };
    records.push_back(std::move(record));
  }
  const nlohmann::json document{
      {"tool", "flexbench"},
      {"collective", std::string(ir::to_string(args.collective))},
      {"root", args.collective == ir::Collective::Broadcast || args.collective == ir::Collective::Reduce
                   ? nlohmann::json(args.root)
                   : nlohmann::json(nullptr)},
      {"mpi_function", mpi_name(args.collective)},
      {"plan", args.plan_path},
      {"topology", topology},
      {"world_size", world},
      {"iterations", args.iterations},
      {"agg_iters", args.agg_iters},
      {"warmup", args.warmup},
      {"blocking", blocking},
      {"forced_algorithm", args.algorithm.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.algorithm)},
      {"records", records},
  };
  std::ofstream out(path);
  out << document.dump(2) << "\n";
  if (!out) throw std::runtime_error(fmt::format("cannot write --json file '{}'", path));
}

}  // namespace flexplan::bench
