// The UCX host runtime on device buffers through pinned staging (staged_communicator.hpp).
#include "runtime/gpu/staged_communicator.hpp"

#include <cstdlib>

#include <fmt/format.h>

namespace flexplan::gpu {
namespace {
// Pinned scratch ready at creation: a window of 1 MiB chunks from a few sources per hop. More is
// added after an operation that ran short (DeviceArithmetic::grow).
constexpr size_t kInitialArenaBytes = size_t{32} << 20;
}  // namespace

StagedArithmetic staged_arithmetic_from_env(std::string* error) {
  const char* value = std::getenv("FLEXPLAN_STAGED_ARITHMETIC");
  if (!value || !*value || std::string(value) == "host") return StagedArithmetic::Host;
  if (std::string(value) == "device") return StagedArithmetic::Device;
  *error = fmt::format("FLEXPLAN_STAGED_ARITHMETIC='{}': expected host or device", value);
  return StagedArithmetic::Host;
}

StagedArithmetic staged_arithmetic_from_env() {
  std::string error;
  const StagedArithmetic arithmetic = staged_arithmetic_from_env(&error);
  if (!error.empty()) throw InputError(error);
  return arithmetic;
}

// One operation's host part, run by the worker. With the host arithmetic the stream's host
// function hands it over and waits for `done`; with the device arithmetic it is queued when
// enqueued, and the stream is held by its fold server (`served`) instead.
struct StagedCommunicator::Job {
  StagedCommunicator* owner;
  void* pinned;
  ir::Collective collective;
  size_t count;  // per rank, as the call's
  DataType type;
  ReduceOp op;
  int root;
  DeviceArithmetic::Served served;
  bool done = false;
};

StagedCommunicator::StagedCommunicator(MPI_Comm comm, std::optional<StagedArithmetic> requested,
                                       Options& options) {
  // A malformed variable joins the options' errors, which the host communicator's creation
  // reports on every rank.
  std::string malformed;
  const StagedArithmetic arithmetic = requested ? *requested : staged_arithmetic_from_env(&malformed);
  if (!malformed.empty()) options.errors.push_back(malformed);
  std::string why;
  if (arithmetic == StagedArithmetic::Device) {
    try {
      arithmetic_ = std::make_shared<DeviceArithmetic>(kInitialArenaBytes, options.timeout);
      options.arithmetic = arithmetic_;
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  // Every rank learns whether every rank could set up its arithmetic, before the host
  // communicator's collective creation, where the others would wait for a rank that threw.
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int first_failed = why.empty() ? size : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm);
  if (first_failed == size) return;
  arithmetic_.reset();
  throw RuntimeError(why.empty()
                         ? fmt::format("staged device path: rank {} could not set up its CUDA arithmetic (see its error)",
                                       first_failed)
                         : fmt::format("staged device path: rank {}: {}", rank, why));
}

StagedCommunicator::StagedCommunicator(const std::string& plan_path, MPI_Comm comm, Options options,
                                       std::optional<StagedArithmetic> arithmetic)
    : StagedCommunicator(comm, arithmetic, options) {
  host_ = std::make_unique<Communicator>(plan_path, comm, std::move(options));
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  start_worker();
}

StagedCommunicator::StagedCommunicator(ir::Plan plan, MPI_Comm comm, Options options,
                                       std::optional<StagedArithmetic> arithmetic)
    : StagedCommunicator(comm, arithmetic, options) {
  host_ = std::make_unique<Communicator>(std::move(plan), comm, std::move(options));
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  start_worker();
}

StagedCommunicator::~StagedCommunicator() {
  if (stream_) cudaStreamSynchronize(stream_);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();  // runs every job handed over first
  {
    // A failed stream returns from its synchronize at once: a host function may still be on its
    // way out of hand_over, touching this object.
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return in_hand_over_ == 0; });
  }
  if (stream_) cudaStreamDestroy(stream_);
  host_.reset();  // collective; its scratch goes back to the arithmetic, freed after it
  if (pinned_) cudaFreeHost(pinned_);
}

void StagedCommunicator::hand_over(void* data) {
  auto* job = static_cast<Job*>(data);
  StagedCommunicator& self = *job->owner;
  std::unique_lock lock(self.mutex_);
  ++self.in_hand_over_;
  self.jobs_.push_back(job);
  self.changed_.notify_all();
  self.changed_.wait(lock, [&] { return job->done; });
  delete job;
  --self.in_hand_over_;
  self.changed_.notify_all();
}

void StagedCommunicator::start_worker() {
  // The worker launches the reductions' kernels: on this thread's device (CUDA's current device
  // is per thread).
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  worker_ = std::thread([this, device] {
    cudaSetDevice(device);
    work();
  });
}

void StagedCommunicator::run_on_host(const Job& job) {
  // In place in the staging memory, as NCCL's in-place forms.
  auto* pinned = static_cast<std::byte*>(job.pinned);
  std::byte* const block = pinned + static_cast<size_t>(host_->rank()) * job.count * size_of(job.type);
  switch (job.collective) {
    case ir::Collective::AllReduce: host_->allreduce(pinned, pinned, job.count, job.type, job.op); break;
    case ir::Collective::ReduceScatter: host_->reduce_scatter(pinned, block, job.count, job.type, job.op); break;
    case ir::Collective::AllGather: host_->allgather(block, pinned, job.count, job.type); break;
    case ir::Collective::Broadcast: host_->broadcast(nullptr, pinned, job.count, job.type, job.root); break;
    case ir::Collective::Reduce:
      if (host_->rank() == job.root) {
        host_->reduce(nullptr, pinned, job.count, job.type, job.op, job.root);
      } else {
        host_->reduce(pinned, nullptr, job.count, job.type, job.op, job.root);
      }
      break;
  }
}

void StagedCommunicator::work() {
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = jobs_.front();
      jobs_.pop_front();
    }
    // After a failure later operations do nothing (a server is still let go).
    std::string why;
    if (failure().empty() && arithmetic_) why = arithmetic_->begin(job->served);
    if (failure().empty() && why.empty()) {
      try {
        run_on_host(*job);
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    if (arithmetic_) arithmetic_->end(job->served);
    {
      std::lock_guard lock(mutex_);
      if (error_.empty()) error_ = why;
      job->done = true;
    }
    changed_.notify_all();
    if (arithmetic_) delete job;  // (the host function's otherwise)
  }
}

std::string StagedCommunicator::failure() {
  std::lock_guard lock(mutex_);
  return error_;
}

void StagedCommunicator::rethrow() {
  const cudaError_t result = cudaStreamSynchronize(stream_);
  if (result != cudaSuccess) {
    // (The copies, or work the caller's stream did before: the host part may never have run.)
    std::lock_guard lock(mutex_);
    if (error_.empty()) error_ = fmt::format("its stream failed: {}", cudaGetErrorString(result));
  }
  const std::string why = failure();
  if (!why.empty()) throw RuntimeError("staged device collective failed: " + why);
}

void StagedCommunicator::synchronize() { rethrow(); }

void StagedCommunicator::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                   cudaStream_t stream) {
  enqueue(ir::Collective::AllReduce, send, recv, count, type, op, 0, stream);
}
void StagedCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                                        cudaStream_t stream) {
  enqueue(ir::Collective::ReduceScatter, send, recv, recv_count, type, op, 0, stream);
}
void StagedCommunicator::allgather(const void* send, void* recv, size_t send_count, DataType type,
                                   cudaStream_t stream) {
  enqueue(ir::Collective::AllGather, send, recv, send_count, type, ReduceOp::Sum, 0, stream);
}
void StagedCommunicator::broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                                   cudaStream_t stream) {
  enqueue(ir::Collective::Broadcast, send, recv, count, type, ReduceOp::Sum, root, stream);
}
void StagedCommunicator::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
                                cudaStream_t stream) {
  enqueue(ir::Collective::Reduce, send, recv, count, type, op, root, stream);
}

void StagedCommunicator::enqueue(ir::Collective collective, const void* send, void* recv, size_t count,
                                 DataType type, ReduceOp op, int root, cudaStream_t stream) {
  const std::string name(ir::to_string(collective));
  const size_t element = size_of(type);
  const int world = host_->size(), rank = host_->rank();
  if (element == 0) throw InputError("staged device " + name + ": unknown data type");
  const bool rooted = ir::has_root(collective);
  if (rooted && (root < 0 || root >= world))
    throw InputError(fmt::format("staged device {}: root {} is not a rank of the {} ranks", name, root, world));
  const size_t total = ir::has_shards(collective) ? count * static_cast<size_t>(world) : count;
  const size_t bytes = total * element;
  // The worker would only find out later, and break the communicator: ask the selection now. A
  // broadcast or reduce from an unplanned root runs a derived schedule where the plan holds the
  // collective for another root (docs/runtime.md).
  const ir::Plan& plan = host_->plan();
  const bool derivable = rooted && ir::plans_collective_any_root(plan, collective);
  if (!ir::find_schedule(plan, {collective, bytes, rooted ? root : 0}) && !derivable)
    throw InputError(fmt::format("staged device: the plan has no {} schedule for {} bytes; plan it with "
                                 "`flexplan TOPOLOGY --collectives {}`", name, bytes, name));
  const size_t block_bytes = count * element;
  const size_t block_offset = static_cast<size_t>(rank) * block_bytes;
  if (!failure().empty()) rethrow();
  const bool grow_scratch = arithmetic_ && arithmetic_->short_of_memory();
  if (bytes > pinned_bytes_ || grow_scratch) {
    // Earlier operations still use the old memory: let them finish first. Pinned memory is
    // allocated only here, with nothing of ours waiting in a stream (device_arithmetic.hpp).
    rethrow();
    if (grow_scratch) arithmetic_->grow();
    if (bytes > pinned_bytes_) {
      if (arithmetic_) arithmetic_->set_staging(nullptr, 0);
      if (pinned_) cudaFreeHost(pinned_);
      pinned_ = nullptr;
      pinned_bytes_ = 0;
      check_cuda(cudaMallocHost(&pinned_, bytes), "cudaMallocHost");
      pinned_bytes_ = bytes;
      if (arithmetic_) arithmetic_->set_staging(pinned_, pinned_bytes_);
    }
  }
  cudaEvent_t ready, done;
  check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(ready, stream), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(ready);
  // In: the input this rank contributes, where the host collective reads it in place.
  const void* source = send ? send : recv;
  auto* staging = static_cast<std::byte*>(pinned_);
  const auto to_host = [&](void* to, const void* from, size_t n) {
    if (n) check_cuda(cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
  };
  switch (collective) {
    case ir::Collective::AllReduce:
    case ir::Collective::ReduceScatter:
    case ir::Collective::Reduce: to_host(staging, source, bytes); break;
    case ir::Collective::AllGather:
      to_host(staging + block_offset, send ? send : static_cast<const std::byte*>(recv) + block_offset, block_bytes);
      break;
    case ir::Collective::Broadcast:
      if (rank == root) to_host(staging, source, bytes);
      break;
  }
  auto* job = new Job{this, pinned_, collective, count, type, op, root, {}};
  if (arithmetic_) {
    // The operation's fold server holds the stream until the worker has run it. (A server
    // whose event could not be recorded is queued all the same: the worker fails the operation
    // and ends the server in order.)
    try {
      job->served = arithmetic_->serve(stream_);
    } catch (...) {
      delete job;
      throw;
    }
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(job);
    }
    changed_.notify_all();
  } else if (cudaLaunchHostFunc(stream_, &StagedCommunicator::hand_over, job) != cudaSuccess) {
    delete job;
    throw RuntimeError("cudaLaunchHostFunc failed");
  }
  // Out: this rank's result (the whole buffer, its block, or at a reduce's root alone).
  const auto to_device = [&](void* to, const void* from, size_t n) {
    if (n) check_cuda(cudaMemcpyAsync(to, from, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  };
  switch (collective) {
    case ir::Collective::AllReduce:
    case ir::Collective::AllGather:
    case ir::Collective::Broadcast: to_device(recv, staging, bytes); break;
    case ir::Collective::ReduceScatter: to_device(recv, staging + block_offset, block_bytes); break;
    case ir::Collective::Reduce:
      if (rank == root) to_device(recv, staging, bytes);
      break;
  }
  check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(done, stream_), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream, done, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(done);
}

}  // namespace flexplan::gpu
