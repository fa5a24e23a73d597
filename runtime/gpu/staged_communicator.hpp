// flexplan::gpu::StagedCommunicator: the UCX host runtime (flexplan::Communicator) on device
// buffers, staged through pinned host memory, with stream semantics: each call enqueues on the
// caller's stream a copy to pinned memory, the host all-reduce, and the copy back, and returns.
// For clusters without a fast GPU interconnect, and for several processes sharing one GPU (which
// NCCL refuses). The installed UCX (1.13, Debian) has no CUDA transports, hence the staging.
//
// The all-reduce runs on a worker thread of this object, in issue order. What holds the stream
// meanwhile depends on where the local reductions run (StagedArithmetic): with the host's, a
// host function that hands the operation over and waits (the worker makes no CUDA call); with
// the device's, the operation's fold server, a kernel the worker posts its folds to through
// pinned memory (fold_server.hpp), so that no host function waits on CUDA work.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "runtime/communicator.hpp"
#include "runtime/gpu/device_api.hpp"
#include "runtime/gpu/device_arithmetic.hpp"

namespace flexplan::gpu {

// Where the staged path's local reductions run. FLEXPLAN_STAGED_ARITHMETIC=host|device.
//   Host (the default): on the CPU, as the host runtime.
//   Device: in the operation's fold server, a CUDA kernel on the pinned chunks
//   (device_arithmetic.hpp). Measured slower where processes share a GPU (docs/gpu.md).
enum class StagedArithmetic { Host, Device };
// The variable's value, Host when unset; InputError naming it when malformed, or, with `error`,
// Host and the message there.
StagedArithmetic staged_arithmetic_from_env();
StagedArithmetic staged_arithmetic_from_env(std::string* error);

class StagedCommunicator {
 public:
  // Collective, as flexplan::Communicator's constructors; every rank throws if any rank cannot
  // set up its CUDA arithmetic. No `arithmetic`: FLEXPLAN_STAGED_ARITHMETIC, where a malformed
  // value on any rank fails creation on every rank, naming it (Options::errors).
  StagedCommunicator(const std::string& plan_path, MPI_Comm comm, Options options = Options::from_env(),
                     std::optional<StagedArithmetic> arithmetic = std::nullopt);
  StagedCommunicator(ir::Plan plan, MPI_Comm comm, Options options = Options::from_env(),
                     std::optional<StagedArithmetic> arithmetic = std::nullopt);
  // Waits for the enqueued operations; collective (the host communicator's destructor is).
  ~StagedCommunicator();
  StagedCommunicator(const StagedCommunicator&) = delete;
  StagedCommunicator& operator=(const StagedCommunicator&) = delete;

  // recv = op over all ranks' send (device pointers); in place when send == recv or null.
  // From one thread at a time, as NCCL's communicators ask.
  // Enqueued on `stream`; later work on it sees the result. Operations run in issue order. A
  // failure surfaces at the next call or at synchronize(), as RuntimeError. Synchronizes the
  // host only when the staging buffer or the reductions' scratch must grow (a first call, a
  // larger count).
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, cudaStream_t stream);
  // The other collectives, with Communicator's and NCCL's arguments (device pointers), staged the
  // same way: reduce-scatter (send holds size() blocks of recv_count), all-gather (recv gets
  // size() blocks of send_count), broadcast from `root` (send read at the root only) and reduce
  // to `root` (recv written at the root only). A call the plan has no schedule for, or a bad
  // root, throws InputError here, before anything is enqueued.
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                      cudaStream_t stream);
  void allgather(const void* send, void* recv, size_t send_count, DataType type, cudaStream_t stream);
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root, cudaStream_t stream);
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root, cudaStream_t stream);
  // Waits for every enqueued operation; throws the first failure.
  void synchronize();

  Communicator& host() { return *host_; }
  // The CUDA arithmetic's counters; null where the reductions run on the host.
  const DeviceArithmetic* device_arithmetic() const { return arithmetic_.get(); }

 private:
  struct Job;
  // Stages one collective: copies in, the host collective on the worker, copies out.
  void enqueue(ir::Collective collective, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
               int root, cudaStream_t stream);
  StagedCommunicator(MPI_Comm comm, std::optional<StagedArithmetic> arithmetic, Options& options);
  static void hand_over(void* job);  // the stream's host function
  void start_worker();
  void work();                       // the worker thread
  void run_on_host(const Job& job);  // the worker's host collective
  void rethrow();
  std::string failure();  // the first failure, "" if none

  std::shared_ptr<DeviceArithmetic> arithmetic_;  // before host_: its scratch comes from here
  std::unique_ptr<Communicator> host_;
  cudaStream_t stream_ = nullptr;  // every operation, in issue order
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;

  std::mutex mutex_;  // jobs_, stopping_, error_, each job's done
  std::string error_;
  std::condition_variable changed_;
  std::deque<Job*> jobs_;  // handed over, not yet run
  size_t in_hand_over_ = 0;  // host functions inside hand_over
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace flexplan::gpu
