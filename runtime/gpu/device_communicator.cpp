// The GPU backend's communicator: plan load and checks, sub-communicator creation, and the
// replay of a rank's NCCL program on the internal stream (device_communicator.hpp).
#include "runtime/gpu/device_communicator.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"
#include "runtime/gpu/device_kernels.hpp"
#include "runtime/gpu/load_checks.hpp"
#include "ir/collective_contract.hpp"
#include "runtime/element_map.hpp"

namespace flexplan::gpu {

struct DeviceOperation {
  cudaEvent_t done = nullptr;
  uint64_t sequence = 0;
  std::string what;  // for error messages
  ~DeviceOperation() {
    if (done) cudaEventDestroy(done);
  }
};

namespace {

int env_int(const char* name, int fallback, std::vector<std::string>& errors) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < -1 || parsed > (1 << 30)) {
    errors.push_back(fmt::format("{}='{}': expected an integer from -1 to 2^30", name, value));
    return fallback;
  }
  return static_cast<int>(parsed);
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("?");
}

// Throws the async error of a failed operation, with NCCL's own words where it has any.
[[noreturn]] void fail(const DeviceOperation& op, cudaError_t error) {
  const char* detail = ncclGetLastError(nullptr);
  throw RuntimeError(fmt::format("{} failed: {}{}{}", op.what, cudaGetErrorString(error),
                                 detail && *detail ? ": " : "", detail ? detail : ""));
}

}  // namespace

int default_device(MPI_Comm comm, int devices, int requested) {
  int rank = 0, local_rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  return requested >= 0 ? requested : local_rank % std::max(devices, 1);
}

DeviceOptions DeviceOptions::from_env() {
  DeviceOptions options;
  options.device = env_int("FLEXPLAN_DEVICE", -1, options.errors);
  if (const char* hash = std::getenv("FLEXPLAN_TOPOLOGY_HASH")) options.topology_hash = hash;
  options.check_order_up_to = env_int("FLEXPLAN_CHECK_ORDER_UP_TO", options.check_order_up_to, options.errors);
  return options;
}

bool DeviceRequest::test() {
  if (!operation_) return true;
  const cudaError_t result = cudaEventQuery(operation_->done);
  if (result == cudaErrorNotReady) return false;
  if (result != cudaSuccess) fail(*operation_, result);
  return true;
}

void DeviceRequest::wait() {
  if (!operation_) return;
  const cudaError_t result = cudaEventSynchronize(operation_->done);
  if (result != cudaSuccess) fail(*operation_, result);
}

cudaEvent_t DeviceRequest::event() const { return operation_ ? operation_->done : nullptr; }
uint64_t DeviceRequest::sequence() const { return operation_ ? operation_->sequence : 0; }

DeviceCommunicator::DeviceCommunicator(const std::string& plan_path, MPI_Comm comm, DeviceOptions options)
    : options_(std::move(options)) {
  std::string load_error;
  try {
    plan_ = ir::read_plan_file(plan_path);
    ir::verify_plan(plan_);
  } catch (const std::exception& e) {
    load_error = fmt::format("plan {}: {}", plan_path, e.what());
  }
  create(comm, std::move(load_error));
}

DeviceCommunicator::DeviceCommunicator(ir::Plan plan, MPI_Comm comm, DeviceOptions options)
    : plan_(std::move(plan)), options_(std::move(options)) {
  std::string load_error;
  try {
    ir::verify_plan(plan_);
  } catch (const std::exception& e) {
    load_error = fmt::format("plan: {}", e.what());
  }
  create(comm, std::move(load_error));
}

void DeviceCommunicator::create(MPI_Comm comm, std::string load_error) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);

  // What this rank loaded and where it runs.
  LoadRecord record;
  record.local_error = std::move(load_error);
  // A malformed setting is reported like a plan this rank could not load: on every rank.
  if (!options_.errors.empty()) {
    record.local_error = fmt::format("configuring the communicator failed: {}", fmt::join(options_.errors, "; "));
  }
  ncclGetVersion(&record.nccl_version);
  nccl_version_ = record.nccl_version;
  if (record.local_error.empty()) {
    record.plan_world_size = plan_.world_size;
    record.plan_fingerprint = ir::plan_fingerprint(plan_);
    record.topology_name = plan_.topology_name;
    record.topology_hash = plan_.topology_hash;
  }
  record.host = host_name();
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  // Collective, so every rank calls it whatever its devices.
  const int chosen = default_device(comm, counted == cudaSuccess ? devices : 0, options_.device);
  if (counted != cudaSuccess || devices == 0) {
    if (record.local_error.empty())
      record.local_error = fmt::format("no CUDA device on host {}: {}", record.host, cudaGetErrorString(counted));
  } else {
    device_ = chosen;
    char bus[32] = {};
    if (device_ >= devices) {
      if (record.local_error.empty())
        record.local_error = fmt::format("device {} requested, host {} has {} (FLEXPLAN_DEVICE)", device_,
                                         record.host, devices);
    } else if (cudaSetDevice(device_) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, device_) != cudaSuccess) {
      if (record.local_error.empty()) record.local_error = fmt::format("cannot use device {}", device_);
    }
    record.device = device_;
    record.device_bus_id = bus;
  }

  // Every rank sees every record and reaches the same verdict.
  const std::vector<char> mine = encode(record);
  std::vector<char> all(mine.size() * static_cast<size_t>(size_));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), static_cast<int>(mine.size()),
                MPI_BYTE, comm);
  std::vector<LoadRecord> records;
  for (int r = 0; r < size_; ++r) records.push_back(decode(all.data() + static_cast<size_t>(r) * mine.size()));
  LoadExpectations expect;
  expect.job_size = size_;
  expect.min_nccl_version = options_.min_nccl_version;
  expect.topology_hash = options_.topology_hash;
  if (std::string reason = check_load_records(records, expect); !reason.empty()) throw InputError(reason);

  table_ = codegen::build_nccl_comm_table(plan_);
  programs_.resize(plan_.schedules.size());
  if (size_ <= options_.check_order_up_to) {
    for (size_t s = 0; s < plan_.schedules.size(); ++s) {
      std::vector<codegen::NcclRankProgram> everyone;
      for (int r = 0; r < size_; ++r) everyone.push_back(codegen::lower_nccl_rank(plan_.schedules[s], table_, r));
      if (std::string problem = codegen::check_nccl_issue_order(everyone, table_); !problem.empty())
        throw InputError(fmt::format("{}: {}", ir::schedule_label(plan_, s), problem));
    }
  }

  const auto start = std::chrono::steady_clock::now();
  ncclUniqueId id{};
  if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
  check_nccl(ncclCommInitRank(&parent_, size_, id, rank_), "ncclCommInitRank");
  comms_.assign(table_.groups.size(), nullptr);
  for (uint32_t split = 0; split < table_.splits; ++split) {
    ncclComm_t made = nullptr;
    check_nccl(ncclCommSplit(parent_, table_.color(split, rank_), rank_, &made, nullptr), "ncclCommSplit", parent_);
    const int32_t group = table_.group_of(split, rank_);
    if (group >= 0) comms_[static_cast<size_t>(group)] = made;
  }
  init_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

DeviceCommunicator::~DeviceCommunicator() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  for (ncclComm_t c : comms_)
    if (c) ncclCommDestroy(c);
  if (parent_) ncclCommDestroy(parent_);
}

size_t DeviceCommunicator::local_communicators() const {
  size_t n = parent_ ? 1 : 0;
  for (ncclComm_t c : comms_) n += c != nullptr;
  return n;
}

void DeviceCommunicator::force_algorithm(const std::string& algorithm) {
  const std::vector<std::string> present = ir::algorithms_of(plan_, ir::Collective::AllReduce);
  if (!algorithm.empty() && std::find(present.begin(), present.end(), algorithm) == present.end())
    throw RuntimeError(fmt::format("the plan has no allreduce schedule of algorithm '{}' (it has: {})",
                                   algorithm, fmt::join(present, ", ")));
  forced_algorithm_ = algorithm;
}

const codegen::NcclRankProgram& DeviceCommunicator::program_for(size_t schedule_index) {
  auto& slot = programs_[schedule_index];
  if (!slot)
    slot = std::make_unique<codegen::NcclRankProgram>(
        codegen::lower_nccl_rank(plan_.schedules[schedule_index], table_, rank_));
  return *slot;
}

std::shared_ptr<DeviceOperation> DeviceCommunicator::enqueue(const Call& in, cudaStream_t stream) {
  const std::string name(ir::to_string(in.collective));
  const size_t element = size_of(in.type);
  if (element == 0) throw InputError(fmt::format("flexplan device {}: unknown data type", name));
  const bool rooted = ir::has_root(in.collective);
  if (rooted && (in.root < 0 || in.root >= size_)) {
    throw InputError(fmt::format("flexplan device {}: root {} is not a rank of the {} ranks", name, in.root, size_));
  }
  // Each rank's block where the collective is sharded, and the elements the schedule spans.
  std::vector<uint64_t> counts;
  uint64_t total = in.count;
  if (ir::has_shards(in.collective)) {
    if (!in.counts.empty() && in.counts.size() != static_cast<size_t>(size_)) {
      throw InputError(fmt::format("flexplan device {}: {} per-rank counts for {} ranks", name, in.counts.size(), size_));
    }
    counts.assign(static_cast<size_t>(size_), in.count);
    if (!in.counts.empty()) counts.assign(in.counts.begin(), in.counts.end());
    total = 0;
    for (const uint64_t c : counts) {
      if (__builtin_add_overflow(total, c, &total)) throw InputError("flexplan device " + name + ": the counts overflow");
    }
  }
  if (total > std::numeric_limits<uint64_t>::max() / element) {
    throw InputError(fmt::format("flexplan device {}: count {} overflows the byte size", name, total));
  }
  const uint64_t bytes = total * element;
  // The schedule: the forced algorithm's (serving this size if several do, else the plan's).
  const std::string_view forced =
      in.collective == ir::Collective::AllReduce ? std::string_view(forced_algorithm_) : std::string_view();
  const auto found = ir::find_schedule(plan_, {in.collective, bytes, rooted ? in.root : 0, forced});
  if (!found) {
    throw InputError(fmt::format("flexplan device: the plan has no {} schedule{} for {} bytes; plan it with "
                                 "`flexplan TOPOLOGY --collectives {}{}`", name,
                                 rooted ? fmt::format(" from root {}", in.root) : "", bytes, name,
                                 rooted ? fmt::format(" --roots {}", in.root) : ""));
  }
  const size_t index = *found;
  const ir::Schedule& schedule = plan_.schedules[index];
  ElementMap map;
  if (counts.empty() || total == 0) {
    map.set_uniform(ir::expanded_units(schedule), total);
  } else if (const std::string why = map.set_sharded(schedule, size_, counts); !why.empty()) {
    throw InputError(fmt::format("flexplan device {}: {}", name, why));
  }
  const uint64_t my_count = counts.empty() ? total : counts[static_cast<size_t>(rank_)];
  uint64_t my_begin = 0;
  for (int32_t r = 0; r < rank_ && !counts.empty(); ++r) my_begin += counts[static_cast<size_t>(r)];
  const auto need = [&](const void* buffer, uint64_t elements, const char* which) {
    if (elements > 0 && buffer == nullptr)
      throw InputError(fmt::format("flexplan device {}: null {} buffer for {} elements", name, which, elements));
  };
  const bool root_here = rooted && in.root == rank_;
  switch (in.collective) {
    case ir::Collective::AllReduce:
    case ir::Collective::AllGather:
    case ir::Collective::Broadcast: need(in.recv, total, "receive"); break;
    case ir::Collective::ReduceScatter:
      need(in.send, total, "send");
      need(in.recv, my_count, "receive");
      break;
    case ir::Collective::Reduce:
      need(in.send ? in.send : in.recv, total, "send");
      if (root_here) need(in.recv, total, "receive");
      break;
  }
  const codegen::NcclRankProgram& program = program_for(index);

  auto operation = std::make_shared<DeviceOperation>();
  operation->sequence = next_sequence_++;
  const bool combines = ir::combines(in.collective);
  operation->what = fmt::format("device {}{} #{} ({}, {} x {}{}{}) on rank {}", name,
                                rooted ? fmt::format(" (root {})", in.root) : "", operation->sequence,
                                schedule.algorithm, total, to_string(in.type), combines ? ", " : "",
                                combines ? to_string(in.op) : std::string_view{}, rank_);

  // The internal stream starts once the caller's stream has reached this point.
  cudaEvent_t ready;
  check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(ready, stream), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(ready);

  // Where the schedule runs in place: the receive buffer where the collective's result is the
  // whole of it, else working memory (a reduce-scatter's, a reduce's off its root).
  const auto copy = [&](void* to, const void* from, uint64_t elements) {
    if (to != from && elements > 0)
      check_cuda(cudaMemcpyAsync(to, from, elements * element, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  };
  char* work = nullptr;
  const bool in_work = in.collective == ir::Collective::ReduceScatter ||
                       (in.collective == ir::Collective::Reduce && !root_here);
  if (in_work && bytes > 0)
    check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&work), bytes, stream_), "cudaMallocAsync");
  char* buffer = in_work ? work : static_cast<char*>(in.recv);
  switch (in.collective) {
    case ir::Collective::AllReduce:
    case ir::Collective::ReduceScatter:
    case ir::Collective::Reduce:
      if (in.send != nullptr) copy(buffer, in.send, total);
      else if (in_work) copy(buffer, in.recv, total);  // a reduce in place off the root
      break;
    case ir::Collective::AllGather:
      if (in.send != nullptr) copy(buffer + my_begin * element, in.send, my_count);
      break;
    case ir::Collective::Broadcast:
      if (root_here && in.send != nullptr) copy(buffer, in.send, total);
      break;
  }

  // Scratch for identity contributions and staged writes: the largest step's need.
  const auto elements = [&](uint64_t unit) { return map(unit); };
  size_t scratch_elements = 0;
  for (const codegen::NcclStep& step : program.steps) {
    size_t need_here = 0;
    for (const codegen::NcclCall& call : step.calls)
      need_here += (call.send_identity + call.stage_write) * (elements(call.unit_end) - elements(call.unit_begin));
    scratch_elements = std::max(scratch_elements, need_here);
  }
  char* scratch = nullptr;
  if (scratch_elements > 0)
    check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&scratch), scratch_elements * element, stream_),
               "cudaMallocAsync");

  const ncclDataType_t nccl_dtype = nccl_type(in.type);
  const ncclRedOp_t nccl_reduction = nccl_op(in.op);
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const codegen::NcclStep& step = program.steps[s];
    if (step.calls.empty()) continue;
    struct Prepared {
      const codegen::NcclCall* call;
      const void* send;
      void* recv;
      size_t count;
    };
    std::vector<Prepared> prepared;
    std::vector<Copy> copies;
    size_t used = 0;
    for (const codegen::NcclCall& call : step.calls) {
      const uint64_t first = elements(call.unit_begin), n = elements(call.unit_end) - first;
      if (n == 0) continue;  // the same on every rank: the mapping depends on the counts alone
      char* range = buffer + first * element;
      const void* call_send = range;
      void* call_recv = range;
      if (call.send_identity) {
        char* identity = scratch + used * element;
        used += n;
        fill_identity(identity, n, in.type, in.op, stream_);
        call_send = identity;
      }
      if (call.stage_write) {
        char* staged = scratch + used * element;
        used += n;
        call_recv = staged;
        copies.push_back({range, staged, n * element});
      }
      prepared.push_back({&call, call_send, call_recv, n});
    }
    if (prepared.empty()) continue;
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (const Prepared& p : prepared) {
      ncclComm_t c = comms_[static_cast<size_t>(p.call->comm)];
      const std::string where = fmt::format("{}, step {} op {}", operation->what, s, p.call->op_index);
      if (p.call->kind == codegen::NcclCallKind::Reduce)
        check_nccl(ncclReduce(p.send, p.recv, p.count, nccl_dtype, nccl_reduction, p.call->root, c, stream_),
                   ("ncclReduce in " + where).c_str(), c);
      else
        check_nccl(ncclBroadcast(p.send, p.recv, p.count, nccl_dtype, p.call->root, c, stream_),
                   ("ncclBroadcast in " + where).c_str(), c);
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    for (const Copy& c : copies)
      check_cuda(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  }
  if (scratch) check_cuda(cudaFreeAsync(scratch, stream_), "cudaFreeAsync");
  // This rank's result: the whole buffer, its block (reduce-scatter), or nothing (a reduce off
  // its root, a collective that only copies). avg divides it alone.
  if (in.collective == ir::Collective::ReduceScatter) copy(in.recv, work + my_begin * element, my_count);
  if (in.op == ReduceOp::Avg && combines) {
    if (in.collective == ir::Collective::AllReduce && total > 0) divide(in.recv, total, in.type, size_, stream_);
    if (in.collective == ir::Collective::ReduceScatter && my_count > 0)
      divide(in.recv, my_count, in.type, size_, stream_);
    if (in.collective == ir::Collective::Reduce && root_here && total > 0)
      divide(in.recv, total, in.type, size_, stream_);
  }
  if (work) check_cuda(cudaFreeAsync(work, stream_), "cudaFreeAsync");

  // The caller's stream continues once the operation is done.
  check_cuda(cudaEventCreateWithFlags(&operation->done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cuda(cudaEventRecord(operation->done, stream_), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream, operation->done, 0), "cudaStreamWaitEvent");
  return operation;
}

void DeviceCommunicator::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                   cudaStream_t stream) {
  iallreduce(send, recv, count, type, op, stream);
}

DeviceRequest DeviceCommunicator::iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                             cudaStream_t stream) {
  Call call;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.type = type;
  call.op = op;
  return DeviceRequest(enqueue(call, stream));
}

DeviceRequest DeviceCommunicator::ireduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                                                  ReduceOp op, cudaStream_t stream) {
  Call call;
  call.collective = ir::Collective::ReduceScatter;
  call.send = send;
  call.recv = recv;
  call.count = recv_count;
  call.type = type;
  call.op = op;
  return DeviceRequest(enqueue(call, stream));
}

DeviceRequest DeviceCommunicator::ireduce_scatter_v(const void* send, void* recv,
                                                    std::span<const uint64_t> recv_counts, DataType type,
                                                    ReduceOp op, cudaStream_t stream) {
  if (recv_counts.empty()) throw InputError("flexplan device reduce_scatter_v: no per-rank counts");
  Call call;
  call.collective = ir::Collective::ReduceScatter;
  call.send = send;
  call.recv = recv;
  call.counts = recv_counts;
  call.type = type;
  call.op = op;
  return DeviceRequest(enqueue(call, stream));
}

DeviceRequest DeviceCommunicator::iallgather(const void* send, void* recv, size_t send_count, DataType type,
                                             cudaStream_t stream) {
  Call call;
  call.collective = ir::Collective::AllGather;
  call.send = send;
  call.recv = recv;
  call.count = send_count;
  call.type = type;
  return DeviceRequest(enqueue(call, stream));
}

DeviceRequest DeviceCommunicator::iallgather_v(const void* send, void* recv, std::span<const uint64_t> counts,
                                               DataType type, cudaStream_t stream) {
  if (counts.empty()) throw InputError("flexplan device allgather_v: no per-rank counts");
  Call call;
  call.collective = ir::Collective::AllGather;
  call.send = send;
  call.recv = recv;
  call.counts = counts;
  call.type = type;
  return DeviceRequest(enqueue(call, stream));
}

DeviceRequest DeviceCommunicator::ibroadcast(const void* send, void* recv, size_t count, DataType type, int root,
                                             cudaStream_t stream) {
  Call call;
  call.collective = ir::Collective::Broadcast;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.type = type;
  call.root = root;
  return DeviceRequest(enqueue(call, stream));
}

DeviceRequest DeviceCommunicator::ireduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                          int root, cudaStream_t stream) {
  Call call;
  call.collective = ir::Collective::Reduce;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.type = type;
  call.op = op;
  call.root = root;
  return DeviceRequest(enqueue(call, stream));
}

}  // namespace flexplan::gpu
