// flexplan::gpu::StagedCommunicator: the UCX host runtime (flexplan::Communicator) on device
// buffers, staged through pinned host memory, with stream semantics: each call enqueues on the
// caller's stream a copy to pinned memory, the host all-reduce (a host function the stream
// runs), and the copy back, and returns. For clusters without a fast GPU interconnect, and for
// several processes sharing one GPU (which NCCL refuses). The installed UCX (1.13, Debian) has
// no CUDA transports, hence the staging. Reductions run on the host, in the runtime's kernels.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "runtime/communicator.hpp"
#include "runtime/gpu/device_api.hpp"

namespace flexplan::gpu {

class StagedCommunicator {
 public:
  // Collective, as flexplan::Communicator's constructors.
  StagedCommunicator(const std::string& plan_path, MPI_Comm comm, Options options = Options::from_env());
  StagedCommunicator(ir::Plan plan, MPI_Comm comm, Options options = Options::from_env());
  // Waits for the enqueued operations; collective (the host communicator's destructor is).
  ~StagedCommunicator();
  StagedCommunicator(const StagedCommunicator&) = delete;
  StagedCommunicator& operator=(const StagedCommunicator&) = delete;

  // recv = op over all ranks' send (device pointers); in place when send == recv or null.
  // Enqueued on `stream`; later work on it sees the result. Operations run in issue order. A
  // failure surfaces at the next call or at synchronize(), as RuntimeError.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, cudaStream_t stream);
  // Waits for every enqueued operation; throws the first failure.
  void synchronize();

  Communicator& host() { return *host_; }

 private:
  struct Job;
  void rethrow();
  std::unique_ptr<Communicator> host_;
  cudaStream_t stream_ = nullptr;  // every operation, in issue order
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  std::shared_ptr<std::string> error_;
};

}  // namespace flexplan::gpu
