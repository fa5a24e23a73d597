// flexplan_replan_run: all-reduces of one size back to back under mpirun, for watching a job
// follow the network (docs/runtime.md): per call, the slowest rank's time, the wrong elements
// over all ranks and the plan generation it ran on. After call MARK_AFTER it creates MARK_FILE,
// so that a script can change a link then (bench/cluster/replan.sh).
//   mpirun -np N flexplan_replan_run PLAN BYTES CALLS [MARK_AFTER MARK_FILE]
// Settings from the environment (FLEXPLAN_REPLAN, FLEXPLAN_TOPOLOGY, ...). Prints
// "call seconds wrong generation" lines on rank 0, then the stats report.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/communicator.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (argc != 4 && argc != 6) {
    if (rank == 0) std::fprintf(stderr, "usage: flexplan_replan_run PLAN BYTES CALLS [MARK_AFTER MARK_FILE]\n");
    MPI_Finalize();
    return 2;
  }
  const size_t count = std::strtoull(argv[2], nullptr, 10) / sizeof(int32_t);
  const int calls = std::atoi(argv[3]);
  const int mark_after = argc == 6 ? std::atoi(argv[4]) : -1;
  int status = 0;
  try {
    flexplan::Communicator comm(argv[1], MPI_COMM_WORLD);
    std::vector<int32_t> data(count);
    uint64_t all_wrong = 0;
    for (int call = 0; call < calls; ++call) {
      // Small integers, so that every sum is exact whatever the order.
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>((rank * 31 + i * 7 + call) % 101);
      MPI_Barrier(MPI_COMM_WORLD);
      const double began = MPI_Wtime();
      comm.allreduce(data.data(), data.data(), count, flexplan::DataType::Int32, flexplan::ReduceOp::Sum);
      double seconds = MPI_Wtime() - began;
      uint64_t wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 0;
        for (int r = 0; r < world; ++r) want += (r * 31 + static_cast<int64_t>(i) * 7 + call) % 101;
        wrong += data[i] != want;
      }
      double slowest = 0;
      uint64_t wrong_everywhere = 0;
      MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      MPI_Reduce(&wrong, &wrong_everywhere, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
      all_wrong += wrong_everywhere;
      if (rank == 0) {
        std::printf("%d %.6f %llu %u\n", call, slowest, static_cast<unsigned long long>(wrong_everywhere),
                    comm.stats().plan_generation);
        std::fflush(stdout);
        if (call == mark_after) {
          if (FILE* mark = std::fopen(argv[5], "w")) std::fclose(mark);
        }
      }
    }
    if (rank == 0) {
      std::printf("# wrong elements in all: %llu\n%s", static_cast<unsigned long long>(all_wrong),
                  flexplan::format_stats(comm.stats()).c_str());
    }
    status = all_wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flexplan_replan_run: rank %d: %s\n", rank, e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
