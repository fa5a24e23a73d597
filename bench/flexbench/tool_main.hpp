// What flexbench, flexplan_train_step and flexplan_sparse_bench share: their exit status, their
// main() (MPI up, arguments parsed on every rank with rank 0 printing help and errors, the tool
// run, an operation's exception taking the whole job down) and how they open the communicator.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "runtime/communicator.hpp"

namespace flexplan::bench {

// Exit status (docs/flexbench.md), as flexplan's where they overlap.
constexpr int kExitSuccess = 0;
constexpr int kExitWrongResults = 1;  // some result element differed from the expected one
constexpr int kExitBadInput = 2;      // arguments, plan, FLEXPLAN_* variables
constexpr int kExitRuntimeFailed = 3; // UCX could not start, or an operation failed

// Creates `comm` over MPI_COMM_WORLD for `plan_path` (FLEXPLAN_* settings, blocking progress
// if asked) and returns kExitSuccess; or, after rank 0 printed why (creation errors are the same
// on every rank), kExitBadInput for bad input (plan, settings) and kExitRuntimeFailed otherwise.
// (The communicator is neither copied nor moved: the caller owns the slot.)
inline int open_communicator(std::optional<Communicator>& comm, const std::string& plan_path,
                             bool blocking, int rank, const char* name) {
  try {
    // A malformed FLEXPLAN_* value does not throw here, on its rank alone: creation reports it
    // on every rank (Options::errors).
    Options options = Options::from_env();
    if (blocking) options.blocking = true;
    comm.emplace(plan_path, MPI_COMM_WORLD, options);
    return kExitSuccess;
  } catch (const RuntimeError& e) {
    if (rank == 0) fmt::print(stderr, "{}: {}\n", name, e.what());
    return dynamic_cast<const InputError*>(&e) != nullptr ? kExitBadInput : kExitRuntimeFailed;
  }
}

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
