// A program built against an installed flexplan: plans a topology in process, prints the
// plan's predicted all-reduce time, then all-reduces a vector over that plan under mpirun and
// checks the sum on every rank.
//
//   mpirun -np 2 ./plan_and_allreduce two-learners.json
#include <mpi.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "planner/plan_builder.hpp"
#include "planner/size_format.hpp"
#include "runtime/communicator.hpp"
#include "topology/topology.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  if (argc != 2) {
    if (world_rank == 0) std::fprintf(stderr, "usage: mpirun -np N %s TOPOLOGY.json\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  int status = 0;
  try {
    // Every rank plans the same topology the same way, so every rank holds the same plan (the
    // communicator checks that). With the plan command's cost model (the topology's hop overhead,
    // else the runtime's measured one; the star ops' incast loss; the topology's reduction rate),
    // so that the prediction below is `flexplan predict`'s.
    const flexplan::Topology topology = flexplan::load_topology(argv[1]);
    flexplan::PlanOptions options;
    options.cost.hop_overhead = topology.hop_overhead().value_or(flexplan::kMeasuredHopOverhead);
    options.cost.incast_loss = flexplan::kMeasuredIncastLoss;
    options.cost.reduce_bandwidth = topology.reduce_bandwidth();
    flexplan::PlanReport report = flexplan::build_plan_report(topology, options);

    constexpr size_t count = size_t{1} << 18;  // 1 MiB of float32
    const auto& chosen = report.chosen(count * sizeof(float));
    if (world_rank == 0)
      std::printf("%s: %d learners; 1 MiB all-reduce by %s, predicted %s\n", topology.name().c_str(),
                  topology.num_learners(), chosen.algorithm.c_str(),
                  flexplan::format_seconds(chosen.cost.at(count * sizeof(float))).c_str());

    flexplan::Communicator comm(std::move(report.plan), MPI_COMM_WORLD);
    std::vector<float> data(count, static_cast<float>(comm.rank() + 1));
    comm.allreduce(data.data(), data.data(), count, flexplan::DataType::Float32,
                   flexplan::ReduceOp::Sum);
    const float expected = comm.size() * (comm.size() + 1) / 2.0f;  // 1 + 2 + ... + size
    size_t wrong = 0;
    for (const float x : data) wrong += x != expected;
    std::printf("rank %d of %d: %s (%zu of %zu elements wrong)\n", comm.rank(), comm.size(),
                wrong == 0 ? "sum correct" : "SUM WRONG", wrong, count);
    status = wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plan_and_allreduce: error: %s\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
