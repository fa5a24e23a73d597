// A rank dies (SIGKILL) or stalls (sleeps outside the runtime) in the middle of an
// all-reduce; every survivor that still needs it must fail with a RuntimeError within the
// timeout instead of hanging. A survivor that had received all it needed before the victim
// stopped may finish, and then its result must be right. Run by killed_peer.sh, which
// launches it under mpirun and checks the survivors' reports; survivors print one line each:
//   killed-peer-test: rank R caught RuntimeError after MS ms: MESSAGE
//   killed-peer-test: rank R completed with the right result
//   killed-peer-test: rank R completed with a WRONG result (...)
// and leave (_exit) two timeouts later, as MPI cannot be finalized with a dead peer.
//   flexplan_mpi_killed_peer kill|stall
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/communicator.hpp"
#include "tests/mpi/test_support.hpp"

int main(int argc, char** argv) {
  using namespace flexplan;
  MPI_Init(&argc, &argv);
  const bool stall = argc > 1 && std::string(argv[1]) == "stall";
  const int world = mpitest::world_size();
  const int rank = mpitest::world_rank();
  const int victim = world - 1;
  Communicator comm(mpitest::plan_for(mpitest::random_tree(world, 5), "flexreduce"), MPI_COMM_WORLD);
  std::vector<float> data(8 << 20, 1.0f);  // 32 MB: long enough to be cut in the middle
  comm.allreduce(data.data(), data.data(), 1000, DataType::Float32, ReduceOp::Sum);  // warm
  std::fill(data.begin(), data.end(), 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);

  const auto start = std::chrono::steady_clock::now();
  Request request = comm.iallreduce(data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum);
  if (rank == victim) {
    // Get some chunks moving, then stop, early: the fewer steps the victim took, the more
    // survivors still need it (its own contribution may already be on its way to them all).
    for (int i = 0; i < 3; ++i) request.test();
    if (stall) {
      // Alive but away for 2.5 timeouts: the survivors' timeouts must fire meanwhile.
      std::this_thread::sleep_for(5 * comm.options().timeout / 2);
      _exit(0);
    }
    std::raise(SIGKILL);
  }
  std::string outcome;
  try {
    request.wait();
    std::size_t wrong = 0;
    for (const float value : data) wrong += value != static_cast<float>(world);
    outcome = wrong == 0 ? "completed with the right result"
                         : fmt::format("completed with a WRONG result ({} of {} elements differ from {})",
                                       wrong, data.size(), world);
  } catch (const RuntimeError& e) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start).count();
    outcome = fmt::format("caught RuntimeError after {} ms: {}", ms, e.what());
  }
  fmt::print("killed-peer-test: rank {} {}\n", rank, outcome);
  std::fflush(stdout);
  // Stay two timeouts longer, so that the other survivors reach their own diagnosis (at most
  // one timeout after their last progress) before this process's exit looks to them like one
  // more dead peer.
  std::this_thread::sleep_for(2 * comm.options().timeout);
  _exit(0);
}
