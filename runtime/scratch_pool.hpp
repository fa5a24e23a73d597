// Recycled host buffers for chunk slots and staged ranges, so that steady-state operations do
// not allocate. Not thread-safe: a communicator is driven from one thread.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace flexplan {

class ScratchPool {
 public:
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    size_t capacity = 0;
    std::byte* get() const { return data.get(); }
    explicit operator bool() const { return data != nullptr; }
  };

  // A buffer of at least `bytes` bytes (contents unspecified).
  Buffer acquire(size_t bytes);
  void release(Buffer buffer);

 private:
  std::vector<Buffer> free_;
  size_t free_bytes_ = 0;
};

}  // namespace flexplan
