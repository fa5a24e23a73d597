// The UCX host runtime on device buffers through pinned staging (staged_communicator.hpp).
#include "runtime/gpu/staged_communicator.hpp"

#include <mutex>

#include <fmt/format.h>

namespace flexplan::gpu {

// One operation's host part, run by the internal stream between the two copies.
struct StagedCommunicator::Job {
  Communicator* comm;
  void* pinned;
  size_t count;
  DataType type;
  ReduceOp op;
  std::shared_ptr<std::string> error;

  static void run(void* data) {
    std::unique_ptr<Job> job(static_cast<Job*>(data));
    static std::mutex mutex;  // guards the error text, read by the caller's thread
    {
      std::lock_guard lock(mutex);
      if (!job->error->empty()) return;  // after a failure, later operations do nothing
    }
    try {
      job->comm->allreduce(job->pinned, job->pinned, job->count, job->type, job->op);
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex);
      *job->error = e.what();
    }
  }
};

StagedCommunicator::StagedCommunicator(const std::string& plan_path, MPI_Comm comm, Options options)
    : host_(std::make_unique<Communicator>(plan_path, comm, std::move(options))),
      error_(std::make_shared<std::string>()) {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

StagedCommunicator::StagedCommunicator(ir::Plan plan, MPI_Comm comm, Options options)
    : host_(std::make_unique<Communicator>(std::move(plan), comm, std::move(options))),
      error_(std::make_shared<std::string>()) {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

StagedCommunicator::~StagedCommunicator() {
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
  if (pinned_) cudaFreeHost(pinned_);
}

void StagedCommunicator::rethrow() {
  cudaStreamSynchronize(stream_);
  if (!error_->empty()) throw RuntimeError("staged device all-reduce failed: " + *error_);
}

void StagedCommunicator::synchronize() { rethrow(); }

void StagedCommunicator::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                   cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  if (!error_->empty()) rethrow();
  if (bytes > pinned_bytes_) {
    // Earlier operations still use the old buffer: let them finish first.
    cudaStreamSynchronize(stream_);
    if (pinned_) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    check_cuda(cudaMallocHost(&pinned_, bytes), "cudaMallocHost");
    pinned_bytes_ = bytes;
  }
  cudaEvent_t ready, done;
  check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(ready, stream), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(ready);
  const void* source = send ? send : recv;
  if (bytes) check_cuda(cudaMemcpyAsync(pinned_, source, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
  auto* job = new Job{host_.get(), pinned_, count, type, op, error_};
  if (cudaLaunchHostFunc(stream_, &Job::run, job) != cudaSuccess) {
    delete job;
    throw RuntimeError("cudaLaunchHostFunc failed");
  }
  if (bytes) check_cuda(cudaMemcpyAsync(recv, pinned_, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(done, stream_), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream, done, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(done);
}

}  // namespace flexplan::gpu
