// How the flexbench tools time an operation across ranks: every timed iteration starts after a
// barrier, and its time is the slowest rank's.
#pragma once

#include <mpi.h>

#include <chrono>
#include <vector>

#include "bench/flexbench/bench_report.hpp"

namespace flexplan::bench {

// Runs `prepare` then `body`, warmup + iterations times; only `body` is timed.
template <typename Prepare, typename Body>
TimeStats time_iterations(int warmup, int iterations, Prepare prepare, Body body) {
  for (int i = 0; i < warmup; ++i) prepare(), body();
  std::vector<double> times(static_cast<size_t>(iterations));
  for (double& t : times) {
    prepare();
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    body();
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
  MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  return summarize(std::move(times));
}

}  // namespace flexplan::bench
