// codegen_latency PLAN LIBRARY [-b 8 -e 64M -f 4 -n 40]: all-reduce time of the runtime lowering
// the plan itself against the runtime running the generated programs of LIBRARY (built from
// `flexplan codegen PLAN --target cpp`), side by side in one job: per size the two communicators
// take turns, iteration by iteration and first in turn, so that load on the machine hits both alike. Prints, per
// size, the median over iterations of the slowest rank's time for each, and their ratio; and the
// time each communicator took to be created. docs/codegen.md has results.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "planner/size_format.hpp"
#include "runtime/communicator.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double slowest(double local) {
  double max = 0;
  MPI_Allreduce(&local, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(int argc, char** argv) {
  CLI::App app{"All-reduce time with generated programs against the runtime's own lowering"};
  std::string plan_path, library, min_size = "8", max_size = "64M";
  int factor = 4, iterations = 40;
  app.add_option("PLAN", plan_path, "plan.bin")->required();
  app.add_option("LIBRARY", library, "library built from `flexplan codegen PLAN --target cpp`")->required();
  app.add_option("-b", min_size, "smallest message")->capture_default_str();
  app.add_option("-e", max_size, "largest message")->capture_default_str();
  app.add_option("-f", factor, "size factor")->check(CLI::Range(2, 1024))->capture_default_str();
  app.add_option("-n", iterations, "timed iterations per size and path")->check(CLI::Range(1, 100000))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const uint64_t min_bytes = flexplan::parse_size(min_size), max_bytes = flexplan::parse_size(max_size);

  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  flexplan::Options options = flexplan::Options::from_env();
  options.program_library.clear();
  MPI_Barrier(MPI_COMM_WORLD);
  auto start = std::chrono::steady_clock::now();
  flexplan::Communicator lowered(plan_path, MPI_COMM_WORLD, options);
  const double lowered_creation = slowest(seconds_since(start));
  options.program_library = library;
  MPI_Barrier(MPI_COMM_WORLD);
  start = std::chrono::steady_clock::now();
  flexplan::Communicator generated(plan_path, MPI_COMM_WORLD, options);
  const double generated_creation = slowest(seconds_since(start));
  if (rank == 0) {
    fmt::print("# {} ranks, plan {}, library {}\n", lowered.size(), plan_path, library);
    fmt::print("# creation: lowered {:.2f} ms, generated {:.2f} ms (slowest rank)\n", lowered_creation * 1e3,
               generated_creation * 1e3);
    fmt::print("# float32 sum; median over {} iterations of the slowest rank's time\n", iterations);
    fmt::print("{:>12} {:>12} {:>14} {:>16} {:>8}\n", "bytes", "count", "lowered (us)", "generated (us)", "gen/low");
  }
  for (uint64_t bytes = std::max<uint64_t>(min_bytes, 4); bytes <= max_bytes; bytes *= static_cast<uint64_t>(factor)) {
    const size_t count = bytes / 4;
    std::vector<float> buffer(count, 1.0f);
    std::vector<double> times[2];
    flexplan::Communicator* comms[2] = {&lowered, &generated};
    for (int i = -3; i < iterations; ++i) {  // three untimed rounds first
      for (int turn = 0; turn < 2; ++turn) {
        const int which = (turn + i) & 1;  // who goes first alternates, so neither always follows
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        comms[which]->allreduce(buffer.data(), buffer.data(), count, flexplan::DataType::Float32,
                                flexplan::ReduceOp::Sum);
        const double t = slowest(seconds_since(t0));
        if (i >= 0) times[which].push_back(t);
      }
    }
    const double low = median(times[0]), gen = median(times[1]);
    if (rank == 0)
      fmt::print("{:>12} {:>12} {:>14.1f} {:>16.1f} {:>8.3f}\n", count * 4, count, low * 1e6, gen * 1e6, gen / low);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    status = run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "codegen_latency: {}\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
