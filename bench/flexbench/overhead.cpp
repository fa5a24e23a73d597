// The runtime's own cost per all-reduce, apart from the schedule's messages:
//   mpirun -np 2 flexplan_overhead [ITERATIONS]
// 1. Issue cost: a plan without steps (each rank alone in its own one-rank communicator), so an
//    allreduce is all bookkeeping and no transfer.
// 2. A one-step plan in which each of the 2 ranks sends one message and receives one, against
//    the same exchange done with bare UCX tagged send/receive over the same kind of worker.
// The difference of the two in (2) is what the runtime adds to one exchange.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "runtime/bootstrap.hpp"
#include "runtime/communicator.hpp"
#include "runtime/ucx_transport.hpp"

namespace flexplan {
namespace {

using Clock = std::chrono::steady_clock;

double microseconds(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Every rank roots a reduce of the whole range over both: one message each way, one step.
ir::Plan one_exchange_plan(int world) {
  ir::Plan plan;
  plan.world_size = world;
  ir::Schedule schedule;
  schedule.algorithm = "one-exchange";
  schedule.units = 1;
  ir::Step step;
  std::vector<int32_t> everyone;
  for (int r = 0; r < world; ++r) everyone.push_back(r);
  for (int r = 0; r < world; ++r) step.ops.push_back({ir::OpKind::Reduce, 0, 1, r, everyone});
  schedule.steps.push_back(step);
  plan.schedules.push_back(schedule);
  return plan;
}

ir::Plan no_step_plan() {
  ir::Plan plan;
  plan.world_size = 1;
  ir::Schedule schedule;
  schedule.algorithm = "none";
  plan.schedules.push_back(schedule);
  return plan;
}

// Median of per-iteration times, each the slowest rank's.
template <typename F>
double median_us(MPI_Comm comm, int iterations, F body) {
  for (int i = 0; i < iterations / 10 + 1; ++i) body();
  std::vector<double> times(static_cast<size_t>(iterations));
  for (double& t : times) {
    MPI_Barrier(comm);
    const auto start = Clock::now();
    body();
    t = microseconds(Clock::now() - start);
  }
  MPI_Allreduce(MPI_IN_PLACE, times.data(), iterations, MPI_DOUBLE, MPI_MAX, comm);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void run(int iterations) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  float value = 1.0f, result = 0.0f;

  // 1. Issue cost, one rank per communicator.
  MPI_Comm alone;
  MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &alone);
  {
    Communicator comm(no_step_plan(), alone);
    const auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) comm.allreduce(&value, &result, 1, DataType::Float32, ReduceOp::Sum);
    if (rank == 0) {
      fmt::print("issue cost, no transfers:      {:8.3f} us per allreduce (mean of {})\n",
                 microseconds(Clock::now() - start) / iterations, iterations);
    }
  }
  MPI_Comm_free(&alone);
  if (world != 2) return;

  // 2. One exchange through the runtime...
  Communicator comm(one_exchange_plan(world), MPI_COMM_WORLD);
  const double runtime_us = median_us(MPI_COMM_WORLD, iterations, [&] {
    comm.allreduce(&value, &result, 1, DataType::Float32, ReduceOp::Sum);
  });
  // ...and with bare UCX: post the receive, send, progress until both complete.
  // The transports the communicator picks for a job on one host (this tool runs on one).
  UcxTransport transport(comm.options().blocking, world,
                         std::getenv("UCX_TLS") ? nullptr : "posix,sysv,self");
  const std::vector<int32_t> identity{0, 1};
  bootstrap::MpiGroup world_group(MPI_COMM_WORLD);
  transport.connect(bootstrap::exchange_by_plan_rank(world_group, transport.address(), identity),
                    rank, std::vector<bool>(2, false));
  float incoming = 0;
  uint64_t tag = 0;
  const double bare_us = median_us(MPI_COMM_WORLD, iterations, [&] {
    ++tag;
    void* recv = transport.ucx_recv(&incoming, sizeof incoming, tag);
    void* send = transport.ucx_send(1 - rank, &value, sizeof value, tag);
    while (ucp_request_check_status(recv) == UCS_INPROGRESS ||
           (send && ucp_request_check_status(send) == UCS_INPROGRESS)) {
      transport.progress();
    }
    ucp_request_free(recv);
    if (send) ucp_request_free(send);
  });
  MPI_Barrier(MPI_COMM_WORLD);
  transport.flush(std::chrono::milliseconds(1000));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    fmt::print("one exchange through flexplan: {:8.3f} us (median of {})\n", runtime_us, iterations);
    fmt::print("one exchange with bare UCX:    {:8.3f} us\n", bare_us);
    fmt::print("runtime overhead:              {:8.3f} us per exchange step\n", runtime_us - bare_us);
  }
}

}  // namespace
}  // namespace flexplan

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  flexplan::run(argc > 1 ? std::atoi(argv[1]) : 20000);
  MPI_Finalize();
  return 0;
}
