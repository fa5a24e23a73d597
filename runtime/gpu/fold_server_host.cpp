// The host stand-in for the fold server (fold_server.hpp), linked with the emulation: a host
// function on the stream that serves the queue with the host runtime's arithmetic, so that the
// emulated stream is held by the server exactly as a GPU's would be.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/gpu/fold_server.hpp"
#include "runtime/local_arithmetic.hpp"
#include "runtime/reduce_kernels.hpp"

namespace flexplan::gpu {
namespace {

struct Server {
  FoldQueue* queue;
  uint32_t operation;
};

uint32_t load(uint32_t& flag) { return std::atomic_ref<uint32_t>(flag).load(std::memory_order_acquire); }
void store(uint32_t& flag, uint32_t value) { std::atomic_ref<uint32_t>(flag).store(value, std::memory_order_release); }

void serve(const FoldRequest& r) {
  if (r.kind == FoldKind::Divide) return kernels::divide(r.out, r.n, r.type, r.divisor);
  // Piece by piece through a running buffer, so that, as in the kernel, every part's element i
  // is read before out's element i is written (out may be one of the parts).
  constexpr size_t kPiece = 4096;
  const size_t size = size_of(r.type);
  std::vector<std::byte> running(kPiece * size);
  const std::byte* parts[kMaxFoldParts];
  for (size_t first = 0; first < r.n; first += kPiece) {
    const size_t m = std::min(kPiece, r.n - first);
    for (uint32_t k = 0; k < r.count; ++k) parts[k] = static_cast<const std::byte*>(r.parts[k]) + first * size;
    if (r.count == 1) {
      std::memcpy(running.data(), parts[0], m * size);
    } else {
      fold_left(running.data(), running.data(), parts, r.count, [&](std::byte* target, const std::byte* a, const std::byte* b) {
        kernels::combine(target, a, b, m, r.type, r.op);
      });
    }
    std::memcpy(static_cast<std::byte*>(r.out) + first * size, running.data(), m * size);
  }
}

void run(void* data) {
  const Server server = *static_cast<Server*>(data);
  delete static_cast<Server*>(data);
  FoldQueue& q = *server.queue;
  uint32_t seen = load(q.posted);
  store(q.running, server.operation);
  for (;;) {
    const uint32_t p = load(q.posted);
    if (p != seen) {
      seen = p;
      serve(q.request);
      store(q.finished, seen);
      continue;
    }
    if (at_or_after(load(q.stop), server.operation)) return;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

cudaError_t launch_fold_server(FoldQueue* queue, unsigned*, uint32_t operation, cudaStream_t stream) {
  auto* server = new Server{queue, operation};
  const cudaError_t result = cudaLaunchHostFunc(stream, run, server);
  if (result != cudaSuccess) delete server;
  return result;
}

}  // namespace flexplan::gpu
