// flexbench: times a collective of a plan (all-reduce by default; reduce-scatter, all-gather,
// broadcast, reduce) over a range of message sizes, with Open MPI's same collective measured in
// the same run as the baseline (docs/flexbench.md).
//   mpirun -np N flexbench plan.bin [--collective C] -b 8 -e 128M -f 2 [-a ALGORITHM] [--json out.json]
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "bench/flexbench/bench_args.hpp"
#include "bench/flexbench/bench_report.hpp"
#include "bench/flexbench/check_pattern.hpp"
#include "bench/flexbench/timing.hpp"
#include "bench/flexbench/tool_main.hpp"
#include "runtime/communicator.hpp"
#ifdef FLEXPLAN_BENCH_DEVICE
#include "bench/flexbench/device_bench.hpp"
#endif

namespace flexplan::bench {

namespace {

std::optional<MPI_Datatype> mpi_type(DataType type) {
  switch (type) {
    case DataType::Float32: return MPI_FLOAT;
    case DataType::Float64: return MPI_DOUBLE;
    case DataType::Int32: return MPI_INT32_T;
    case DataType::Int64: return MPI_INT64_T;
    case DataType::UInt8: return MPI_UINT8_T;
    case DataType::Float16:
    case DataType::BFloat16: return std::nullopt;  // no standard MPI type
  }
  return std::nullopt;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Prod: return MPI_PROD;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
  }
  return MPI_SUM;
}

std::string algorithm_for(const Communicator& comm, const BenchArgs& args, uint64_t bytes) {
  if (!args.algorithm.empty() && args.collective == ir::Collective::AllReduce) return args.algorithm;
  try {
    return ir::select_schedule(comm.plan(), args.collective, bytes, args.root).algorithm;
  } catch (const std::out_of_range&) {
    return "none";
  }
}

// Blocking progress where this host's ranks outnumber its cores (a busy-polling rank then takes
// the core its peer needs: the README's 5 ranks on 2 cores ran 17-160x slower than MPI), unless
// --polling or FLEXPLAN_BLOCKING says otherwise. Alike on every rank. Collective.
ProgressMode choose_progress_mode(const BenchArgs& args) {
  ProgressMode mode;
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int ranks_here = 1;
  MPI_Comm_size(host, &ranks_here);
  MPI_Comm_free(&host);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  int crowded = ranks_here > cores ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &crowded, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (crowded && !args.blocking && !args.polling && std::getenv("FLEXPLAN_BLOCKING") == nullptr) {
    mode.blocking = true;
    mode.why = fmt::format("{} ranks share {} core{} on this host; --polling to busy-poll", ranks_here, cores,
                           cores == 1 ? "" : "s");
  }
  return mode;
}

// One size of the collective: the call, MPI's, and the check of this rank's result.
struct SizeRun {
  const BenchArgs& args;
  Communicator& comm;
  std::byte* send;
  std::byte* recv;
  uint64_t per_rank = 0;  // all-gather and reduce-scatter: each rank's block
  uint64_t count = 0;     // the whole buffer's elements

  void flexplan() const {
    switch (args.collective) {
      case ir::Collective::AllReduce: comm.allreduce(send, recv, count, args.type, args.op); break;
      case ir::Collective::ReduceScatter: comm.reduce_scatter(send, recv, per_rank, args.type, args.op); break;
      case ir::Collective::AllGather: comm.allgather(send, recv, per_rank, args.type); break;
      // In place, as MPI_Bcast (one buffer; the root's holds its input: see run()).
      case ir::Collective::Broadcast: comm.broadcast(nullptr, recv, count, args.type, args.root); break;
      case ir::Collective::Reduce: comm.reduce(send, recv, count, args.type, args.op, args.root); break;
    }
  }
  void mpi(MPI_Datatype type) const {
    const MPI_Op op = mpi_op(args.op);
    switch (args.collective) {
      case ir::Collective::AllReduce:
        MPI_Allreduce(send, recv, static_cast<int>(count), type, op, MPI_COMM_WORLD);
        break;
      case ir::Collective::ReduceScatter:
        MPI_Reduce_scatter_block(send, recv, static_cast<int>(per_rank), type, op, MPI_COMM_WORLD);
        break;
      case ir::Collective::AllGather:
        MPI_Allgather(send, static_cast<int>(per_rank), type, recv, static_cast<int>(per_rank), type, MPI_COMM_WORLD);
        break;
      case ir::Collective::Broadcast:
        MPI_Bcast(recv, static_cast<int>(count), type, args.root, MPI_COMM_WORLD);
        break;
      case ir::Collective::Reduce:
        MPI_Reduce(send, recv, static_cast<int>(count), type, op, args.root, MPI_COMM_WORLD);
        break;
    }
  }
  uint64_t wrong(int rank, int world) const {
    return count_wrong_result(args.collective, args.root, recv, {per_rank, count}, args.type, args.op, rank, world);
  }
};

int run(const BenchArgs& args, int rank, int world) {
  if (ir::has_root(args.collective) && args.root >= world) {
    if (rank == 0) fmt::print(stderr, "flexbench: -r {}: not a rank of the {} ranks\n", args.root, world);
    return kExitBadInput;
  }
  if (args.device) {
#ifdef FLEXPLAN_BENCH_DEVICE
    return run_device(args, rank, world);
#else
    if (rank == 0) fmt::print(stderr, "flexbench: --device: built without the GPU backend (no CUDA/NCCL found)\n");
    return kExitBadInput;
#endif
  }
  const ProgressMode mode = choose_progress_mode(args);
  // Creation errors, and -a naming no schedule of the plan, are the same on every rank: print
  // them once.
  std::optional<Communicator> comm;
  if (const int status = open_communicator(comm, args.plan_path, args.blocking || mode.blocking, rank, "flexbench"))
    return status;
  // A broadcast or reduce from a root the plan lacks runs a derived chain where the plan holds
  // the collective for another root (docs/runtime.md).
  const bool derivable = ir::has_root(args.collective) && ir::plans_collective_any_root(comm->plan(), args.collective);
  if (!ir::plans_collective(comm->plan(), args.collective, args.root) && !derivable) {
    if (rank == 0) {
      fmt::print(stderr, "flexbench: the plan has no {} schedule{}; plan it with `flexplan TOPOLOGY --collectives {}`\n",
                 ir::to_string(args.collective),
                 ir::has_root(args.collective) ? fmt::format(" from root {}", args.root) : "",
                 ir::to_string(args.collective));
    }
    return kExitBadInput;
  }
  try {
    if (!args.algorithm.empty()) {
      if (args.collective != ir::Collective::AllReduce) throw InputError("-a forces an allreduce algorithm only");
      comm->force_algorithm(args.algorithm);
    }
  } catch (const RuntimeError& e) {
    if (rank == 0) fmt::print(stderr, "flexbench: -a {}: {}\n", args.algorithm, e.what());
    return kExitBadInput;
  }
  const size_t element = size_of(args.type);
  const size_t max_count = std::max<uint64_t>(1, args.max_bytes / element);
  std::vector<std::byte> send(max_count * element), recv(max_count * element);
  fill_pattern(send.data(), max_count, args.type, args.op, comm->rank());
  // A broadcast runs in place, as MPI_Bcast does: the root's buffer holds its input throughout
  // (a broadcast never writes the root's), the others' get it.
  if (args.collective == ir::Collective::Broadcast && comm->rank() == args.root) recv = send;
  const auto type = mpi_type(args.type);

  // The mode the runtime runs in: --blocking, FLEXPLAN_BLOCKING=1, or ranks outnumbering cores.
  ProgressMode ran = mode;
  ran.blocking = comm->options().blocking;
  if (!ran.blocking) ran.why.clear();
  if (rank == 0) print_header(args, ran, comm->plan().topology_name, world);
  std::vector<Row> rows;
  for (uint64_t size = args.min_bytes; size <= args.max_bytes; size *= args.factor) {
    Row row;
    SizeRun one{args, *comm, send.data(), recv.data()};
    // As nccl-tests: the size is the whole buffer's, each rank's block its world-th part.
    const CallShape shape = call_shape(args.collective, size, element, world);
    one.per_rank = shape.per_rank;
    one.count = shape.count;
    if (one.count > max_count) break;  // (an all-gather's one element per rank beyond -e)
    row.count = one.count;
    row.bytes = row.count * element;
    row.algorithm = algorithm_for(*comm, args, row.bytes);
    row.flexplan = time_iterations(args.warmup, args.iterations, [&] { one.flexplan(); }, NothingToPrepare{},
                                   args.agg_iters);
    if (args.check) {
      uint64_t wrong = one.wrong(comm->rank(), world);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      row.wrong = wrong;
    }
    if (type && args.mpi)
      row.mpi = time_iterations(args.warmup, args.iterations, [&] { one.mpi(*type); }, NothingToPrepare{}, args.agg_iters);
    if (rank == 0) print_row(args, row, world);
    rows.push_back(std::move(row));
    if (size > args.max_bytes / args.factor) break;  // the next size would overflow or pass max
  }
  if (rank == 0 && !args.json_path.empty()) {
    write_json(args.json_path, args, ran.blocking, comm->plan().topology_name, world, rows);
  }
  uint64_t wrong = 0;
  for (const Row& row : rows) wrong += row.wrong;
  return wrong == 0 ? kExitSuccess : kExitWrongResults;
}

}  // namespace
}  // namespace flexplan::bench

int main(int argc, char** argv) {
#ifdef FLEXPLAN_BENCH_EMULATED
  const int thread_level = MPI_THREAD_MULTIPLE;  // the NCCL emulation's stream threads call MPI
#else
  const int thread_level = MPI_THREAD_SINGLE;
#endif
  return flexplan::bench::tool_main(argc, argv, "flexbench", thread_level, flexplan::bench::parse_args,
                                    flexplan::bench::run);
}
