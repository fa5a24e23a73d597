// flexplan-probe: the probe under mpirun, one process per learner (docs/probe.md); the
// measurement itself is run_probe's.
#include <mpi.h>

#include "probe/run_probe.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  {
    flexplan::bootstrap::MpiGroup group(MPI_COMM_WORLD);
    code = flexplan::probe::run_probe(group, argc, argv, "mpirun -np P flexplan-probe");
  }
  MPI_Finalize();
  return code;
}
