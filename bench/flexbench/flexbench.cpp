// flexbench: times flexplan's all-reduce of a plan over a range of message sizes, with Open
// MPI's MPI_Allreduce measured in the same run as the baseline (docs/flexbench.md).
//   mpirun -np N flexbench plan.bin -b 8 -e 128M -f 2 [-a ALGORITHM] [--json out.json]
#include <mpi.h>

#include <cstdio>
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
  if (!args.algorithm.empty()) return args.algorithm;
  try {
    return ir::select_schedule(comm.plan(), ir::Collective::AllReduce, bytes).algorithm;
  } catch (const std::out_of_range&) {
    return "none";
  }
}

int run(const BenchArgs& args, int rank, int world) {
  if (args.device) {
#ifdef FLEXPLAN_BENCH_DEVICE
    return run_device(args, rank, world);
#else
    if (rank == 0) fmt::print(stderr, "flexbench: --device: built without the GPU backend (no CUDA/NCCL found)\n");
    return kExitBadInput;
#endif
  }
  // Creation errors, and -a naming no schedule of the plan, are the same on every rank: print
  // them once.
  std::optional<Communicator> comm;
  if (const int status = open_communicator(comm, args.plan_path, args.blocking, rank, "flexbench"))
    return status;
  try {
    if (!args.algorithm.empty()) comm->force_algorithm(args.algorithm);
  } catch (const RuntimeError& e) {
    if (rank == 0) fmt::print(stderr, "flexbench: -a {}: {}\n", args.algorithm, e.what());
    return kExitBadInput;
  }
  const size_t element = size_of(args.type);
  const size_t max_count = std::max<uint64_t>(1, args.max_bytes / element);
  std::vector<std::byte> send(max_count * element), recv(max_count * element);
  fill_pattern(send.data(), max_count, args.type, args.op, comm->rank());
  const auto type = mpi_type(args.type);

  // The mode the runtime runs in: --blocking or FLEXPLAN_BLOCKING=1.
  const bool blocking = comm->options().blocking;
  if (rank == 0) print_header(args, blocking, comm->plan().topology_name, world);
  std::vector<Row> rows;
  for (uint64_t size = args.min_bytes; size <= args.max_bytes; size *= args.factor) {
    Row row;
    row.count = std::max<uint64_t>(1, size / element);
    row.bytes = row.count * element;
    row.algorithm = algorithm_for(*comm, args, row.bytes);
    row.flexplan = time_iterations(args.warmup, args.iterations, [&] {
      comm->allreduce(send.data(), recv.data(), row.count, args.type, args.op);
    });
    if (args.check) {
      uint64_t wrong = count_wrong(recv.data(), row.count, args.type, args.op, world);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      row.wrong = wrong;
    }
    if (type && args.mpi) {
      row.mpi = time_iterations(args.warmup, args.iterations, [&] {
        MPI_Allreduce(send.data(), recv.data(), static_cast<int>(row.count), *type, mpi_op(args.op),
                      MPI_COMM_WORLD);
      });
    }
    if (rank == 0) print_row(args, row, world);
    rows.push_back(std::move(row));
    if (size > args.max_bytes / args.factor) break;  // the next size would overflow or pass max
  }
  if (rank == 0 && !args.json_path.empty()) {
    write_json(args.json_path, args, blocking, comm->plan().topology_name, world, rows);
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
