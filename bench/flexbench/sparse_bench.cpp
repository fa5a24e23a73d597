// flexplan_sparse_bench: the sparse all-reduce (docs/sparse.md) timed beside the plan's dense
// all-reduce on the same vectors, per size and density, with MSTopK's own time on each rank's
// slice measured alone (the compute term of the sparse cost model, as this host runs it).
// It also times the sparse call's steps within the machines alone, every machine at once
// (machine_steps_us below), for calibrating the learner links with the runtime itself.
//   mpirun -np N flexplan_sparse_bench plan.bin -b 8M -e 64M -f 2 --densities 0.001,0.01,0.05
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/flexbench/bench_args.hpp"
#include "bench/flexbench/bench_report.hpp"
#include "bench/flexbench/timing.hpp"
#include "bench/flexbench/tool_main.hpp"
#include "ir/sparse_layout.hpp"
#include "runtime/communicator.hpp"
#include "sparse/mstopk.hpp"

namespace flexplan::bench {
namespace {

struct SparseBenchArgs {
  std::string plan_path;
  uint64_t min_bytes = 8ull << 20, max_bytes = 64ull << 20, factor = 2;
  std::vector<double> densities{0.001, 0.01, 0.05};
  int iterations = 5, warmup = 1;
  DataType type = DataType::Float32;
  bool blocking = false, error_feedback = false;
  std::string json_path;
};

std::optional<SparseBenchArgs> parse(int argc, char** argv, bool print, int& exit_code) {
  SparseBenchArgs args;
  std::string min_text = "8M", max_text = "64M", type_text = "float32", old_type_text;
  CLI::App app{"flexplan_sparse_bench: the sparse all-reduce beside the plan's dense all-reduce"};
  app.add_option("plan", args.plan_path, "plan.bin written by flexplan")->required();
  app.failure_message([](const CLI::App*, const CLI::Error& e) {  // prefixed as flexplan's errors
    return fmt::format("flexplan_sparse_bench: error: {}\nRun with --help for more information.\n", e.what());
  });
  app.add_option("-b,--minbytes", min_text, "smallest vector (8M, 64M, ...)")->capture_default_str();
  app.add_option("-e,--maxbytes", max_text, "largest vector")->capture_default_str();
  app.add_option("-f,--stepfactor", args.factor, "size multiplier between rows")->check(CLI::Range(2, 1 << 20));
  app.add_option("--densities", args.densities, "densities, each in (0, 1] (default 0.001,0.01,0.05)")
      ->delimiter(',')
      ->check(CLI::Range(1e-9, 1.0));
  app.add_option("-n,--iters", args.iterations, "timed iterations per point")->check(CLI::Range(1, 1 << 20));
  app.add_option("-w,--warmup_iters", args.warmup, "untimed iterations per point")->check(CLI::Range(0, 1 << 20));
  app.add_option("-t,--dtype", type_text, "float32 or float64")->capture_default_str();
  app.add_option("-d,--datatype", old_type_text, "deprecated: -t/--dtype");
  app.add_flag("--blocking", args.blocking, "sleep in ucp_worker_wait instead of busy-polling");
  app.add_flag("--error-feedback", args.error_feedback, "carry a residual across the iterations");
  app.add_option("--json", args.json_path, "also write the records to FILE");
  try {
    app.parse(argc, argv);
    args.min_bytes = parse_size(min_text, "-b/--minbytes", print);
    args.max_bytes = parse_size(max_text, "-e/--maxbytes", print);
    if (args.min_bytes > args.max_bytes)
      throw std::invalid_argument(fmt::format("-b {} is larger than -e {}", min_text, max_text));
    const auto type = parse_dtype(type_text, old_type_text, print);
    if (!type || (*type != DataType::Float32 && *type != DataType::Float64))
      throw std::invalid_argument(fmt::format("-t {}: the sparse all-reduce takes float32 or float64",
                                              old_type_text.empty() ? type_text : old_type_text));
    args.type = *type;
  } catch (const CLI::ParseError& e) {
    exit_code = e.get_exit_code() == 0 ? 0 : kExitBadInput;
    if (print) app.exit(e);
    return std::nullopt;
  } catch (const std::invalid_argument& e) {
    exit_code = kExitBadInput;
    if (print) fmt::print(stderr, "flexplan_sparse_bench: error: {}\n", e.what());
    return std::nullopt;
  }
  return args;
}

// Gaussian gradients, different on every rank (the selection sees realistic magnitudes: the
// pattern flexbench checks with is a handful of small integers, all ties).
template <typename T>
void fill_gaussian(std::vector<std::byte>& bytes, size_t count, int rank) {
  std::mt19937_64 engine(0x5eed0000u + static_cast<uint64_t>(rank));
  std::normal_distribution<T> normal(0, 1);
  T* values = reinterpret_cast<T*>(bytes.data());
  for (size_t i = 0; i < count; ++i) values[i] = normal(engine);
}

uint64_t fnv1a(const std::byte* data, size_t size) {
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ static_cast<uint8_t>(data[i])) * 1099511628211ull;
  return hash;
}

template <typename T>
uint64_t count_nonzero(const std::byte* data, size_t count) {
  const T* values = reinterpret_cast<const T*>(data);
  return static_cast<uint64_t>(std::count_if(values, values + count, [](T v) { return v != T(0); }));
}

// MSTopK alone on this rank's slice of the dense sum's shape, every rank at once (so the
// host's cores are shared as in the all-reduce): the median over as many runs as the sparse call
// was timed for (at least 3) after one untimed run, slowest rank. The prediction charges this
// time in full, and on two shared cores a median of 3 moved by 40% between runs of one point.
template <typename T>
double mstopk_alone_us(const std::byte* data, uint64_t begin, uint64_t end, double density, int iterations) {
  const std::span<const T> slice(reinterpret_cast<const T*>(data) + begin, end - begin);
  const size_t k = static_cast<size_t>(std::ceil(density * static_cast<double>(slice.size())));
  std::vector<uint32_t> indices;
  return time_iterations(1, std::max(iterations, 3), [&] { sparse::mstopk<T>(slice, k, indices); }).median_us;
}

// The rate at which this host sums, every rank at once, as step 1 of the sparse all-reduce
// does: the machine's other L - 1 parts of this rank's slice added into it one after another
// (parts taken from places of `data` spread over it, as received parts lie apart). Bytes summed per
// second, the slowest rank's (a rank alone on its machine sums nothing and does not count);
// median of 3 after one untimed run. 0 when no rank sums.
template <typename T>
double sum_rate_bytes_per_s(const std::byte* data, uint64_t count, uint64_t length, size_t parts) {
  std::vector<T> accumulator(length);
  const T* values = reinterpret_cast<const T*>(data);
  const bool sums = parts > 1 && length > 0 && length <= count;
  auto part_at = [&](size_t q) { return values + q * (count - length) / (parts - 1); };
  std::vector<double> seconds;
  for (int i = 0; i < 4; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    if (sums) {
      std::copy(part_at(0), part_at(0) + length, accumulator.begin());
      for (size_t q = 1; q < parts; ++q) {
        const T* part = part_at(q);
        for (uint64_t e = 0; e < length; ++e) accumulator[e] += part[e];
      }
    }
    if (i > 0) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  volatile T sink = length > 0 ? accumulator[length / 2] : T(0);  // keeps the sums
  (void)sink;
  // parts - 1 additions of `length` elements; the first part's copy is timed with them, as the
  // runtime makes it too.
  double rate = sums ? static_cast<double>((parts - 1) * length * sizeof(T)) / seconds[1]
                                  : std::numeric_limits<double>::infinity();
  MPI_Allreduce(MPI_IN_PLACE, &rate, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return std::isinf(rate) ? 0.0 : rate;
}

// Steps 1 and 4 of the sparse all-reduce alone (Communicator::sparse_machine_steps: the same
// transfers and sums, nothing selected or exchanged), every machine at once. Per machine, the
// median over the iterations of its slowest learner's time; every rank gets the same. These
// calibrate the learner links as the sparse call sees them (sparse_table.py; docs/sparse.md),
// where a ucx_perftest ring run at once moved by 2x between calibrations.
std::vector<double> machine_steps_us(Communicator& comm, const ir::SparseLayout& layout, const std::byte* input,
                                     std::byte* work, uint64_t count, DataType type, int warmup, int iterations) {
  const int machine = layout.machine_of[static_cast<size_t>(comm.rank())];  // the plan's rank
  MPI_Comm machine_comm;
  MPI_Comm_split(MPI_COMM_WORLD, machine, comm.rank(), &machine_comm);
  const size_t bytes = count * size_of(type);
  std::vector<double> times(static_cast<size_t>(iterations));
  // At least one untimed call: the first builds and verifies the exchange.
  for (int i = -std::max(warmup, 1); i < iterations; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    std::memcpy(work, input, bytes);
    MPI_Barrier(MPI_COMM_WORLD);  // every machine at once
    const auto start = std::chrono::steady_clock::now();
    comm.sparse_machine_steps(work, count, type);
    const auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (i >= 0) times[static_cast<size_t>(i)] = us;
  }
  MPI_Allreduce(MPI_IN_PLACE, times.data(), iterations, MPI_DOUBLE, MPI_MAX, machine_comm);
  MPI_Comm_free(&machine_comm);
  std::vector<double> per_machine(layout.machines.size(), 0);
  per_machine[static_cast<size_t>(machine)] = summarize(std::move(times)).median_us;
  MPI_Allreduce(MPI_IN_PLACE, per_machine.data(), static_cast<int>(per_machine.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  return per_machine;
}

struct SparseResult {
  double density;
  TimeStats time;
  double mstopk_us;
  uint64_t nonzero, selected_bound, machine_lower_bound;
  bool wrong;
};

struct Record {
  uint64_t bytes, count;
  std::string dense_algorithm;
  TimeStats dense;
  double sum_bytes_per_s;  // sum_rate_bytes_per_s at this size
  std::vector<double> machine_steps_us;  // machine_steps_us() at this size
  std::vector<SparseResult> sparse;
};

int run(const SparseBenchArgs& args, int rank, int world) {
  std::optional<Communicator> comm;
  if (const int status = open_communicator(comm, args.plan_path, args.blocking, rank, "flexplan_sparse_bench"))
    return status;
  const ir::SparseLayout layout = ir::sparse_layout(comm->plan());
  const size_t element = size_of(args.type);
  const size_t max_count = std::max<uint64_t>(1, args.max_bytes / element);
  std::vector<std::byte> input(max_count * element), work(max_count * element), dense(max_count * element);
  if (args.type == DataType::Float32) fill_gaussian<float>(input, max_count, rank);
  else fill_gaussian<double>(input, max_count, rank);

  // Progress mode as the runtime runs it: --blocking or FLEXPLAN_BLOCKING=1.
  if (rank == 0) {
    std::string machines;
    for (const auto& m : layout.machines) machines += (machines.empty() ? "" : "+") + std::to_string(m.size());
    fmt::print("# flexplan_sparse_bench: plan {} (topology {}), {} ranks on {} machines ({}), {}, "
               "{} iterations after {} warmup, {} progress, error feedback {}\n",
               args.plan_path, comm->plan().topology_name, world, layout.machines.size(), machines,
               to_string(args.type), args.iterations, args.warmup,
               comm->options().blocking ? "blocking" : "busy-polling", args.error_feedback ? "on" : "off");
    fmt::print("# times: medians of the slowest rank per iteration; dense = the plan's all-reduce; "
               "mstopk = MSTopK alone on one slice (slowest rank, all ranks at once)\n#\n");
    fmt::print("# {:>10} {:>10} {:>15} {:>11} {:>8} {:>11} {:>9} {:>10} {:>9} {:>7}\n", "size(B)",
               "count", "dense algo", "dense(us)", "density", "sparse(us)", "speedup", "mstopk(us)",
               "nonzero", "#wrong");
  }
  std::vector<Record> records;
  uint64_t wrong_total = 0;
  for (uint64_t size = args.min_bytes; size <= args.max_bytes; size *= args.factor) {
    Record record;
    record.count = std::max<uint64_t>(1, size / element);
    record.bytes = record.count * element;
    try {
      record.dense_algorithm = ir::select_schedule(comm->plan(), ir::Collective::AllReduce, record.bytes).algorithm;
    } catch (const std::out_of_range&) {
      record.dense_algorithm = "none";
    }
    record.dense = time_iterations(args.warmup, args.iterations, [&] {
      comm->allreduce(input.data(), dense.data(), record.count, args.type, ReduceOp::Sum);
    });
    const auto slice = layout.slice(rank, record.count);
    // The slice's own part plus the machine's others: as many parts as learners.
    const size_t parts = layout.machines[static_cast<size_t>(layout.machine_of[static_cast<size_t>(rank)])].size();
    record.sum_bytes_per_s =
        args.type == DataType::Float32
            ? sum_rate_bytes_per_s<float>(input.data(), record.count, slice.end - slice.begin, parts)
            : sum_rate_bytes_per_s<double>(input.data(), record.count, slice.end - slice.begin, parts);
    record.machine_steps_us = machine_steps_us(*comm, layout, input.data(), work.data(), record.count, args.type,
                                               args.warmup, args.iterations);
    for (double density : args.densities) {
      SparseResidual residual;
      SparseResidual* feedback = args.error_feedback ? &residual : nullptr;
      SparseResult result{density, {}, 0, 0, 0, 0, false};
      result.time = time_iterations(
          args.warmup, args.iterations,
          [&] { comm->sparse_allreduce(work.data(), record.count, args.type, density, feedback); },
          [&] { std::memcpy(work.data(), input.data(), record.bytes); });
      // Checks that can fail: every rank holds the same bits; at most every slice's k elements
      // are nonzero, and at least the most any one machine selected (Gaussian sums are never 0).
      const uint64_t hash = fnv1a(work.data(), record.bytes);
      uint64_t hashes[2] = {hash, ~hash};
      MPI_Allreduce(MPI_IN_PLACE, hashes, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
      result.nonzero = args.type == DataType::Float32 ? count_nonzero<float>(work.data(), record.count)
                                                      : count_nonzero<double>(work.data(), record.count);
      std::vector<uint64_t> per_machine(layout.machines.size(), 0);
      for (int32_t r = 0; r < world; ++r) {
        const auto s = layout.slice(r, record.count);
        const auto k = static_cast<uint64_t>(std::ceil(density * static_cast<double>(s.end - s.begin)));
        per_machine[static_cast<size_t>(layout.machine_of[static_cast<size_t>(r)])] += k;
        result.selected_bound += k;
      }
      result.machine_lower_bound = *std::max_element(per_machine.begin(), per_machine.end());
      int bad = hashes[0] != hash || ~hashes[1] != hash || result.nonzero > result.selected_bound ||
                result.nonzero < result.machine_lower_bound;
      MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      result.wrong = bad != 0;
      wrong_total += bad;
      result.mstopk_us = args.type == DataType::Float32
                             ? mstopk_alone_us<float>(dense.data(), slice.begin, slice.end, density, args.iterations)
                             : mstopk_alone_us<double>(dense.data(), slice.begin, slice.end, density, args.iterations);
      if (rank == 0) {
        fmt::print("  {:>10} {:>10} {:>15} {:>11.1f} {:>8} {:>11.1f} {:>9.2f} {:>10.1f} {:>9} {:>7}\n",
                   record.bytes, record.count, record.dense_algorithm, record.dense.median_us, density,
                   result.time.median_us, record.dense.median_us / result.time.median_us,
                   result.mstopk_us, result.nonzero, result.wrong ? 1 : 0);
        std::fflush(stdout);
      }
      record.sparse.push_back(result);
    }
    records.push_back(std::move(record));
    if (size > args.max_bytes / args.factor) break;  // the next size would overflow or pass max
  }
  if (rank == 0 && !args.json_path.empty()) {
    using nlohmann::json;
    json rows = json::array();
    for (const Record& r : records) {
      json sparse = json::array();
      for (const SparseResult& s : r.sparse)
        sparse.push_back({{"density", s.density},
                          {"time_us_median", s.time.median_us},
                          {"time_us_min", s.time.min_us},
                          {"time_us_max", s.time.max_us},
                          {"speedup_over_dense", r.dense.median_us / s.time.median_us},
                          {"mstopk_us", s.mstopk_us},
                          {"nonzero", s.nonzero},
                          {"selected_bound", s.selected_bound},
                          {"wrong", s.wrong}});
      rows.push_back({{"bytes", r.bytes},
                      {"count", r.count},
                      {"dense_algorithm", r.dense_algorithm},
                      {"dense_time_us_median", r.dense.median_us},
                      {"dense_time_us_min", r.dense.min_us},
                      {"dense_time_us_max", r.dense.max_us},
                      {"sum_bytes_per_s", r.sum_bytes_per_s},
                      {"machine_steps_us", r.machine_steps_us},
                      {"sparse", sparse}});
    }
    json machines = json::array();
    for (const auto& m : layout.machines) machines.push_back(m.size());
    const json document{{"tool", "flexplan_sparse_bench"},   {"plan", args.plan_path},
                        {"topology", comm->plan().topology_name}, {"world_size", world},
                        {"machines", machines},               {"dtype", std::string(to_string(args.type))},
                        {"iterations", args.iterations},      {"warmup", args.warmup},
                        {"blocking", comm->options().blocking}, {"error_feedback", args.error_feedback},
                        {"records", rows}};
    std::ofstream out(args.json_path);
    out << document.dump(2) << "\n";
    out.close();
    if (!out) {
      fmt::print(stderr, "flexplan_sparse_bench: cannot write --json file '{}'\n", args.json_path);
      return kExitBadInput;
    }
  }
  return wrong_total == 0 ? kExitSuccess : kExitWrongResults;
}

}  // namespace
}  // namespace flexplan::bench

int main(int argc, char** argv) {
  return flexplan::bench::tool_main(argc, argv, "flexplan_sparse_bench", MPI_THREAD_SINGLE,
                                    flexplan::bench::parse, flexplan::bench::run);
}
