// The runtime's local arithmetic in CUDA kernels on pinned memory (device_arithmetic.hpp).
#include "runtime/gpu/device_arithmetic.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "runtime/gpu/device_api.hpp"
#include "runtime/gpu/device_kernels.hpp"

namespace flexplan::gpu {
namespace {
constexpr size_t kAlignment = 256;
constexpr size_t kMinGrowth = size_t{16} << 20;
}  // namespace

DeviceArithmetic::DeviceArithmetic(size_t arena_bytes, std::chrono::milliseconds reply_timeout)
    : reply_timeout_(reply_timeout) {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  watcher_ = std::thread([this, device] {
    cudaSetDevice(device);
    watch();
  });
  try {
    void* queue = nullptr;
    check_cuda(cudaMallocHost(&queue, sizeof(FoldQueue)), "cudaMallocHost (fold server queue)");
    queue_ = new (queue) FoldQueue{};
    void* arrivals = nullptr;
    check_cuda(cudaMalloc(&arrivals, sizeof(unsigned)), "cudaMalloc (fold server counter)");
    arrivals_ = static_cast<unsigned*>(arrivals);
    check_cuda(cudaMemsetAsync(arrivals_, 0, sizeof(unsigned), stream_), "cudaMemsetAsync");
    add_arena(std::max(arena_bytes, kAlignment));
    load_server();
  } catch (...) {
    release_all();
    throw;
  }
}

void DeviceArithmetic::load_server() {
  // CUDA loads a kernel at its first launch (lazy loading, CUDA 12's default), and loading may
  // wait for the whole device: inside an operation, while the staged path's stream is held by
  // the operation's server, that is a deadlock (seen on an H100). So the server runs once here,
  // told to stop before it starts.
  Served served = serve(stream_);
  const std::string why = served.error;
  end(served);
  check_cuda(cudaStreamSynchronize(stream_), "loading the fold server");
  if (!why.empty()) throw RuntimeError("loading the fold server: " + why);
}

void DeviceArithmetic::release_all() {
  if (watcher_.joinable()) {
    {
      std::lock_guard lock(watch_mutex_);
      quitting_ = true;
    }
    watch_changed_.notify_all();
    watcher_.join();  // (it destroys the events it was given)
  }
  if (stream_) cudaStreamSynchronize(stream_);
  if (stream_) cudaStreamDestroy(stream_);
  for (const auto& [data, bytes] : arenas_) cudaFreeHost(data);
  arenas_.clear();
  if (arrivals_) cudaFree(arrivals_);
  if (queue_) cudaFreeHost(queue_);
  stream_ = nullptr;
  arrivals_ = nullptr;
  queue_ = nullptr;
}

DeviceArithmetic::~DeviceArithmetic() { release_all(); }

DeviceArithmetic::Served DeviceArithmetic::serve(cudaStream_t stream) {
  Served served;
  served.operation = operations_ + 1;
  if (served.operation == 0) served.operation = 1;  // (after 2^32 operations: 0 is never used)
  check_cuda(launch_fold_server(queue_, arrivals_, served.operation, stream), "launching the fold server");
  operations_ = served.operation;
  // Launched: from here on a failure is returned, not thrown, so that the server is still
  // ended in order (stopping it now would stop the operation before it too).
  cudaError_t result = cudaEventCreateWithFlags(&served.ended, cudaEventDisableTiming);
  if (result == cudaSuccess) {
    result = cudaEventRecord(served.ended, stream);
    if (result != cudaSuccess) {
      cudaEventDestroy(served.ended);
      served.ended = nullptr;
    }
  } else {
    served.ended = nullptr;
  }
  if (result != cudaSuccess)
    served.error = fmt::format("recording the fold server's event: {}", cudaGetErrorString(result));
  return served;
}

void DeviceArithmetic::watch() {
  std::unique_lock lock(watch_mutex_);
  for (;;) {
    std::vector<cudaEvent_t> retired;
    retired.swap(retired_);
    const cudaEvent_t event = watched_;
    if (quitting_ && retired.empty()) return;
    lock.unlock();
    // CUDA calls, which may wait behind another thread's device-wide synchronization: the
    // thread that runs the operation never depends on this one.
    for (cudaEvent_t e : retired) cudaEventDestroy(e);
    const cudaError_t state = event ? cudaEventQuery(event) : cudaErrorNotReady;
    lock.lock();
    // (end() stops watching before it lets the server return: past the server is a failure.)
    if (event && event == watched_ && state != cudaErrorNotReady && !stream_failed_) {
      stream_failure_ = state == cudaSuccess ? "went past the server" : cudaGetErrorString(state);
      stream_failed_ = true;
    }
    if (!quitting_ && retired_.empty()) watch_changed_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

std::string DeviceArithmetic::await(uint32_t& flag, uint32_t value, std::optional<std::chrono::milliseconds> deadline,
                                    const std::string& what) {
  std::atomic_ref<uint32_t> seen(flag);
  // Spin first (a fold takes microseconds), then yield, then sleep. No CUDA call: while the
  // server holds the stream, one could wait behind another thread's device-wide
  // synchronization, which waits for the server, which waits for this thread (seen on an H100).
  // A failed stream is seen by the watcher.
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t round = 0;; ++round) {
    if (at_or_after(seen.load(std::memory_order_acquire), value)) return "";
    if (stream_failed_.load(std::memory_order_acquire)) {
      std::lock_guard lock(watch_mutex_);
      return fmt::format("{}: the fold server's stream {}", what, stream_failure_);
    }
    if (round < 4096) continue;
    if (round < (1u << 16)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (deadline && round % 256 == 0 && std::chrono::steady_clock::now() - start > *deadline)
      return fmt::format("{}: no reply within {} ms", what, deadline->count());
  }
}

std::string DeviceArithmetic::begin(const Served& served) {
  active_ = served;
  in_operation_ = true;
  if (!served.error.empty()) return served.error;
  {
    std::lock_guard lock(watch_mutex_);
    watched_ = served.ended;
  }
  watch_changed_.notify_all();
  // (No deadline: the server starts when the caller's stream reaches it, which is the caller's.)
  return await(queue_->running, served.operation, std::nullopt,
               fmt::format("waiting for the fold server of operation {} to start", served.operation));
}

void DeviceArithmetic::end(Served& served) {
  {
    // The watcher stops watching first, and destroys the event: no CUDA call here either.
    std::lock_guard lock(watch_mutex_);
    if (watched_ == served.ended) watched_ = nullptr;
    if (served.ended) retired_.push_back(served.ended);
  }
  watch_changed_.notify_all();
  // Servers end in the order they were served, so `stop` only grows.
  std::atomic_ref<uint32_t>(queue_->stop).store(served.operation, std::memory_order_release);
  if (in_operation_ && active_.operation == served.operation) {
    active_ = Served{};
    in_operation_ = false;
  }
  served = Served{};
}

std::string DeviceArithmetic::post(const FoldRequest& request) {
  queue_->request = request;
  ++requests_;
  std::atomic_ref<uint32_t>(queue_->posted).store(requests_, std::memory_order_release);
  return await(queue_->finished, requests_, reply_timeout_,
               fmt::format("fold server of operation {}, request {}", active_.operation, requests_));
}

std::string DeviceArithmetic::run(const std::vector<FoldRequest>& requests) {
  for (const FoldRequest& request : requests) {
    std::string why = post(request);
    if (!why.empty()) return why;
  }
  return "";
}

void DeviceArithmetic::add_arena(size_t bytes) {
  void* data = nullptr;
  check_cuda(cudaMallocHost(&data, bytes), "cudaMallocHost (staged scratch arena)");
  arenas_.emplace_back(static_cast<std::byte*>(data), bytes);
  arena_total_ += bytes;
  used_ = 0;
}

size_t DeviceArithmetic::size_class(size_t bytes) { return std::bit_ceil(std::max(bytes, kAlignment)); }

std::byte* DeviceArithmetic::allocate(size_t bytes) {
  const size_t size = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      std::byte* data = it->second.back();
      it->second.pop_back();
      return data;
    }
    if (!arenas_.empty() && arenas_.back().second - used_ >= size) {
      std::byte* data = arenas_.back().first + used_;
      used_ += size;
      return data;
    }
    if (arena_total_ < kMaxArenaBytes) shortfall_ += size;  // (at the cap, the heap it stays)
  }
  return new std::byte[bytes];
}

bool DeviceArithmetic::in_arena(const std::byte* data) const {
  for (const auto& [base, length] : arenas_)
    if (data >= base && data < base + length) return true;
  return false;
}

void DeviceArithmetic::release(std::byte* data, size_t bytes) {
  std::lock_guard lock(mutex_);
  if (in_arena(data)) {
    free_[size_class(bytes)].push_back(data);
  } else {
    delete[] data;
  }
}

bool DeviceArithmetic::reusable(const std::byte* data) const {
  std::lock_guard lock(mutex_);
  return in_arena(data);
}

void DeviceArithmetic::set_staging(const void* data, size_t bytes) {
  std::lock_guard lock(mutex_);
  staging_ = {reinterpret_cast<uintptr_t>(data), data ? bytes : 0};
}

bool DeviceArithmetic::short_of_memory() const {
  std::lock_guard lock(mutex_);
  return shortfall_ > 0;
}

void DeviceArithmetic::grow() {
  std::lock_guard lock(mutex_);
  if (shortfall_ == 0) return;
  // Twice what ran short: the pool's buffers of one operation come back in other sizes too.
  const size_t bytes = std::min(std::max(kMinGrowth, 2 * shortfall_), kMaxArenaBytes - std::min(arena_total_, kMaxArenaBytes));
  shortfall_ = 0;
  if (bytes >= kAlignment) add_arena(bytes);
}

bool DeviceArithmetic::reachable(const void* data, size_t bytes) const {
  const auto p = reinterpret_cast<uintptr_t>(data);
  const auto within = [&](uintptr_t base, size_t length) { return p >= base && p - base <= length && bytes <= length - (p - base); };
  if (within(staging_.first, staging_.second)) return true;
  for (const auto& [base, length] : arenas_)
    if (within(reinterpret_cast<uintptr_t>(base), length)) return true;
  return false;
}

DeviceArithmetic::Counters DeviceArithmetic::counters() const {
  Counters c;
  c.device_folds = device_folds_;
  c.served_folds = served_folds_;
  c.host_folds = host_folds_;
  c.device_divides = device_divides_;
  c.host_divides = host_divides_;
  std::lock_guard lock(mutex_);
  c.arena_bytes = arena_total_;
  return c;
}

std::string DeviceArithmetic::wait_for_kernels(const char* what) {
  cudaError_t result = cudaStreamSynchronize(stream_);
  if (result == cudaSuccess) result = cudaGetLastError();
  return result == cudaSuccess ? std::string() : fmt::format("{}: {}", what, cudaGetErrorString(result));
}

std::string DeviceArithmetic::fold(std::byte* out, std::byte* partial, const std::byte* const* parts, size_t count,
                                   size_t n, DataType type, ReduceOp op) {
  const size_t bytes = n * size_of(type);
  bool on_device;
  {
    std::lock_guard lock(mutex_);
    on_device = reachable(out, bytes) && reachable(partial, bytes);
    for (size_t k = 0; k < count && on_device; ++k) on_device = reachable(parts[k], bytes);
  }
  if (!on_device) {
    ++host_folds_;
    return host_arithmetic().fold(out, partial, parts, count, n, type, op);
  }
  if (!in_operation_) {
    // Outside an operation (direct use): kernels on the private stream, waited for. Nothing
    // waits for this thread, so it may.
    fold_left(out, partial, parts, count, [&](std::byte* target, const std::byte* a, const std::byte* b) {
      combine(target, a, b, n, type, op, stream_);
    });
    std::string why = wait_for_kernels("combine kernel");
    if (why.empty()) ++device_folds_;
    return why;
  }
  // Up to kMaxFoldParts parts a request; a longer fold goes on from `partial`, left to right,
  // and only the last request writes `out`.
  std::vector<FoldRequest> requests;
  for (size_t next = 0; next < count;) {
    FoldRequest r{FoldKind::Fold, type, op, 0, n, 0, nullptr, {}};
    if (next > 0) r.parts[r.count++] = partial;
    while (r.count < kMaxFoldParts && next < count) r.parts[r.count++] = parts[next++];
    r.out = next == count ? out : partial;
    requests.push_back(r);
  }
  std::string why = run(requests);
  if (why.empty()) {
    ++device_folds_;
    ++served_folds_;
  }
  return why;
}

std::string DeviceArithmetic::divide(std::byte* buf, size_t n, DataType type, uint64_t divisor) {
  bool on_device;
  {
    std::lock_guard lock(mutex_);
    on_device = reachable(buf, n * size_of(type));
  }
  if (!on_device) {
    ++host_divides_;
    return host_arithmetic().divide(buf, n, type, divisor);
  }
  std::string why;
  if (!in_operation_) {
    gpu::divide(buf, n, type, divisor, stream_);
    why = wait_for_kernels("divide kernel");
  } else {
    why = run({FoldRequest{FoldKind::Divide, type, ReduceOp::Sum, 1, n, divisor, buf, {buf}}});
  }
  if (why.empty()) ++device_divides_;
  return why;
}

}  // namespace flexplan::gpu
