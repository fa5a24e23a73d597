// Stands in for libcudart and libnccl: defines exactly the CUDA runtime and NCCL functions the
// GPU backend calls (runtime/gpu/device_api.hpp lists them), over host memory and MPI
// processes, so that the same backend code runs in CI without a GPU. docs/gpu.md, "The emulation".
//
// Ordering rules kept from the real libraries:
// - a stream is a worker thread running its work in enqueue order; events and
//   cudaStreamWaitEvent order streams against each other; the host never waits unless it asks;
// - a communicator's calls match across ranks in the order they were issued (a per-communicator
//   sequence number, carried in the MPI tag), whatever the kind: a reduce issued against a
//   broadcast does not match;
// - the calls of one ncclGroupStart/End block progress together (non-blocking MPI, polled as
//   one set), separate blocks one after another in stream order;
// - a call completes on a rank only once every member of its communicator has issued it (each
//   call ends with a handshake), so an issue order that deadlocks on GPUs deadlocks here too;
//   a block that makes no progress for FLEXPLAN_EMULATION_TIMEOUT_MS (default 30000) fails its
//   stream and names the calls and the ranks they wait for.
// Communicator creation (ncclCommInitRank) is collective over MPI_COMM_WORLD, and MPI must run
// at MPI_THREAD_MULTIPLE (stream workers call MPI).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/half.hpp"

using Clock = std::chrono::steady_clock;

// ---- streams and events ----------------------------------------------------------------------

// A unit of stream work. `failed` is true once the stream has failed: the work then only keeps
// its bookkeeping (events still complete, carrying the error).
using StreamWork = std::function<cudaError_t(bool failed)>;

// How far a stream has got, kept apart from it so that work waiting on it outlives the stream.
struct StreamProgress {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t finished = 0;
  void wait_for(uint64_t target) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return finished >= target; });
  }
};

// CUDA's three kinds: the legacy default stream, created streams that synchronize with it
// (cudaStreamCreate, or no cudaStreamNonBlocking flag), and non-blocking ones, which do not.
enum class StreamKind { Legacy, Blocking, NonBlocking };

struct CUstream_st {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<StreamWork> queue;
  uint64_t enqueued = 0, finished = 0;
  cudaError_t error = cudaSuccess;
  bool stopping = false;
  const StreamKind kind;
  std::shared_ptr<StreamProgress> progress = std::make_shared<StreamProgress>();
  std::thread worker;

  explicit CUstream_st(StreamKind stream_kind) : kind(stream_kind), worker([this] { run(); }) {}
  ~CUstream_st() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    worker.join();
  }
  void enqueue(StreamWork work) {
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(work));
      ++enqueued;
    }
    changed.notify_all();
  }
  cudaError_t synchronize() {
    std::unique_lock lock(mutex);
    const uint64_t target = enqueued;
    changed.wait(lock, [&] { return finished >= target; });
    return error;
  }
  void run() {
    for (;;) {
      StreamWork work;
      bool failed = false;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        work = std::move(queue.front());
        queue.pop_front();
        failed = error != cudaSuccess;
      }
      const cudaError_t result = work(failed);
      {
        std::lock_guard lock(mutex);
        if (result != cudaSuccess && error == cudaSuccess) error = result;
        ++finished;
      }
      {
        std::lock_guard lock(progress->mutex);
        ++progress->finished;
      }
      changed.notify_all();
      progress->changed.notify_all();
    }
  }
};

// An event's state outlives its handle: work already enqueued (a record, a wait) keeps it alive,
// so destroying an event with pending work returns at once, as in CUDA.
struct EventState {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0, completed = 0;
  cudaError_t error = cudaSuccess;
  Clock::time_point when{};
};
struct CUevent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

namespace {

std::mutex g_registry_mutex;
std::map<uintptr_t, size_t> g_device_allocations;  // base -> size
std::map<uintptr_t, size_t> g_pinned_allocations;
int g_device = 0;
std::string g_last_nccl_error;

CUstream_st* default_stream() {
  static CUstream_st stream(StreamKind::Legacy);
  return &stream;
}
CUstream_st* resolve(cudaStream_t stream) { return stream ? stream : default_stream(); }

std::mutex g_streams_mutex;
std::vector<CUstream_st*> g_blocking_streams;
std::vector<CUstream_st*> g_created_streams;  // blocking and non-blocking: cudaDeviceSynchronize

// Where a stream has got to in its queue: what later work on another stream may wait for.
std::pair<std::shared_ptr<StreamProgress>, uint64_t> mark(CUstream_st* stream) {
  std::lock_guard lock(stream->mutex);
  return {stream->progress, stream->enqueued};
}

// Enqueues work with CUDA's implicit synchronization: work on the legacy default stream waits
// for the work enqueued before it on every blocking stream, and work on a blocking stream for
// the work enqueued before it on the legacy stream. Non-blocking streams wait for neither.
void submit(CUstream_st* stream, StreamWork work) {
  std::vector<std::pair<std::shared_ptr<StreamProgress>, uint64_t>> before;
  if (stream->kind == StreamKind::Legacy) {
    std::lock_guard lock(g_streams_mutex);
    for (CUstream_st* other : g_blocking_streams) before.push_back(mark(other));
  } else if (stream->kind == StreamKind::Blocking) {
    before.push_back(mark(default_stream()));
  }
  if (!before.empty())
    stream->enqueue([before = std::move(before)](bool) {
      for (const auto& [progress, target] : before) progress->wait_for(target);
      return cudaSuccess;
    });
  stream->enqueue(std::move(work));
}

bool inside(const std::map<uintptr_t, size_t>& allocations, uintptr_t p) {
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return false;
  --it;
  return p < it->first + std::max<size_t>(it->second, 1);
}

void* allocate(size_t bytes) { return std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256); }

long env_long(const char* name, long fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::strtol(value, nullptr, 10) : fallback;
}

// A cudaMemcpy from pageable host memory to the device returns once the source is staged, before
// the copy lands; the emulation makes it land this much later, so that work on a stream that
// does not wait for the legacy stream reads the old data, as it can on a GPU.
long pageable_copy_delay_us() {
  static const long delay = env_long("FLEXPLAN_EMULATED_COPY_DELAY_US", 2000);
  return delay;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = static_cast<int>(env_long("FLEXPLAN_EMULATED_GPUS", 8));
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int device) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (device < 0 || device >= count) return cudaErrorInvalidDevice;
  g_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (!bus_id || length <= 0) return cudaErrorInvalidValue;
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error (emulated)";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulated)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (emulated)";
    case cudaErrorNotReady: return "device not ready (emulated)";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated (emulated NCCL deadlock timeout)";
    default: return "unknown error (emulated)";
  }
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = allocate(bytes);
  if (!*pointer) return cudaErrorMemoryAllocation;
  std::lock_guard lock(g_registry_mutex);
  g_device_allocations[reinterpret_cast<uintptr_t>(*pointer)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void* pointer) {
  if (!pointer) return cudaSuccess;
  {
    std::lock_guard lock(g_registry_mutex);
    if (!g_device_allocations.erase(reinterpret_cast<uintptr_t>(pointer))) return cudaErrorInvalidValue;
  }
  std::free(pointer);
  return cudaSuccess;
}
// Pinned memory is limited on a real machine (the locked-memory limit, the host's memory):
// FLEXPLAN_EMULATED_PINNED_LIMIT (bytes, read at each call; unset or 0: none) caps the total.
cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  *pointer = nullptr;
  const long limit = env_long("FLEXPLAN_EMULATED_PINNED_LIMIT", 0);
  std::lock_guard lock(g_registry_mutex);
  if (limit > 0) {
    size_t total = bytes;
    for (const auto& [base, size] : g_pinned_allocations) total += size;
    if (total > static_cast<size_t>(limit)) return cudaErrorMemoryAllocation;
  }
  *pointer = allocate(bytes);
  if (!*pointer) return cudaErrorMemoryAllocation;
  g_pinned_allocations[reinterpret_cast<uintptr_t>(*pointer)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* pointer) {
  if (!pointer) return cudaSuccess;
  {
    std::lock_guard lock(g_registry_mutex);
    if (!g_pinned_allocations.erase(reinterpret_cast<uintptr_t>(pointer))) return cudaErrorInvalidValue;
  }
  std::free(pointer);
  return cudaSuccess;
}
// Stream-ordered: the address exists at once (later work on the stream may use it), the memory
// is released when the stream reaches the free.
cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t) { return cudaMalloc(pointer, bytes); }
cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  submit(resolve(stream), [pointer](bool) { return cudaFree(pointer); });
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* pointer) {
  std::memset(attributes, 0, sizeof *attributes);
  const auto p = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard lock(g_registry_mutex);
  if (inside(g_device_allocations, p)) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = g_device;
    attributes->devicePointer = const_cast<void*>(pointer);
  } else if (inside(g_pinned_allocations, p)) {
    attributes->type = cudaMemoryTypeHost;
    attributes->device = g_device;
    attributes->hostPointer = const_cast<void*>(pointer);
    attributes->devicePointer = const_cast<void*>(pointer);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->hostPointer = const_cast<void*>(pointer);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  const bool blocking = (flags & cudaStreamNonBlocking) == 0;
  *stream = new CUstream_st(blocking ? StreamKind::Blocking : StreamKind::NonBlocking);
  std::lock_guard lock(g_streams_mutex);
  if (blocking) g_blocking_streams.push_back(*stream);
  g_created_streams.push_back(*stream);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return cudaErrorInvalidValue;
  {
    std::lock_guard lock(g_streams_mutex);
    g_blocking_streams.erase(std::remove(g_blocking_streams.begin(), g_blocking_streams.end(), stream),
                             g_blocking_streams.end());
    g_created_streams.erase(std::remove(g_created_streams.begin(), g_created_streams.end(), stream),
                            g_created_streams.end());
  }
  stream->synchronize();
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return resolve(stream)->synchronize(); }
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  std::lock_guard lock(s->mutex);
  if (s->error != cudaSuccess) return s->error;
  return s->finished >= s->enqueued ? cudaSuccess : cudaErrorNotReady;
}
// Waits for the work enqueued so far on every stream.
cudaError_t cudaDeviceSynchronize(void) {
  std::vector<std::pair<std::shared_ptr<StreamProgress>, uint64_t>> marks{mark(default_stream())};
  {
    std::lock_guard lock(g_streams_mutex);
    for (CUstream_st* stream : g_created_streams) marks.push_back(mark(stream));
  }
  for (const auto& [progress, target] : marks) progress->wait_for(target);
  return default_stream()->synchronize();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  submit(resolve(stream), [=](bool failed) {
    if (!failed && bytes) std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
  return cudaSuccess;
}
// As CUDA's cudaMemcpy: from pageable host memory to the device it waits for the legacy stream,
// stages the source and returns before the copy lands (pageable_copy_delay_us); between device
// buffers it only enqueues; otherwise it returns when the copy is done.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  bool src_on_device, src_pinned, dst_on_device;
  {
    std::lock_guard lock(g_registry_mutex);
    src_on_device = inside(g_device_allocations, reinterpret_cast<uintptr_t>(src));
    src_pinned = inside(g_pinned_allocations, reinterpret_cast<uintptr_t>(src));
    dst_on_device = inside(g_device_allocations, reinterpret_cast<uintptr_t>(dst));
  }
  if (dst_on_device && src_on_device) return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  if (dst_on_device && !src_pinned && bytes > 0) {
    const cudaError_t before = default_stream()->synchronize();
    if (before != cudaSuccess) return before;
    auto staged = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(src),
                                                           static_cast<const std::byte*>(src) + bytes);
    submit(default_stream(), [dst, staged](bool failed) {
      std::this_thread::sleep_for(std::chrono::microseconds(pageable_copy_delay_us()));
      if (!failed) std::memcpy(dst, staged->data(), staged->size());
      return cudaSuccess;
    });
    return cudaSuccess;
  }
  cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  return default_stream()->synchronize();
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  submit(resolve(stream), [=](bool failed) {
    if (!failed) std::memset(dst, value, bytes);
    return cudaSuccess;
  });
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  submit(resolve(stream), [=](bool failed) {
    if (!failed) fn(user_data);
    return cudaSuccess;
  });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidValue;
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::shared_ptr<EventState> state = event->state;
  uint64_t generation;
  {
    std::lock_guard lock(state->mutex);
    generation = ++state->recorded;
  }
  CUstream_st* s = resolve(stream);
  submit(s, [state, generation, s](bool failed) {
    cudaError_t stream_error = cudaSuccess;
    if (failed) {
      std::lock_guard stream_lock(s->mutex);
      stream_error = s->error;
    }
    std::lock_guard lock(state->mutex);
    state->completed = std::max(state->completed, generation);
    state->when = Clock::now();
    if (failed) state->error = stream_error;
    state->changed.notify_all();
    return cudaSuccess;
  });
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  EventState& state = *event->state;
  std::lock_guard lock(state.mutex);
  if (state.completed < state.recorded) return cudaErrorNotReady;
  return state.error;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  EventState& state = *event->state;
  std::unique_lock lock(state.mutex);
  state.changed.wait(lock, [&] { return state.completed >= state.recorded; });
  return state.error;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaEventQuery(start) != cudaSuccess || cudaEventQuery(end) != cudaSuccess) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(end->state->when - start->state->when).count();
  return cudaSuccess;
}
// The stream waits for the work the event's latest record (at this call) stands for.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  std::shared_ptr<EventState> state = event->state;
  uint64_t generation;
  {
    std::lock_guard lock(state->mutex);
    generation = state->recorded;
  }
  submit(resolve(stream), [state, generation](bool failed) {
    if (failed) return cudaSuccess;
    std::unique_lock lock(state->mutex);
    state->changed.wait(lock, [&] { return state->completed >= generation; });
    return state->error;
  });
  return cudaSuccess;
}

}  // extern "C"

// ---- NCCL ------------------------------------------------------------------------------------

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 0;
  std::vector<int> world_ranks;  // of the members, by rank in this communicator
  uint64_t next_sequence = 0;    // calls issued so far: the matching order
  ncclResult_t async_error = ncclSuccess;
  std::mutex mutex;
  std::condition_variable idle;
  int in_flight = 0;  // calls issued, not yet finished
};

namespace {

enum class CallKind { Reduce, Broadcast };

struct Call {
  CallKind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  ncclComm* comm;
  uint64_t sequence;
  cudaStream_t stream;
};

thread_local int t_group_depth = 0;
thread_local std::vector<Call> t_group;

size_t type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

template <typename T>
T combine_one(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd:
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      } else {
        return a * b;
      }
    case ncclMin: return std::min(a, b);
    case ncclMax: return std::max(a, b);
    default:
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      } else {
        return a + b;
      }
  }
}

template <typename T>
void combine_typed(void* acc, const void* in, size_t n, ncclRedOp_t op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < n; ++i) a[i] = combine_one(a[i], b[i], op);
}

// acc = acc op in, element-wise; 16-bit floats widen, combine in float and round back.
void combine(void* acc, const void* in, size_t n, ncclDataType_t type, ncclRedOp_t op) {
  switch (type) {
    case ncclInt8: return combine_typed<int8_t>(acc, in, n, op);
    case ncclUint8: return combine_typed<uint8_t>(acc, in, n, op);
    case ncclInt32: return combine_typed<int32_t>(acc, in, n, op);
    case ncclUint32: return combine_typed<uint32_t>(acc, in, n, op);
    case ncclInt64: return combine_typed<int64_t>(acc, in, n, op);
    case ncclUint64: return combine_typed<uint64_t>(acc, in, n, op);
    case ncclFloat32: return combine_typed<float>(acc, in, n, op);
    case ncclFloat64: return combine_typed<double>(acc, in, n, op);
    case ncclFloat16: case ncclBfloat16: {
      auto* a = static_cast<uint16_t*>(acc);
      const auto* b = static_cast<const uint16_t*>(in);
      const bool f16 = type == ncclFloat16;
      for (size_t i = 0; i < n; ++i) {
        const float x = f16 ? flexplan::half::f16_to_float(a[i]) : flexplan::half::bf16_to_float(a[i]);
        const float y = f16 ? flexplan::half::f16_to_float(b[i]) : flexplan::half::bf16_to_float(b[i]);
        const float r = combine_one(x, y, op);
        a[i] = f16 ? flexplan::half::float_to_f16(r) : flexplan::half::float_to_bf16(r);
      }
      return;
    }
    default: return;
  }
}

std::string call_name(const Call& call) {
  char text[256];
  std::snprintf(text, sizeof text, "%s #%llu (root %d, count %zu)",
                call.kind == CallKind::Reduce ? "ncclReduce" : "ncclBroadcast",
                static_cast<unsigned long long>(call.sequence), call.root, call.count);
  return text;
}

std::string members_text(const ncclComm& comm) {
  std::string out = "{";
  for (size_t i = 0; i < comm.world_ranks.size(); ++i)
    out += (i ? "," : "") + std::to_string(comm.world_ranks[i]);
  return out + "}";
}

int tag_base(uint64_t sequence) {
  static const int tag_ub = [] {
    int* value = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag);
    return flag && value ? *value : 32767;
  }();
  return static_cast<int>(sequence % static_cast<uint64_t>(tag_ub / 4)) * 4;
}

// One call's progress on this rank. Every call ends with a handshake so that it completes only
// once all members issued it. Reduce: members send to the root, which folds the contributions
// in rank order and then releases every member. Broadcast: the root sends to every member,
// each acknowledges receipt, and the root finishes on the last acknowledgement.
struct Progress {
  Call call;
  int phase = 0;  // 0: first exchange, 1: handshake, 2: done
  std::vector<MPI_Request> requests;
  std::vector<int> peers;  // the rank each request talks to, for the deadlock report
  std::vector<std::vector<char>> contributions;
  char handshake = 0;
  std::vector<char> handshakes;
  std::string error;

  size_t bytes() const { return call.count * type_size(call.type); }

  void start() {
    ncclComm& comm = *call.comm;
    const int tag = tag_base(call.sequence) + (call.kind == CallKind::Reduce ? 0 : 2);
    const int size = static_cast<int>(bytes());
    if (comm.size == 1) {
      if (call.recv != call.send) std::memmove(call.recv, call.send, bytes());
      phase = 2;
      return;
    }
    if (call.kind == CallKind::Reduce) {
      if (comm.rank == call.root) {
        contributions.assign(static_cast<size_t>(comm.size), {});
        for (int r = 0; r < comm.size; ++r) {
          if (r == call.root) continue;
          contributions[static_cast<size_t>(r)].resize(bytes());
          post_receive(contributions[static_cast<size_t>(r)].data(), size, r, tag);
        }
      } else {
        post_send(call.send, size, call.root, tag);
        post_receive(&handshake, 1, call.root, tag + 1);
      }
    } else {
      if (comm.rank == call.root) {
        if (call.recv != call.send) std::memmove(call.recv, call.send, bytes());
        handshakes.assign(static_cast<size_t>(comm.size), 0);
        for (int r = 0; r < comm.size; ++r)
          if (r != call.root) post_send(call.send, size, r, tag);
      } else {
        post_receive(call.recv, size, call.root, tag);
      }
    }
  }

  void post_send(const void* data, int bytes, int peer, int tag) {
    requests.emplace_back();
    peers.push_back(peer);
    MPI_Isend(data, bytes, MPI_BYTE, peer, tag, call.comm->mpi, &requests.back());
  }
  void post_receive(void* data, int bytes, int peer, int tag) {
    requests.emplace_back();
    peers.push_back(peer);
    MPI_Irecv(data, bytes, MPI_BYTE, peer, tag, call.comm->mpi, &requests.back());
  }

  // Advances; true when it moved (a phase finished).
  bool advance() {
    if (phase == 2) return false;
    int done = 0;
    std::vector<MPI_Status> statuses(requests.size());
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
    if (!done) return false;
    ncclComm& comm = *call.comm;
    const int tag = tag_base(call.sequence) + (call.kind == CallKind::Reduce ? 0 : 2);
    // A message of another length means the members disagree on the count.
    for (size_t i = 0; i < statuses.size() && phase == 0; ++i) {
      const bool is_receive = (call.kind == CallKind::Reduce) == (comm.rank == call.root);
      if (!is_receive) continue;
      int received = 0;
      MPI_Get_count(&statuses[i], MPI_BYTE, &received);
      if (static_cast<size_t>(received) != bytes() && error.empty())
        error = call_name(call) + ": rank " + std::to_string(comm.world_ranks[static_cast<size_t>(peers[i])]) +
                " sent " + std::to_string(received) + " bytes, expected " + std::to_string(bytes()) +
                " (the members disagree on the count)";
    }
    requests.clear();
    peers.clear();
    if (phase == 1) {
      phase = 2;
      return true;
    }
    phase = 1;
    if (call.kind == CallKind::Reduce) {
      if (comm.rank == call.root) {
        // Fold in rank order: rank 0's contribution first.
        std::vector<char> acc;
        for (int r = 0; r < comm.size; ++r) {
          const char* in = r == call.root ? static_cast<const char*>(call.send)
                                          : contributions[static_cast<size_t>(r)].data();
          if (r == 0) acc.assign(in, in + bytes());
          else combine(acc.data(), in, call.count, call.type, call.op);
        }
        if (bytes()) std::memcpy(call.recv, acc.data(), bytes());
        contributions.clear();
        for (int r = 0; r < comm.size; ++r)
          if (r != call.root) post_send(&handshake, 1, r, tag + 1);
      }
      // Members: the release has arrived.
      else {
        phase = 2;
      }
    } else {
      if (comm.rank == call.root) {
        for (int r = 0; r < comm.size; ++r)
          if (r != call.root) post_receive(&handshakes[static_cast<size_t>(r)], 1, r, tag + 1);
      } else {
        post_send(&handshake, 1, call.root, tag + 1);
      }
    }
    return true;
  }

  std::string waiting_for() const {
    std::vector<int> ranks;
    for (int peer : peers) ranks.push_back(call.comm->world_ranks[static_cast<size_t>(peer)]);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out;
    for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
    return out;
  }
};

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Runs one group's calls on its stream's worker: all progress together until done, or until
// nothing moved for the timeout.
cudaError_t run_group(std::vector<Call> calls, bool failed) {
  const auto finish = [&] {
    for (const Call& call : calls) {
      std::lock_guard lock(call.comm->mutex);
      --call.comm->in_flight;
      call.comm->idle.notify_all();
    }
  };
  if (failed) {
    finish();
    return cudaSuccess;
  }
  std::vector<Progress> progress;
  for (const Call& call : calls) {
    progress.emplace_back();
    progress.back().call = call;
  }
  for (Progress& p : progress) p.start();
  const auto timeout = std::chrono::milliseconds(env_long("FLEXPLAN_EMULATION_TIMEOUT_MS", 30000));
  auto last_progress = Clock::now();
  int idle_rounds = 0;
  std::string error;
  for (;;) {
    bool moved = false, all_done = true;
    for (Progress& p : progress) {
      moved = p.advance() || moved;
      all_done = all_done && p.phase == 2;
      if (!p.error.empty() && error.empty()) error = p.error;
    }
    if (!error.empty() || all_done) break;
    if (moved) {
      last_progress = Clock::now();
      idle_rounds = 0;
    } else if (Clock::now() - last_progress > timeout) {
      error = "deadlock: a group of " + std::to_string(calls.size()) + " call(s) on world rank " +
              std::to_string(world_rank()) + " made no progress for " +
              std::to_string(timeout.count()) + " ms:";
      for (const Progress& p : progress)
        if (p.phase != 2)
          error += " " + call_name(p.call) + " on the communicator of world ranks " +
                   members_text(*p.call.comm) + " waits for world rank(s) " + p.waiting_for() + ";";
      error += " the ranks issued their calls in orders that do not match, which would deadlock on GPUs too";
      // Abandon the exchanges: the communicator is unusable from here on.
      for (Progress& p : progress)
        for (MPI_Request& r : p.requests) {
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
      break;
    } else if (++idle_rounds < 200) {
      std::this_thread::yield();
    } else {
      // Oversubscribed ranks (tests run 8 on 2 cores) must not starve the peers they wait for.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (!error.empty()) {
    {
      std::lock_guard lock(g_registry_mutex);
      g_last_nccl_error = error;
    }
    for (const Call& call : calls) call.comm->async_error = ncclSystemError;
    std::fprintf(stderr, "flexplan NCCL emulation: %s\n", error.c_str());
  }
  finish();
  return error.empty() ? cudaSuccess : cudaErrorLaunchTimeout;
}

ncclResult_t submit(std::vector<Call> calls) {
  if (calls.empty()) return ncclSuccess;
  for (const Call& call : calls)
    if (call.stream != calls.front().stream) {
      std::lock_guard lock(g_registry_mutex);
      g_last_nccl_error = "a group's calls must use one stream in the emulation";
      return ncclInvalidUsage;
    }
  CUstream_st* stream = resolve(calls.front().stream);
  submit(stream, [calls = std::move(calls)](bool failed) { return run_group(calls, failed); });
  return ncclSuccess;
}

ncclResult_t issue(Call call) {
  if (!call.comm) return ncclInvalidArgument;
  if (call.root < 0 || call.root >= call.comm->size || type_size(call.type) == 0) return ncclInvalidArgument;
  if (call.count * type_size(call.type) > static_cast<size_t>(std::numeric_limits<int>::max())) {
    std::lock_guard lock(g_registry_mutex);
    g_last_nccl_error = "the emulation moves at most 2 GiB per call";
    return ncclInvalidArgument;
  }
  {
    std::lock_guard lock(call.comm->mutex);
    call.sequence = call.comm->next_sequence++;
    ++call.comm->in_flight;
  }
  if (t_group_depth > 0) {
    t_group.push_back(call);
    return ncclSuccess;
  }
  return submit({call});
}

ncclResult_t wrap(MPI_Comm mpi, ncclComm_t* out) {
  auto* comm = new ncclComm;
  comm->mpi = mpi;
  MPI_Comm_rank(mpi, &comm->rank);
  MPI_Comm_size(mpi, &comm->size);
  MPI_Group group, world;
  MPI_Comm_group(mpi, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(comm->size));
  for (int i = 0; i < comm->size; ++i) ranks[static_cast<size_t>(i)] = i;
  comm->world_ranks.resize(ranks.size());
  MPI_Group_translate_ranks(group, comm->size, ranks.data(), world, comm->world_ranks.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  *out = comm;
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = static_cast<int>(env_long("FLEXPLAN_EMULATED_NCCL_VERSION", NCCL_VERSION_CODE));
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error (emulated NCCL)";
    case ncclInvalidArgument: return "invalid argument (emulated NCCL)";
    case ncclInvalidUsage: return "invalid usage (emulated NCCL)";
    case ncclSystemError: return "system error (emulated NCCL)";
    default: return "error (emulated NCCL)";
  }
}
const char* ncclGetLastError(ncclComm_t) {
  static thread_local std::string copy;
  std::lock_guard lock(g_registry_mutex);
  copy = g_last_nccl_error;
  return copy.c_str();
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::random_device device;
  for (char& c : id->internal) c = static_cast<char>(device());
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::lock_guard lock(g_registry_mutex);
    g_last_nccl_error = "the NCCL emulation needs MPI initialized with MPI_THREAD_MULTIPLE";
    return ncclInvalidUsage;
  }
  uint32_t color = 2166136261u;  // FNV-1a of the id: the processes holding it form the communicator
  for (char c : id.internal) color = (color ^ static_cast<uint8_t>(c)) * 16777619u;
  MPI_Comm mpi;
  MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color & 0x7fffffff), rank, &mpi);
  int size = 0;
  MPI_Comm_size(mpi, &size);
  if (size != nranks) {
    MPI_Comm_free(&mpi);
    std::lock_guard lock(g_registry_mutex);
    g_last_nccl_error = "ncclCommInitRank: " + std::to_string(size) + " processes hold the id, nranks says " +
                        std::to_string(nranks);
    return ncclInvalidArgument;
  }
  return wrap(mpi, out);
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* out, ncclConfig_t*) {
  MPI_Comm mpi;
  MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &mpi);
  if (mpi == MPI_COMM_NULL) {
    *out = nullptr;
    return ncclSuccess;
  }
  return wrap(mpi, out);
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  {
    std::unique_lock lock(comm->mutex);
    comm->idle.wait(lock, [&] { return comm->in_flight == 0; });
  }
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->size;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  *error = comm->async_error;
  return ncclSuccess;
}
ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Call> calls;
  calls.swap(t_group);
  return submit(std::move(calls));
}
ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return issue(Call{CallKind::Reduce, send, recv, count, type, op, root, comm, 0, stream});
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return issue(Call{CallKind::Broadcast, send, recv, count, type, ncclSum, root, comm, 0, stream});
}

}  // extern "C"
