// flexbench --device (device_bench.hpp): times each size as nccl-tests does, the iterations
// enqueued back to back on one stream between two events, the slowest rank's time reported;
// through NCCL, or with --staged through the UCX path staged in pinned memory.
#include "bench/flexbench/device_bench.hpp"

#include <mpi.h>

#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "bench/flexbench/bench_report.hpp"
#include "bench/flexbench/check_pattern.hpp"
#include "runtime/gpu/device_communicator.hpp"
#include "runtime/gpu/staged_communicator.hpp"

namespace flexplan::bench {
namespace {

struct Column {
  double time_us = 0;
  uint64_t wrong = 0;
};

// Times `iterations` calls on the stream (after `warmup` untimed ones); the slowest rank's
// average per call.
template <typename F>
double time_on_stream(const BenchArgs& args, cudaStream_t stream, F body) {
  for (int i = 0; i < args.warmup; ++i) body();
  cudaStreamSynchronize(stream);
  MPI_Barrier(MPI_COMM_WORLD);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  for (int i = 0; i < args.iterations; ++i) body();
  cudaEventRecord(stop, stream);
  gpu::check_cuda(cudaEventSynchronize(stop), "timed iterations");
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  double us = 1e3 * ms / args.iterations;
  MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return us;
}

// The two device paths behind one call, as the benchmark needs them.
struct DevicePath {
  std::unique_ptr<gpu::DeviceCommunicator> nccl;
  std::unique_ptr<gpu::StagedCommunicator> staged;
  const ir::Plan& plan() const { return nccl ? nccl->plan() : staged->host().plan(); }
  int rank() const { return nccl ? nccl->rank() : staged->host().rank(); }
  // One call of the benchmark's collective: `shape.count` elements (each rank's block of
  // `shape.per_rank` for reduce-scatter and all-gather), enqueued on `stream`.
  void call(const BenchArgs& args, const void* send, void* recv, CallShape shape, cudaStream_t stream) {
    const DataType type = args.type;
    const ReduceOp op = args.op;
    const int root = args.root;
    if (staged) {
      switch (args.collective) {
        case ir::Collective::AllReduce: staged->allreduce(send, recv, shape.count, type, op, stream); break;
        case ir::Collective::ReduceScatter: staged->reduce_scatter(send, recv, shape.per_rank, type, op, stream); break;
        case ir::Collective::AllGather: staged->allgather(send, recv, shape.per_rank, type, stream); break;
        case ir::Collective::Broadcast: staged->broadcast(send, recv, shape.count, type, root, stream); break;
        case ir::Collective::Reduce: staged->reduce(send, recv, shape.count, type, op, root, stream); break;
      }
      return;
    }
    switch (args.collective) {
      case ir::Collective::AllReduce: nccl->allreduce(send, recv, shape.count, type, op, stream); break;
      case ir::Collective::ReduceScatter: nccl->ireduce_scatter(send, recv, shape.per_rank, type, op, stream); break;
      case ir::Collective::AllGather: nccl->iallgather(send, recv, shape.per_rank, type, stream); break;
      case ir::Collective::Broadcast: nccl->ibroadcast(send, recv, shape.count, type, root, stream); break;
      case ir::Collective::Reduce: nccl->ireduce(send, recv, shape.count, type, op, root, stream); break;
    }
  }
  // Waits for the stream's work and throws a failure of the staged path's host part.
  void finish(cudaStream_t stream) {
    gpu::check_cuda(cudaStreamSynchronize(stream), "device collective");
    if (staged) staged->synchronize();
  }
};

}  // namespace

int run_device(const BenchArgs& args, int rank, int world) {
  DevicePath comm;
  try {
    if (args.staged) {
      // The NCCL path's device rule (FLEXPLAN_DEVICE, else the local rank modulo the devices).
      int devices = 0;
      gpu::check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
      gpu::check_cuda(cudaSetDevice(gpu::default_device(MPI_COMM_WORLD, devices, gpu::DeviceOptions::from_env().device)),
                      "cudaSetDevice");
      Options options = Options::from_env();
      if (args.blocking) options.blocking = true;
      comm.staged = std::make_unique<gpu::StagedCommunicator>(args.plan_path, MPI_COMM_WORLD, options);
      if (!args.algorithm.empty()) comm.staged->host().force_algorithm(args.algorithm);
    } else {
      comm.nccl = std::make_unique<gpu::DeviceCommunicator>(args.plan_path, MPI_COMM_WORLD);
      if (!args.algorithm.empty()) comm.nccl->force_algorithm(args.algorithm);
    }
  } catch (const RuntimeError& e) {
    if (rank == 0) fmt::print(stderr, "flexbench: {}\n", e.what());
    return dynamic_cast<const InputError*>(&e) != nullptr || !args.algorithm.empty() ? 2 : 3;
  }
  // NCCL's path runs the plan's schedules only; the staged path also derives a broadcast or
  // reduce from a root the plan lacks (docs/runtime.md).
  const bool derivable = comm.staged && ir::has_root(args.collective) &&
                         ir::plans_collective_any_root(comm.plan(), args.collective);
  if (!ir::plans_collective(comm.plan(), args.collective, args.root) && !derivable) {
    if (rank == 0) {
      fmt::print(stderr, "flexbench: the plan has no {} schedule{}; plan it with `flexplan TOPOLOGY --collectives {}`\n",
                 ir::to_string(args.collective),
                 ir::has_root(args.collective) ? fmt::format(" from root {}", args.root) : "",
                 ir::to_string(args.collective));
    }
    return 2;
  }
  const size_t element = size_of(args.type);
  const size_t max_count = std::max<uint64_t>(1, args.max_bytes / element);
  std::vector<std::byte> pattern(max_count * element), result(max_count * element);
  fill_pattern(pattern.data(), max_count, args.type, args.op, comm.rank());
  void *send = nullptr, *recv = nullptr;
  gpu::check_cuda(cudaMalloc(&send, max_count * element), "cudaMalloc");
  gpu::check_cuda(cudaMalloc(&recv, max_count * element), "cudaMalloc");
  cudaStream_t stream;
  gpu::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");

  if (rank == 0) {
    if (comm.nccl) {
      fmt::print("# flexbench --device: {} of plan {} (topology {}), {} ranks, device {} on rank 0, NCCL {}\n",
                 ir::to_string(args.collective), args.plan_path, comm.plan().topology_name, world, comm.nccl->device(),
                 gpu::nccl_version_text(comm.nccl->nccl_version()));
      fmt::print("# {} NCCL communicators from {} split calls, init {:.3f} s on rank 0\n",
                 comm.nccl->plan_communicators(), comm.nccl->split_calls(), comm.nccl->init_seconds());
    } else {
      int device = 0;
      cudaGetDevice(&device);
      fmt::print("# flexbench --device --staged: {} of plan {} (topology {}), {} ranks, device {} on rank 0, UCX "
                 "staged through pinned host memory, local reductions {}\n",
                 ir::to_string(args.collective), args.plan_path, comm.plan().topology_name, world, device,
                 comm.staged->device_arithmetic() ? "in the fold server, a CUDA kernel (FLEXPLAN_STAGED_ARITHMETIC=device)"
                                                  : "on the host");
    }
    fmt::print("#\n# {:>10} {:>12} {:>8} {:>6} {:>14}   {:>9} {:>7} {:>7} {:>6}   {:>9} {:>7} {:>7} {:>6}\n", "", "",
               "", "", "", "out-of-place", "", "", "", "in-place", "", "", "");
    fmt::print("# {:>10} {:>12} {:>8} {:>6} {:>14}   {:>9} {:>7} {:>7} {:>6}   {:>9} {:>7} {:>7} {:>6}\n", "size",
               "count", "type", "redop", "algorithm", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
               "#wrong");
    fmt::print("# {:>10} {:>12} {:>8} {:>6} {:>14}   {:>9} {:>7} {:>7} {:>6}   {:>9} {:>7} {:>7} {:>6}\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  uint64_t wrong_total = 0;
  for (uint64_t size = args.min_bytes; size <= args.max_bytes; size *= args.factor) {
    const CallShape shape = call_shape(args.collective, size, element, world);
    if (shape.count > max_count) break;  // (an all-gather's one element per rank beyond -e)
    const uint64_t bytes = shape.count * element;
    std::string algorithm = args.algorithm;
    if (algorithm.empty()) {
      try {
        algorithm = ir::select_schedule(comm.plan(), args.collective, bytes, args.root).algorithm;
      } catch (const std::out_of_range&) {
        algorithm = "none";
      }
    }
    Column columns[2];
    for (int in_place = 0; in_place < 2; ++in_place) {
      // In place as NCCL defines it: a reduce-scatter's result is block rank() of its input, an
      // all-gather's input block rank() of its result, the others share one buffer.
      const size_t own_block = shape.per_rank * static_cast<size_t>(comm.rank()) * element;
      void* source = send;
      void* target = recv;
      const size_t input_bytes = args.collective == ir::Collective::AllGather ? shape.per_rank * element : bytes;
      if (in_place) {
        std::byte* own = static_cast<std::byte*>(recv) + own_block;
        source = args.collective == ir::Collective::AllGather ? static_cast<void*>(own) : recv;
        target = args.collective == ir::Collective::ReduceScatter ? static_cast<void*>(own) : recv;
      }
      const void* result_at = args.collective == ir::Collective::ReduceScatter ? target : recv;
      // Copies into the buffers go on the benchmark's stream: a cudaMemcpy from pageable memory
      // may return before its DMA lands, and the non-blocking stream would not wait for it (the
      // in-place check then read the timed runs' data on an H200; the emulation copies at once).
      gpu::check_cuda(cudaMemcpyAsync(source, pattern.data(), input_bytes, cudaMemcpyHostToDevice, stream),
                      "cudaMemcpyAsync");
      columns[in_place].time_us = time_on_stream(args, stream, [&] { comm.call(args, source, target, shape, stream); });
      comm.finish(stream);
      if (args.check) {
        // A fresh input, one operation, checked (timed runs in place compound the data).
        gpu::check_cuda(cudaMemcpyAsync(source, pattern.data(), input_bytes, cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync");
        comm.call(args, source, target, shape, stream);
        const size_t result_bytes = args.collective == ir::Collective::ReduceScatter ? shape.per_rank * element : bytes;
        cudaMemcpyAsync(result.data(), result_at, result_bytes, cudaMemcpyDeviceToHost, stream);
        comm.finish(stream);
        uint64_t wrong =
            count_wrong_result(args.collective, args.root, result.data(), shape, args.type, args.op, comm.rank(), world);
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        columns[in_place].wrong = wrong;
        wrong_total += wrong;
      }
    }
    if (rank == 0) {
      fmt::print("  {:>10} {:>12} {:>8} {:>6} {:>14}", bytes, shape.count, to_string(args.type), to_string(args.op),
                 algorithm);
      for (const Column& c : columns)
        fmt::print("   {:>9.1f} {:>7.2f} {:>7.2f} {:>6}", c.time_us, algbw_gbps(bytes, c.time_us),
                   busbw_gbps(bytes, c.time_us, world, args.collective), args.check ? std::to_string(c.wrong) : "N/A");
      fmt::print("\n");
    }
    if (size > args.max_bytes / args.factor) break;
  }
  if (rank == 0 && comm.staged && comm.staged->device_arithmetic()) {
    const auto c = comm.staged->device_arithmetic()->counters();
    fmt::print("# rank 0's local reductions: {} folds by the fold server, {} on the host (scratch outside pinned memory), "
               "{} MiB of pinned scratch\n",
               c.device_folds, c.host_folds, c.arena_bytes >> 20);
  }
  cudaStreamDestroy(stream);
  cudaFree(send);
  cudaFree(recv);
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace flexplan::bench
