// Recycled scratch buffers (scratch_pool.hpp).
#include "runtime/scratch_pool.hpp"

#include <algorithm>

namespace flexplan {
namespace {
// Idle memory kept for reuse; beyond it released buffers are freed (a one-off huge staged
// range should not pin its memory for the communicator's lifetime).
constexpr size_t kMaxIdleBytes = size_t{256} << 20;
}  // namespace

ScratchPool::Buffer ScratchPool::acquire(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  // Smallest idle buffer that fits.
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->capacity >= bytes && (best == free_.end() || it->capacity < best->capacity)) best = it;
  }
  if (best != free_.end()) {
    Buffer buffer = std::move(*best);
    free_.erase(best);
    free_bytes_ -= buffer.capacity;
    return buffer;
  }
  return Buffer{std::unique_ptr<std::byte[], ScratchRelease>(arithmetic_->allocate(bytes), ScratchRelease{arithmetic_, bytes}), bytes};
}

void ScratchPool::release(Buffer buffer) {
  if (!buffer || free_bytes_ + buffer.capacity > kMaxIdleBytes || !arithmetic_->reusable(buffer.get())) return;
  free_bytes_ += buffer.capacity;
  free_.push_back(std::move(buffer));
}

}  // namespace flexplan
