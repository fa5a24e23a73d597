// What flexbench, flexplan_train_step and flexplan_sparse_bench share: their exit status and
// their main(): MPI up, arguments parsed on every rank (rank 0 prints help and errors), the
// tool run, and an operation's exception taking the whole job down.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>

#include <fmt/format.h>

namespace flexplan::bench {

// Exit status (docs/flexbench.md), as flexplan's where they overlap.
constexpr int kExitSuccess = 0;
constexpr int kExitWrongResults = 1;  // some result element differed from the expected one
constexpr int kExitBadInput = 2;      // arguments, plan, FLEXPLAN_* variables
constexpr int kExitRuntimeFailed = 3; // UCX could not start, or an operation failed

// `parse(argc, argv, print, exit_code)` returns optional arguments (nullopt: leave with
// exit_code); `run(args, rank, world)` returns the exit status. `thread_level` is MPI's.
template <typename Parse, typename Run>
int tool_main(int argc, char** argv, const char* name, int thread_level, Parse parse, Run run) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, thread_level, &provided);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int exit_code = 0;
  const auto args = parse(argc, argv, rank == 0, exit_code);
  if (args) {
    try {
      exit_code = run(*args, rank, world);
    } catch (const std::exception& e) {
      // An operation failed (its peers may be stuck in it): report and take the job down.
      fmt::print(stderr, "{}: rank {}: {}\n", name, rank, e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, kExitRuntimeFailed);
    }
  }
  MPI_Finalize();
  return exit_code;
}

}  // namespace flexplan::bench
