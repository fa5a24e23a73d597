#include "process_group.hpp"

#include <Python.h>

#include <cstdlib>
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "runtime/bootstrap.hpp"
#include "store_group.hpp"

namespace flexplan::torch_backend {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

std::optional<DataType> known_type(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return DataType::Float32;
    case at::kDouble: return DataType::Float64;
    case at::kHalf: return DataType::Float16;
    case at::kBFloat16: return DataType::BFloat16;
    case at::kInt: return DataType::Int32;
    case at::kLong: return DataType::Int64;
    case at::kByte: return DataType::UInt8;
    default: return std::nullopt;
  }
}

DataType data_type_of(const at::Tensor& tensor) {
  const auto type = known_type(tensor);
  TORCH_CHECK(type.has_value(), "flexplan: allreduce of ", tensor.scalar_type(),
              " tensors is not supported (supported: float32, float64, float16, bfloat16, "
              "int32, int64, uint8)");
  return *type;
}

// What a collective moved as bytes was called with, for the call signature: the tensor's type
// and element count where the runtime knows the type. (Another type, say int16, is named and
// compared as its bytes.)
CallInfo call_of(UserCollective collective, const at::Tensor& tensor, int32_t root = -1) {
  CallInfo call;
  call.collective = collective;
  call.root = root;
  if (const auto type = known_type(tensor)) {
    call.type = *type;
    call.count = static_cast<uint64_t>(tensor.numel());
  }
  return call;
}

ReduceOp reduce_op_of(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::Sum;
    case c10d::ReduceOp::AVG: return ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::Prod;
    case c10d::ReduceOp::MIN: return ReduceOp::Min;
    case c10d::ReduceOp::MAX: return ReduceOp::Max;
    default:
      TORCH_CHECK(false, "flexplan: reduce op ", static_cast<int>(op.op_),
                  " (BAND, BOR, BXOR or PREMUL_SUM) is not supported (supported: SUM, AVG, PRODUCT, "
                  "MIN, MAX)");
  }
}

// One dense CPU tensor per call: what the backend serves.
const at::Tensor& single_cpu_tensor(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "flexplan: ", what, " takes one tensor per process, got ",
              tensors.size());
  const auto& tensor = tensors[0];
  TORCH_CHECK(tensor.device().is_cpu(), "flexplan: ", what, " needs a CPU tensor, got one on ",
              tensor.device());
  TORCH_CHECK(tensor.layout() == at::kStrided, "flexplan: ", what, " needs a dense tensor, got ",
              tensor.layout());
  return tensor;
}

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

size_t byte_size(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()) * tensor.element_size(); }

}  // namespace

// --- Work ---------------------------------------------------------------------------------------

WorkFlexplan::WorkFlexplan(int rank, c10d::OpType type, c10::intrusive_ptr<c10::ivalue::Future> future)
    : Work(rank, type), future_(std::move(future)) {}

bool WorkFlexplan::isCompleted() { return future_->completed(); }

bool WorkFlexplan::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr WorkFlexplan::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

std::vector<at::Tensor> WorkFlexplan::result() { return future_->value().toTensorVector(); }

bool WorkFlexplan::wait(std::chrono::milliseconds /*timeout: the communicator's own bounds it*/) {
  future_->wait();
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

// --- the process group --------------------------------------------------------------------------

ProcessGroupFlexplan::ProcessGroupFlexplan(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                           int size, std::chrono::milliseconds timeout,
                                           std::string plan_path)
    : ProcessGroup(rank, size), plan_path_(std::move(plan_path)) {
  if (!env("FLEXPLAN_TIMEOUT_MS")) torch_timeout_ = timeout;
  std::promise<std::string> started;
  auto learner = started.get_future();
  thread_ = std::thread([this, store, timeout, &started] {
    std::unique_ptr<Communicator> comm;
    try {
      auto group = std::make_unique<StoreGroup>(store, getRank(), getSize(), timeout);
      // Bad settings are recorded, not thrown: the communicator's creation agrees on them first
      // (bootstrap::agree_on_settings), so that a bad one on any rank fails every rank.
      flexplan::Options options = flexplan::Options::from_env();
      if (torch_timeout_) options.timeout = *torch_timeout_;
      // Blocking by default: the training threads need the cores a busy-polling loop takes.
      if (!env("FLEXPLAN_BLOCKING")) options.blocking = true;
      if (plan_path_.empty() && env("FLEXPLAN_PLAN")) plan_path_ = env("FLEXPLAN_PLAN");
      if (plan_path_.empty()) {
        options.errors.emplace_back(
            "no plan: pass pg_options=flexplan_torch.Options(plan=PATH) or set FLEXPLAN_PLAN");
      }
      comm = std::make_unique<Communicator>(plan_path_, std::move(group), options);
      started.set_value(comm->learner_name());
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    run(*comm);
    comm.reset();  // collective: waits for every rank to be done, bounded by the timeout
  });
  try {
    learner_name_ = learner.get();
  } catch (const std::exception& e) {
    thread_.join();
    // c10::Error becomes Python's RuntimeError with the runtime's message, every rank alike.
    TORCH_CHECK(false, e.what());
  }
}

ProcessGroupFlexplan::~ProcessGroupFlexplan() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  // Dropping the last reference to a tensor Python knows takes the GIL: the communicator thread
  // may need it to finish, so it must not be held while waiting for that thread.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  if (thread_.joinable()) thread_.join();
  if (saved) PyEval_RestoreThread(saved);
}

std::exception_ptr ProcessGroupFlexplan::naming_timeout_source(std::exception_ptr error) const {
  if (!torch_timeout_) return error;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    // The runtime's words for its own timeout, with this rank's value: a peer's notice quoting
    // its own timeout of another value (set by FLEXPLAN_TIMEOUT_MS there) stays as it is.
    const std::string runtime_says = fmt::format("no progress for {} ms (FLEXPLAN_TIMEOUT_MS)", torch_timeout_->count());
    const std::string here = fmt::format("no progress for {} ms (the timeout given to init_process_group)",
                                         torch_timeout_->count());
    std::string message = e.what();
    bool changed = false;
    for (size_t at = message.find(runtime_says); at != std::string::npos; at = message.find(runtime_says, at)) {
      message.replace(at, runtime_says.size(), here);
      at += here.size();
      changed = true;
    }
    if (changed) return std::make_exception_ptr(RuntimeError(message));
  } catch (...) {
  }
  return error;
}

void ProcessGroupFlexplan::run(Communicator& comm) {
  struct InFlight {
    Job job;
    Request request;
  };
  std::deque<InFlight> in_flight;
  auto fail = [this](Job& job, std::exception_ptr error) {
    job.future->setError(naming_timeout_source(std::move(error)));
  };
  while (true) {
    std::deque<Job> fresh;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !in_flight.empty(); });
      fresh.swap(queue_);
      if (stopping_ && fresh.empty() && in_flight.empty()) return;
    }
    // Issue everything queued, in call order (the order every rank shares), before waiting.
    for (auto& job : fresh) {
      try {
        if (job.before) job.before();
        void* data = job.buffer.data_ptr();
        Request request = comm.iallreduce(data, data, static_cast<size_t>(job.buffer.numel()),
                                          job.type, job.op, job.call);
        in_flight.push_back({std::move(job), std::move(request)});
      } catch (...) {
        fail(job, std::current_exception());
      }
    }
    // Then the oldest: waiting drives every outstanding operation, and new calls are issued
    // as soon as it completes.
    if (!in_flight.empty()) {
      auto& oldest = in_flight.front();
      try {
        oldest.request.wait();
        oldest.job.future->markCompleted(c10::IValue(oldest.job.after()));
      } catch (...) {
        fail(oldest.job, std::current_exception());
      }
      in_flight.pop_front();
    }
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::enqueue(c10d::OpType type, Job job) {
  job.future = tensor_list_future();
  auto work = c10::make_intrusive<WorkFlexplan>(getRank(), type, job.future);
  {
    std::lock_guard lock(mutex_);
    TORCH_CHECK(!stopping_, "flexplan: the process group is shutting down");
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  const at::Tensor tensor = single_cpu_tensor(tensors, "allreduce");
  Job job;
  job.type = data_type_of(tensor);
  job.op = reduce_op_of(opts.reduceOp);
  if (tensor.is_contiguous()) {
    job.buffer = tensor;
    job.after = [tensor] { return std::vector<at::Tensor>{tensor}; };
  } else {
    // Reduce a contiguous copy, taken when the operation is issued, and copy the result back.
    job.buffer = at::empty(tensor.sizes(), tensor.options().memory_format(at::MemoryFormat::Contiguous));
    job.before = [buffer = job.buffer, tensor] { buffer.copy_(tensor); };
    job.after = [buffer = job.buffer, tensor]() mutable {
      tensor.copy_(buffer);
      return std::vector<at::Tensor>{tensor};
    };
  }
  return enqueue(c10d::OpType::ALLREDUCE, std::move(job));
}

// A byte-wise sum in which only the root contributes: every rank receives the root's bytes
// exactly, whatever the type (the plan's all-reduce serves, at the cost of an all-reduce).
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  const at::Tensor tensor = single_cpu_tensor(tensors, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "flexplan: broadcast root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  TORCH_CHECK(opts.rootTensor == 0, "flexplan: broadcast takes one tensor per process");
  const bool root = opts.rootRank == getRank();
  Job job;
  // Named as what it is, so that a rank calling broadcast where another calls all_reduce of
  // the same size fails (both are this all-reduce underneath).
  job.call = call_of(UserCollective::Broadcast, tensor, static_cast<int32_t>(opts.rootRank));
  job.buffer = at::empty({static_cast<int64_t>(byte_size(tensor))}, at::kByte);
  job.before = [buffer = job.buffer, tensor, root] {
    if (root) {
      std::memcpy(buffer.data_ptr(), tensor.contiguous().data_ptr(), byte_size(tensor));
    } else {
      buffer.zero_();
    }
  };
  job.after = [buffer = job.buffer, tensor]() mutable {
    if (tensor.is_contiguous()) {
      std::memcpy(tensor.data_ptr(), buffer.data_ptr(), byte_size(tensor));
    } else {
      tensor.copy_(at::from_blob(buffer.data_ptr(), tensor.sizes(), tensor.options()));
    }
    return std::vector<at::Tensor>{tensor};
  };
  return enqueue(c10d::OpType::BROADCAST, std::move(job));
}

// Each rank writes its bytes into its own slot of a zeroed buffer; the byte-wise sum is the
// concatenation.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const at::Tensor input = single_cpu_tensor(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()),
              "flexplan: allgather needs one list of ", getSize(), " output tensors");
  for (const auto& out : outputs[0]) {
    TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == input.scalar_type() &&
                    out.numel() == input.numel(),
                "flexplan: allgather's output tensors must be CPU tensors of the input's type and size");
  }
  const size_t slot = byte_size(input);
  const int rank = getRank();
  std::vector<at::Tensor> outs = outputs[0];
  Job job;
  job.call = call_of(UserCollective::AllGather, input);
  job.buffer = at::empty({static_cast<int64_t>(slot) * getSize()}, at::kByte);
  job.before = [buffer = job.buffer, input, slot, rank] {
    buffer.zero_();
    std::memcpy(static_cast<uint8_t*>(buffer.data_ptr()) + slot * static_cast<size_t>(rank),
                input.contiguous().data_ptr(), slot);
  };
  job.after = [buffer = job.buffer, outs, slot]() mutable {
    for (size_t r = 0; r < outs.size(); ++r) {
      outs[r].copy_(at::from_blob(static_cast<uint8_t*>(buffer.data_ptr()) + slot * r,
                                  outs[r].sizes(), outs[r].options()));
    }
    return outs;
  };
  return enqueue(c10d::OpType::ALLGATHER, std::move(job));
}

// A one-byte all-reduce: it completes on a rank only once every rank has joined it.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::barrier(const c10d::BarrierOptions& /*opts*/) {
  Job job;
  job.call.collective = UserCollective::Barrier;
  job.buffer = at::zeros({1}, at::kByte);
  job.after = [] { return std::vector<at::Tensor>{}; };
  return enqueue(c10d::OpType::BARRIER, std::move(job));
}

}  // namespace flexplan::torch_backend
