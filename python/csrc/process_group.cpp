// ProcessGroupFlexplan's collectives: each a Job (fill, issue, copy out) run by the group's
// communicator thread, natively through the plan's schedule of that collective, or as a
// byte-exact all-reduce where the plan has none.
#include "process_group.hpp"

#include <Python.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <numeric>

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

// The type of a collective that reduces (all-reduce, reduce, reduce-scatter).
DataType data_type_of(const at::Tensor& tensor, const char* what) {
  const auto type = known_type(tensor);
  TORCH_CHECK(type.has_value(), "flexplan: ", what, " of ", tensor.scalar_type(),
              " tensors is not supported (supported: float32, float64, float16, bfloat16, "
              "int32, int64, uint8)");
  return *type;
}

size_t byte_size(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()) * tensor.element_size(); }

// How a collective that only copies (broadcast, all-gather) moves a tensor: as its own type
// where the runtime knows it (so that the call signature names it), else as its bytes.
struct Moved {
  DataType type = DataType::UInt8;
  size_t count = 0;
};
Moved moved_as(const at::Tensor& tensor) {
  if (const auto type = known_type(tensor)) return {*type, static_cast<size_t>(tensor.numel())};
  return {DataType::UInt8, byte_size(tensor)};
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

void check_cpu_dense(const at::Tensor& tensor, const char* what) {
  TORCH_CHECK(tensor.device().is_cpu(), "flexplan: ", what, " needs a CPU tensor, got one on ",
              tensor.device());
  TORCH_CHECK(tensor.layout() == at::kStrided, "flexplan: ", what, " needs a dense tensor, got ",
              tensor.layout());
}

// One dense CPU tensor per call: what the backend serves.
const at::Tensor& single_cpu_tensor(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "flexplan: ", what, " takes one tensor per process, got ",
              tensors.size());
  check_cpu_dense(tensors[0], what);
  return tensors[0];
}

at::Tensor contiguous_like(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(), tensor.options().memory_format(at::MemoryFormat::Contiguous));
}

// `count` bytes at `data` as a tensor of `like`'s shape and type.
at::Tensor view_as(void* data, const at::Tensor& like) { return at::from_blob(data, like.sizes(), like.options()); }

uint8_t* bytes_of(const at::Tensor& tensor) { return static_cast<uint8_t*>(tensor.data_ptr()); }

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

// The issue of a byte-exact or typed all-reduce of a contiguous buffer in place.
std::function<Request(Communicator&)> allreduce_of(at::Tensor buffer, DataType type, ReduceOp op, CallInfo call) {
  return [buffer, type, op, call](Communicator& comm) {
    void* data = buffer.data_ptr();
    return comm.iallreduce(data, data, static_cast<size_t>(buffer.numel()), type, op, call);
  };
}

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
                                           std::string plan_path, bool via_allreduce)
    : ProcessGroup(rank, size), plan_path_(std::move(plan_path)) {
  if (!env("FLEXPLAN_TIMEOUT_MS")) torch_timeout_ = timeout;
  via_allreduce_ = via_allreduce || (env("FLEXPLAN_TORCH_VIA_ALLREDUCE") && std::string(env("FLEXPLAN_TORCH_VIA_ALLREDUCE")) != "0");
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
      // Every rank's plan rank (a sum of one entry each): the native collectives' blocks and
      // roots are plan ranks.
      const int world = getSize();
      std::vector<int32_t> plan_rank(static_cast<size_t>(world), 0);
      plan_rank[static_cast<size_t>(getRank())] = comm->rank();
      comm->allreduce(plan_rank.data(), plan_rank.data(), plan_rank.size(), DataType::Int32, ReduceOp::Sum);
      plan_rank_of_.assign(plan_rank.begin(), plan_rank.end());
      group_rank_of_.assign(static_cast<size_t>(world), 0);
      for (int g = 0; g < world; ++g) {
        group_rank_of_[static_cast<size_t>(plan_rank_of_[g])] = g;
        if (plan_rank_of_[g] != g) identity_ranks_ = false;
      }
      const ir::Plan& plan = comm->plan();
      plans_allgather_ = ir::plans_collective(plan, ir::Collective::AllGather);
      plans_reduce_scatter_ = ir::plans_collective(plan, ir::Collective::ReduceScatter);
      // Broadcast and reduce from any root, if from one: the runtime derives a chain from a root
      // the plan lacks (docs/runtime.md).
      const auto plans_any_root = [&plan](ir::Collective collective) {
        return std::any_of(plan.schedules.begin(), plan.schedules.end(),
                           [collective](const ir::Schedule& s) { return s.collective == collective; });
      };
      plans_broadcast_ = plans_any_root(ir::Collective::Broadcast);
      plans_reduce_ = plans_any_root(ir::Collective::Reduce);
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

std::vector<std::string> ProcessGroupFlexplan::fallbacks() const {
  std::lock_guard lock(fallback_mutex_);
  return fallbacks_;
}

CommStats ProcessGroupFlexplan::stats() {
  return on_communicator_thread<CommStats>([](Communicator& comm) { return comm.stats(); });
}

ReplanResult ProcessGroupFlexplan::replan() {
  // Completes the operations issued before it first.
  return on_communicator_thread<ReplanResult>([](Communicator& comm) { return comm.replan(); });
}

bool ProcessGroupFlexplan::native(ir::Collective collective) {
  if (via_allreduce_) return false;
  bool planned = false;
  switch (collective) {
    case ir::Collective::AllGather: planned = plans_allgather_; break;
    case ir::Collective::ReduceScatter: planned = plans_reduce_scatter_; break;
    case ir::Collective::Broadcast: planned = plans_broadcast_; break;
    case ir::Collective::Reduce: planned = plans_reduce_; break;
    case ir::Collective::AllReduce: planned = true; break;
  }
  if (planned) return true;
  const std::string name(ir::to_string(collective));
  {
    std::lock_guard lock(fallback_mutex_);
    if (std::find(fallbacks_.begin(), fallbacks_.end(), name) != fallbacks_.end()) return false;
    fallbacks_.push_back(name);
  }
  // Said once per collective and group: an old plan keeps working, more slowly.
  TORCH_WARN("flexplan: the plan '", plan_path_, "' has no ", name, " schedule: ", name,
             " runs as an all-reduce instead (more bytes moved). Plan it with `flexplan TOPOLOGY "
             "--collectives allreduce,",
             name, ir::has_root(collective) ? " --roots 0,1,..." : "",
             " -o plan.bin` (docs/pytorch.md, Plans for every collective)");
  return false;
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
        Request request = job.issue(comm);
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
  const DataType type = data_type_of(tensor, "allreduce");
  const ReduceOp op = reduce_op_of(opts.reduceOp);
  Job job;
  if (tensor.is_contiguous()) {
    job.issue = allreduce_of(tensor, type, op, {});
    job.after = [tensor] { return std::vector<at::Tensor>{tensor}; };
  } else {
    // Reduce a contiguous copy, taken when the operation is issued, and copy the result back.
    const at::Tensor buffer = contiguous_like(tensor);
    job.before = [buffer, tensor] { buffer.copy_(tensor); };
    job.issue = allreduce_of(buffer, type, op, {});
    job.after = [buffer, tensor]() mutable {
      tensor.copy_(buffer);
      return std::vector<at::Tensor>{tensor};
    };
  }
  return enqueue(c10d::OpType::ALLREDUCE, std::move(job));
}

// Natively the plan's broadcast from the root, in place; else a byte-wise sum in which only the
// root contributes: every rank receives the root's bytes exactly, whatever the type.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  const at::Tensor tensor = single_cpu_tensor(tensors, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "flexplan: broadcast root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  TORCH_CHECK(opts.rootTensor == 0, "flexplan: broadcast takes one tensor per process");
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = root == getRank();
  Job job;
  if (native(ir::Collective::Broadcast)) {
    const bool copy = !tensor.is_contiguous();
    const at::Tensor buffer = copy ? contiguous_like(tensor) : tensor;
    const Moved moved = moved_as(tensor);
    const int plan_root = plan_rank_of_[static_cast<size_t>(root)];
    job.before = [buffer, tensor, copy, is_root] {
      if (copy && is_root) buffer.copy_(tensor);
    };
    job.issue = [buffer, moved, plan_root](Communicator& comm) {
      return comm.ibroadcast(nullptr, buffer.data_ptr(), moved.count, moved.type, plan_root);
    };
    job.after = [buffer, tensor, copy]() mutable {
      if (copy) tensor.copy_(buffer);
      return std::vector<at::Tensor>{tensor};
    };
    return enqueue(c10d::OpType::BROADCAST, std::move(job));
  }
  // Named as what it is, so that a rank calling broadcast where another calls all_reduce of
  // the same size fails (both are this all-reduce underneath).
  const at::Tensor buffer = at::empty({static_cast<int64_t>(byte_size(tensor))}, at::kByte);
  job.before = [buffer, tensor, is_root] {
    if (is_root) {
      std::memcpy(buffer.data_ptr(), tensor.contiguous().data_ptr(), byte_size(tensor));
    } else {
      buffer.zero_();
    }
  };
  job.issue = allreduce_of(buffer, DataType::UInt8, ReduceOp::Sum,
                           call_of(UserCollective::Broadcast, tensor, static_cast<int32_t>(root)));
  job.after = [buffer, tensor]() mutable {
    tensor.copy_(view_as(buffer.data_ptr(), tensor));
    return std::vector<at::Tensor>{tensor};
  };
  return enqueue(c10d::OpType::BROADCAST, std::move(job));
}

// `gathered` is world blocks of the input's bytes, contiguous, filled in group rank order.
// Natively this rank's input goes to its plan rank's block and the plan's all-gather runs in
// place (then blocks are put in group order, where the ranks differ); else each rank writes its
// bytes into its own block of a zeroed buffer and the byte-wise sum is the concatenation.
Job ProcessGroupFlexplan::gather_job(const at::Tensor& input, at::Tensor gathered,
                                     std::function<std::vector<at::Tensor>()> done) {
  const size_t slot = byte_size(input);
  const int rank = getRank();
  Job job;
  if (native(ir::Collective::AllGather)) {
    const Moved moved = moved_as(input);
    const size_t mine = static_cast<size_t>(plan_rank_of_[static_cast<size_t>(rank)]) * slot;
    job.before = [gathered, input, mine] { view_as(bytes_of(gathered) + mine, input).copy_(input); };
    job.issue = [gathered, moved, mine](Communicator& comm) {
      return comm.iallgather(bytes_of(gathered) + mine, gathered.data_ptr(), moved.count, moved.type);
    };
    if (identity_ranks_) {
      job.after = std::move(done);
    } else {
      std::vector<int> group_rank_of = group_rank_of_;
      job.after = [gathered, slot, group_rank_of, done = std::move(done)] {
        const at::Tensor plan_order = at::empty({static_cast<int64_t>(slot * group_rank_of.size())}, at::kByte);
        std::memcpy(plan_order.data_ptr(), gathered.data_ptr(), slot * group_rank_of.size());
        for (size_t p = 0; p < group_rank_of.size(); ++p) {
          std::memcpy(bytes_of(gathered) + slot * static_cast<size_t>(group_rank_of[p]),
                      bytes_of(plan_order) + slot * p, slot);
        }
        return done();
      };
    }
    return job;
  }
  job.before = [gathered, input, slot, rank] {
    // A copy first: the input may be a view into `gathered` (in place), zeroed next.
    const at::Tensor own = input.contiguous().clone();
    std::memset(gathered.data_ptr(), 0, byte_size(gathered));
    std::memcpy(bytes_of(gathered) + slot * static_cast<size_t>(rank), own.data_ptr(), slot);
  };
  // A byte-wise sum: any type, bytes exact (NaN payloads, -0.0).
  const CallInfo call = call_of(UserCollective::AllGather, input);
  job.issue = [gathered, call](Communicator& comm) {
    return comm.iallreduce(gathered.data_ptr(), gathered.data_ptr(), byte_size(gathered), DataType::UInt8,
                           ReduceOp::Sum, call);
  };
  job.after = std::move(done);
  return job;
}

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
  std::vector<at::Tensor> outs = outputs[0];
  const at::Tensor gathered = at::empty({static_cast<int64_t>(slot) * getSize()}, at::kByte);
  Job job = gather_job(input, gathered, [gathered, outs, slot]() mutable {
    for (size_t r = 0; r < outs.size(); ++r) outs[r].copy_(view_as(bytes_of(gathered) + slot * r, outs[r]));
    return outs;
  });
  return enqueue(c10d::OpType::ALLGATHER, std::move(job));
}

// all_gather_into_tensor: into the output itself where it is contiguous (FSDP's flat
// parameter), else into a buffer copied out.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::AllgatherOptions& /*opts*/) {
  check_cpu_dense(input, "all_gather_into_tensor");
  check_cpu_dense(output, "all_gather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "flexplan: all_gather_into_tensor's output is ",
              output.scalar_type(), " but its input ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "flexplan: all_gather_into_tensor's output has ",
              output.numel(), " elements, not world size ", getSize(), " x the input's ", input.numel());
  const at::Tensor out = output;
  const bool copy = !out.is_contiguous();
  const at::Tensor gathered = copy ? contiguous_like(out) : out;
  Job job = gather_job(input, gathered, [gathered, out, copy]() mutable {
    if (copy) out.copy_(gathered);
    return std::vector<at::Tensor>{out};
  });
  return enqueue(c10d::OpType::_ALLGATHER_BASE, std::move(job));
}

// The shared part of reduce_scatter and _reduce_scatter_base. `block(g)` is group rank g's
// block of the input (1-D, `count` elements); the result lands in `output`.
namespace {
struct ScatterArgs {
  std::function<at::Tensor(int)> block;
  at::Tensor whole;  // the input as one contiguous tensor in group order, if it is one
  at::Tensor output;
  size_t count = 0;
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
};
}  // namespace

static Job reduce_scatter_job(const ScatterArgs& args, bool native, const std::vector<int>& group_rank_of,
                              bool identity, int rank, int world) {
  Job job;
  const at::Tensor output = args.output;
  const bool copy_out = !output.is_contiguous();
  const at::Tensor result = copy_out ? contiguous_like(output) : output;
  const int64_t count = static_cast<int64_t>(args.count);
  const std::function<at::Tensor(int)> block = args.block;
  // Natively the blocks go in plan rank order, from the input itself where it is one tensor
  // in that order; the fallback sums a copy of every rank's whole input, in group order, and
  // each rank keeps its block.
  const at::Tensor whole = args.whole;
  const bool in_place = native && whole.defined() && identity;
  const at::Tensor send =
      in_place ? whole : at::empty({count * world}, output.options().memory_format(at::MemoryFormat::Contiguous));
  if (!in_place) {
    std::vector<int> order(static_cast<size_t>(world));
    for (int p = 0; p < world; ++p) order[static_cast<size_t>(p)] = native ? group_rank_of[static_cast<size_t>(p)] : p;
    const bool whole_copy = whole.defined() && !native;
    job.before = [send, block, order, count, whole, whole_copy] {
      if (whole_copy) {
        send.copy_(whole);
        return;
      }
      for (size_t p = 0; p < order.size(); ++p) send.narrow(0, static_cast<int64_t>(p) * count, count).copy_(block(order[p]));
    };
  }
  const DataType type = args.type;
  const ReduceOp op = args.op;
  if (native) {
    job.issue = [send, result, count, type, op](Communicator& comm) {
      return comm.ireduce_scatter(send.data_ptr(), result.data_ptr(), static_cast<size_t>(count), type, op);
    };
    job.after = [result, output, copy_out]() mutable {
      if (copy_out) output.copy_(result);
      return std::vector<at::Tensor>{output};
    };
  } else {
    CallInfo call;
    call.collective = UserCollective::ReduceScatter;
    job.issue = allreduce_of(send, type, op, call);
    job.after = [send, output, count, rank]() mutable {
      output.copy_(send.narrow(0, static_cast<int64_t>(rank) * count, count).view(output.sizes()));
      return std::vector<at::Tensor>{output};
    };
  }
  return job;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                                    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor output = single_cpu_tensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(getSize()),
              "flexplan: reduce_scatter needs one list of ", getSize(), " input tensors");
  for (const auto& in : inputs[0]) {
    TORCH_CHECK(in.device().is_cpu() && in.layout() == at::kStrided && in.scalar_type() == output.scalar_type() &&
                    in.numel() == output.numel(),
                "flexplan: reduce_scatter's input tensors must be dense CPU tensors of the output's type and size");
  }
  ScatterArgs args;
  args.type = data_type_of(output, "reduce_scatter");
  args.op = reduce_op_of(opts.reduceOp);
  args.output = output;
  args.count = static_cast<size_t>(output.numel());
  std::vector<at::Tensor> ins = inputs[0];
  args.block = [ins](int g) { return ins[static_cast<size_t>(g)].reshape({-1}); };
  const bool nat = native(ir::Collective::ReduceScatter);
  return enqueue(c10d::OpType::REDUCE_SCATTER,
                 reduce_scatter_job(args, nat, group_rank_of_, identity_ranks_, getRank(), getSize()));
}

// reduce_scatter_tensor: from the input itself where it is contiguous (FSDP's flat gradient)
// and the ranks' orders agree.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                          const c10d::ReduceScatterOptions& opts) {
  check_cpu_dense(input, "reduce_scatter_tensor");
  check_cpu_dense(output, "reduce_scatter_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "flexplan: reduce_scatter_tensor's output is ",
              output.scalar_type(), " but its input ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "flexplan: reduce_scatter_tensor's input has ",
              input.numel(), " elements, not world size ", getSize(), " x the output's ", output.numel());
  ScatterArgs args;
  args.type = data_type_of(output, "reduce_scatter_tensor");
  args.op = reduce_op_of(opts.reduceOp);
  args.output = output;
  args.count = static_cast<size_t>(output.numel());
  const at::Tensor flat = input.reshape({-1});
  const int64_t count = output.numel();
  args.block = [flat, count](int g) { return flat.narrow(0, g * count, count); };
  if (input.is_contiguous()) args.whole = flat;
  const bool nat = native(ir::Collective::ReduceScatter);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE,
                 reduce_scatter_job(args, nat, group_rank_of_, identity_ranks_, getRank(), getSize()));
}

// Natively the plan's reduce to the root, in place (the other ranks' tensors are left as they
// were); else an all-reduce of a copy that the root copies back.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  const at::Tensor tensor = single_cpu_tensor(tensors, "reduce");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "flexplan: reduce root ", opts.rootRank,
              " is not a rank of this group of ", getSize());
  TORCH_CHECK(opts.rootTensor == 0, "flexplan: reduce takes one tensor per process");
  const DataType type = data_type_of(tensor, "reduce");
  const ReduceOp op = reduce_op_of(opts.reduceOp);
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = root == getRank();
  const bool nat = native(ir::Collective::Reduce);
  const bool copy = !nat || !tensor.is_contiguous();
  const at::Tensor buffer = copy ? contiguous_like(tensor) : tensor;
  Job job;
  if (copy) job.before = [buffer, tensor] { buffer.copy_(tensor); };
  if (nat) {
    const int plan_root = plan_rank_of_[static_cast<size_t>(root)];
    job.issue = [buffer, type, op, plan_root](Communicator& comm) {
      return comm.ireduce(nullptr, buffer.data_ptr(), static_cast<size_t>(buffer.numel()), type, op, plan_root);
    };
  } else {
    CallInfo call;
    call.collective = UserCollective::Reduce;
    call.root = root;
    job.issue = allreduce_of(buffer, type, op, call);
  }
  job.after = [buffer, tensor, copy, is_root]() mutable {
    if (copy && is_root) tensor.copy_(buffer);
    return std::vector<at::Tensor>{tensor};
  };
  return enqueue(c10d::OpType::REDUCE, std::move(job));
}

// all_to_all_single. The runtime has no point-to-point operation, so every rank gathers every
// rank's whole input and keeps what is addressed to it: an all-gather (the plan's, or the
// all-reduce fallback) of world x the input, world times the bytes a direct exchange moves.
// First the ranks exchange their split sizes (a small all-gather), so that uneven splits work
// and each rank checks that what it expects is what is sent.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                   std::vector<int64_t>& output_split_sizes,
                                                                   std::vector<int64_t>& input_split_sizes,
                                                                   const c10d::AllToAllOptions& /*opts*/) {
  check_cpu_dense(input, "all_to_all_single");
  check_cpu_dense(output, "all_to_all_single");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "flexplan: all_to_all_single's output is ",
              output.scalar_type(), " but its input ", input.scalar_type());
  const int world = getSize();
  const size_t P = static_cast<size_t>(world);
  // Bytes per row of dimension 0: the unit of the split sizes.
  const auto row_bytes = [](const at::Tensor& t) -> int64_t {
    return t.dim() == 0 || t.size(0) == 0 ? 0 : static_cast<int64_t>(byte_size(t)) / t.size(0);
  };
  const auto splits = [world](const at::Tensor& t, const std::vector<int64_t>& given, const char* which) {
    if (given.empty()) {
      const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
      TORCH_CHECK(rows % world == 0, "flexplan: all_to_all_single's ", which, " has ", rows,
                  " rows, not a multiple of the world size ", world, " (pass split sizes)");
      return std::vector<int64_t>(static_cast<size_t>(world), rows / world);
    }
    TORCH_CHECK(given.size() == static_cast<size_t>(world), "flexplan: all_to_all_single: ", given.size(), " ",
                which, " split sizes for ", world, " ranks");
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    TORCH_CHECK(std::accumulate(given.begin(), given.end(), int64_t{0}) == rows, "flexplan: all_to_all_single's ",
                which, " split sizes do not add up to its ", rows, " rows");
    return given;
  };
  const std::vector<int64_t> in_rows = splits(input, input_split_sizes, "input");
  const std::vector<int64_t> out_rows = splits(output, output_split_sizes, "output");
  const int64_t in_row = row_bytes(input);
  const int64_t out_row = row_bytes(output);
  const bool nat = native(ir::Collective::AllGather);
  const int rank = getRank();
  const std::vector<int> plan_rank_of = plan_rank_of_;
  // block(g): where group rank g's data sits in a gathered buffer.
  const auto block = [nat, plan_rank_of](int g) { return nat ? plan_rank_of[static_cast<size_t>(g)] : g; };
  // Gathers `bytes` bytes from every rank: `own` (already at block(rank) natively) into `all`.
  const auto gather = [nat, rank, block](Communicator& comm, const at::Tensor& all, size_t bytes) {
    if (nat) return comm.iallgather(bytes_of(all) + bytes * static_cast<size_t>(block(rank)), all.data_ptr(), bytes, DataType::UInt8);
    CallInfo call;
    call.collective = UserCollective::AllGather;
    return comm.iallreduce(all.data_ptr(), all.data_ptr(), byte_size(all), DataType::UInt8, ReduceOp::Sum, call);
  };
  struct State {
    std::vector<int64_t> sent;  // [s * P + d]: bytes rank s sends to rank d
    at::Tensor gathered;
    size_t slot = 0;
  };
  auto state = std::make_shared<State>();
  const at::Tensor in = input;
  const at::Tensor out = output;
  Job job;
  job.issue = [state, in, in_rows, in_row, P, rank, block, gather](Communicator& comm) {
    // The split sizes (in bytes), blocking: every rank issues this and the data alike.
    const at::Tensor sizes = at::zeros({static_cast<int64_t>(P * P)}, at::kLong);
    int64_t* mine = sizes.data_ptr<int64_t>() + P * static_cast<size_t>(block(rank));
    for (size_t d = 0; d < P; ++d) mine[d] = in_rows[d] * in_row;
    gather(comm, sizes, P * sizeof(int64_t)).wait();
    state->sent.assign(P * P, 0);
    int64_t widest = 1;  // never empty: a zero-byte all-gather would be the only one of its kind
    for (size_t s = 0; s < P; ++s) {
      const int64_t* row = sizes.data_ptr<int64_t>() + P * static_cast<size_t>(block(static_cast<int>(s)));
      int64_t total = 0;
      for (size_t d = 0; d < P; ++d) {
        state->sent[s * P + d] = row[d];
        total += row[d];
      }
      widest = std::max(widest, total);
    }
    state->slot = static_cast<size_t>(widest);
    state->gathered = at::zeros({static_cast<int64_t>(state->slot * P)}, at::kByte);
    const at::Tensor own = in.contiguous();
    std::memcpy(bytes_of(state->gathered) + state->slot * static_cast<size_t>(block(rank)), own.data_ptr(), byte_size(in));
    return gather(comm, state->gathered, state->slot);
  };
  job.after = [state, out, out_rows, out_row, P, rank, block]() mutable {
    const size_t me = static_cast<size_t>(rank);
    for (size_t s = 0; s < P; ++s) {
      const int64_t expected = out_rows[s] * out_row;
      if (state->sent[s * P + me] != expected) {
        throw RuntimeError(fmt::format("flexplan: all_to_all_single: rank {} sends {} bytes to rank {}, whose "
                                       "output split sizes expect {}",
                                       s, state->sent[s * P + me], me, expected));
      }
    }
    const at::Tensor result = out.is_contiguous() ? out : contiguous_like(out);
    size_t at = 0;
    for (size_t s = 0; s < P; ++s) {
      int64_t offset = 0;
      for (size_t d = 0; d < me; ++d) offset += state->sent[s * P + d];
      const size_t length = static_cast<size_t>(state->sent[s * P + me]);
      std::memcpy(bytes_of(result) + at,
                  bytes_of(state->gathered) + state->slot * static_cast<size_t>(block(static_cast<int>(s))) + offset,
                  length);
      at += length;
    }
    if (!out.is_contiguous()) out.copy_(result);
    return std::vector<at::Tensor>{out};
  };
  return enqueue(c10d::OpType::ALLTOALL_BASE, std::move(job));
}

// A one-byte all-reduce: it completes on a rank only once every rank has joined it.
c10::intrusive_ptr<c10d::Work> ProcessGroupFlexplan::barrier(const c10d::BarrierOptions& /*opts*/) {
  Job job;
  CallInfo call;
  call.collective = UserCollective::Barrier;
  job.issue = allreduce_of(at::zeros({1}, at::kByte), DataType::UInt8, ReduceOp::Sum, call);
  job.after = [] { return std::vector<at::Tensor>{}; };
  return enqueue(c10d::OpType::BARRIER, std::move(job));
}

}  // namespace flexplan::torch_backend
