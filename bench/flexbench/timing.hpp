// How the flexbench tools time an operation across ranks: every timed iteration starts after a
// barrier, and its time is the slowest rank's.
#pragma once

#include <mpi.h>

#include <chrono>
#include <type_traits>
#include <vector>

#include "bench/flexbench/bench_report.hpp"

namespace flexplan::bench {

struct NothingToPrepare {
  void operator()() const {}
};

// Runs `prepare` then `body`, warmup + iterations times; only `body` is timed. With `calls`
// above 1 each timed iteration runs `body` that many times back to back and counts the mean:
// the ranks leave the barrier at different times (on the emulated cluster, hundreds of us apart
// when they sleep), which an 8-byte call's time would otherwise mostly measure. Where there is
// something to prepare, a barrier first keeps every rank's `prepare` out of the other ranks'
// timed bodies: where learners share a host's cores (the emulated cluster: ten on two), an
// early rank's copy of its input ran while a late rank was still in its timed call.
template <typename Body, typename Prepare = NothingToPrepare>
TimeStats time_iterations(int warmup, int iterations, Body body, Prepare prepare = {}, int calls = 1) {
  constexpr bool prepares = !std::is_same_v<Prepare, NothingToPrepare>;
  for (int i = 0; i < warmup; ++i) prepare(), body();
  std::vector<double> times(static_cast<size_t>(iterations));
  for (double& t : times) {
    if constexpr (prepares) {
      MPI_Barrier(MPI_COMM_WORLD);
      prepare();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) body();
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
  }
  MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  return summarize(std::move(times));
}

}  // namespace flexplan::bench
