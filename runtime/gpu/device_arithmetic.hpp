// flexplan::gpu::DeviceArithmetic: the host runtime's local arithmetic (runtime/local_arithmetic.hpp)
// in CUDA kernels, for the staged UCX path (staged_communicator.hpp). Received chunks land in
// pinned host memory that the GPU reads and writes directly (mapped, unified addressing). The
// folds of a staged operation are served by that operation's fold server (fold_server.hpp), a
// kernel the staged path enqueues on its own stream: the thread that runs the operation posts
// each fold and spins on the reply in pinned memory, making no CUDA call; a watcher thread looks
// for a failed stream. A fold outside an operation (direct use) launches plain kernels on a
// private stream and waits for them. Either way the result is the host arithmetic's.
// Scratch comes from pinned arenas allocated only at safe points (construction, grow()):
// allocating or freeing pinned memory may wait for the whole device, which must never happen
// while the staged path's stream is held by a server. Scratch the arenas cannot serve is heap
// memory, folded on the host and counted, and grow() adds an arena that covers it for the next
// operations. The server is launched once at construction: CUDA's lazy loading may otherwise
// wait for the whole device at a first launch.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <string>
#include <thread>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/gpu/fold_server.hpp"
#include "runtime/local_arithmetic.hpp"

namespace flexplan::gpu {

class DeviceArithmetic final : public LocalArithmetic {
 public:
  // With `arena_bytes` of pinned memory ready; a fold server that does not reply within
  // `reply_timeout` fails the fold, naming the request. Throws RuntimeError if CUDA refuses.
  explicit DeviceArithmetic(size_t arena_bytes,
                            std::chrono::milliseconds reply_timeout = std::chrono::milliseconds(30000));
  ~DeviceArithmetic() override;
  DeviceArithmetic(const DeviceArithmetic&) = delete;
  DeviceArithmetic& operator=(const DeviceArithmetic&) = delete;

  std::string fold(std::byte* out, std::byte* partial, const std::byte* const* parts, size_t count, size_t n,
                   DataType type, ReduceOp op) override;
  std::string divide(std::byte* buf, size_t n, DataType type, uint64_t divisor) override;
  std::byte* allocate(size_t bytes) override;
  void release(std::byte* data, size_t bytes) override;
  // Heap scratch (beyond the arenas) is not kept for reuse: freed, so that the next allocation
  // of its size comes from an arena once grow() added one.
  bool reusable(const std::byte* data) const override;

  // One operation's server. serve() enqueues it on `stream` (from one thread at a time: the one
  // that enqueues operations); begin(), the folds and end() come from the thread that runs them,
  // in the order the servers were enqueued. begin() waits until the server runs and returns ""
  // or why it cannot (the stream failed); end() lets it return, and must follow every serve()
  // that returned, begun or not, in order: stopping a later operation stops the earlier ones.
  // serve() throws if nothing was launched; if the server was launched but its event could not
  // be recorded, it returns with `error` set: the operation must not run, but must still end.
  struct Served {
    uint32_t operation = 0;
    cudaEvent_t ended = nullptr;  // recorded after the server: its failure shows here
    std::string error;
  };
  Served serve(cudaStream_t stream);
  std::string begin(const Served& served);
  void end(Served& served);

  // Pinned memory outside the arenas the kernels may also touch (the staging buffer), replacing
  // the previous one; null to forget it.
  void set_staging(const void* data, size_t bytes);
  // Whether scratch ran short of the arenas since the last grow().
  bool short_of_memory() const;
  // Adds an arena for what ran short, up to kMaxArenaBytes in all (beyond, scratch stays on the
  // heap, folded on the host). Only where nothing of this process waits for the runtime.
  void grow();
  static constexpr size_t kMaxArenaBytes = size_t{1} << 30;

  struct Counters {
    uint64_t device_folds = 0, host_folds = 0;    // by CUDA kernels; on the host: scratch outside pinned memory
    uint64_t served_folds = 0;                    // of the device folds, those by a fold server
    uint64_t device_divides = 0, host_divides = 0;
    size_t arena_bytes = 0;                        // pinned scratch in all arenas
  };
  Counters counters() const;

 private:
  // Whether [data, data + bytes) lies in an arena or the staging buffer.
  bool reachable(const void* data, size_t bytes) const;
  bool in_arena(const std::byte* data) const;
  static size_t size_class(size_t bytes);
  void add_arena(size_t bytes);
  void load_server();  // launches the server once (see the .cpp)
  void release_all();
  // Posts `request` to the running server and waits for its reply; "" or why it failed.
  std::string post(const FoldRequest& request);
  // Posts each request in turn; "" or why one failed.
  std::string run(const std::vector<FoldRequest>& requests);
  // Waits for the kernels enqueued on stream_ (folds outside an operation).
  std::string wait_for_kernels(const char* what);
  // Spins until the flag is `value` or later; "" or why not (the watcher saw the server's stream
  // fail, or `deadline` passed first). Makes no CUDA call.
  std::string await(uint32_t& flag, uint32_t value, std::optional<std::chrono::milliseconds> deadline,
                    const std::string& what);
  // The watcher thread: queries the event of the operation being served, and destroys the
  // events of ended ones, so that the thread running an operation makes no CUDA call.
  void watch();

  cudaStream_t stream_ = nullptr;  // folds outside an operation, and loading
  FoldQueue* queue_ = nullptr;     // pinned
  unsigned* arrivals_ = nullptr;   // device memory: the server's blocks meet here
  uint32_t operations_ = 0;        // the last operation number handed out (serve())
  uint32_t requests_ = 0;          // the last request posted
  Served active_;                  // the operation being served, while in_operation_
  bool in_operation_ = false;      // between begin() and end()
  std::chrono::milliseconds reply_timeout_;

  std::mutex watch_mutex_;  // the watcher's fields
  std::condition_variable watch_changed_;
  cudaEvent_t watched_ = nullptr;    // the event of the operation being served
  std::vector<cudaEvent_t> retired_;  // to destroy
  bool quitting_ = false;
  std::atomic<bool> stream_failed_{false};  // sticky: a failed stream stays failed
  std::string stream_failure_;
  std::thread watcher_;
  mutable std::mutex mutex_;  // the arenas and free lists (allocate/release vs. grow)
  std::vector<std::pair<std::byte*, size_t>> arenas_;  // pinned blocks
  size_t used_ = 0;                                    // bump offset in the newest arena
  size_t arena_total_ = 0;                             // bytes in all arenas
  std::map<size_t, std::vector<std::byte*>> free_;     // arena pieces by size class
  size_t shortfall_ = 0;                               // bytes served from the heap since grow()
  std::pair<uintptr_t, size_t> staging_{0, 0};
  std::atomic<uint64_t> device_folds_{0}, host_folds_{0}, served_folds_{0}, device_divides_{0}, host_divides_{0};
};

}  // namespace flexplan::gpu
