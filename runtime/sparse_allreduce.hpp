// The sparse all-reduce (docs/sparse.md): a hierarchical top-k exchange for slow links between
// machines. Per call, on every rank, following the verified transfer schedule of
// ir/sparse_exchange.hpp:
//   1. reduce-scatter within the machine: each learner ends with the sum of its slice
//      (ir/sparse_layout.hpp: equal slices per machine, uneven across machines);
//   2. MSTopK (sparse/mstopk.hpp) on that slice, plus the residual with error feedback;
//   3. the selected (index, value) pairs combine between machines level by level up the
//      machine tree and come back down, each transfer carrying only the elements its sender
//      holds a value for; every sum is taken in the schedule's group order from zero, so every
//      rank holding an element's sum holds the same bits;
//   4. all-gather within the machine of the summed slices.
// Element i of the result is the sum over machines of that machine's sum at i if the machine
// selected i, else nothing. At density 1 every element is selected: a dense sum.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "ir/sparse_exchange.hpp"
#include "ir/sparse_layout.hpp"
#include "runtime/call_signature.hpp"
#include "runtime/datatype.hpp"

namespace flexplan {

class Transport;

// Error feedback state of one buffer on one rank: what its slice did not send, added to its
// slice before the next call's selection (the reduced slice, after step 1). Owned by the
// caller, one per buffer that is all-reduced sparsely; it adopts the first call's count and
// type, and a later call with another count or type is an error.
class SparseResidual {
 public:
  void clear() { values_.clear(); bound_ = false; }
  // This rank's residual slice, as elements of the bound type (empty before the first call).
  const std::vector<std::byte>& bytes() const { return values_; }

 private:
  friend struct SparseResidualAccess;
  std::vector<std::byte> values_;
  uint64_t count_ = 0;
  DataType type_ = DataType::Float32;
  bool bound_ = false;
};

struct SparseArgs {
  void* buffer;
  size_t count;
  DataType type;   // float32 or float64
  double density;  // in (0, 1]: each slice sends ceil(density * slice length) elements
  SparseResidual* residual = nullptr;  // error feedback when set
  int iterations = 30;                 // MSTopK's threshold searches
  // Steps 1 and 4 alone, nothing selected or exchanged: each rank ends with its machine's sum
  // (an all-reduce within each machine, over the same transfers as the sparse call's). For
  // calibrating the learner links with the runtime itself (Communicator::sparse_machine_steps).
  bool machine_steps_only = false;
};

// Buffers the sparse all-reduce reuses from call to call (owned by the communicator): a call's
// receive and sum space is about the vector's size, which a fresh allocation per call
// zero-fills and page-faults on every rank each time. They grow to the largest call and stay.
class SparseScratch {
 public:
  // At least `bytes` bytes, aligned for any element type; contents unspecified.
  // Receive space of one step (dense parts within machines, pairs between them).
  std::byte* parts(size_t bytes) { return grow(parts_, bytes); }
  std::byte* reduced(size_t bytes) { return grow(reduced_, bytes); }
  // Send space of one step (messages of several sections).
  std::byte* sends(size_t bytes) { return grow(sends_, bytes); }
  std::vector<uint32_t>& selected() { return selected_; }
  // Room for one message's call signature and piece list (call checks), at an address that
  // stays valid until the next call: UCX reads them while the message moves, even after a
  // failed step gave up on it.
  void* frame() {
    if (frames_used_ == frames_.size()) frames_.emplace_back();
    return frames_[frames_used_++].data();
  }
  void start_call() { frames_used_ = 0; }
  static constexpr size_t kFrameBytes = 128;

 private:
  static std::byte* grow(std::vector<std::byte>& buffer, size_t bytes) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
  }
  std::vector<std::byte> parts_, reduced_, sends_;
  std::vector<uint32_t> selected_;
  std::deque<std::array<uint64_t, kFrameBytes / 8>> frames_;  // (a deque: stable addresses)
  size_t frames_used_ = 0;
};

// What the sparse exchange needs from its communicator.
struct SparseContext {
  Transport* transport;  // the seam (transport.hpp)
  int32_t rank;
  const ir::SparseLayout* layout;
  const ir::SparseExchange* exchange;  // verified (ir::verify_schedule) for the layout
  uint64_t sequence;  // the operation's tag sequence number
  SparseScratch* scratch;
  // Progresses until `remaining()` returns 0; throws RuntimeError naming `what` on a timeout
  // or a broken communicator.
  std::function<void(const std::function<size_t()>& remaining, const std::string& what)> drive;
  std::function<std::string(int32_t)> describe_rank;
  // Call checks: every message but the acknowledgements starts with `signature`, and a
  // receive's excess goes to the sink (as ExecContext's).
  bool check_calls = false;
  CallSignature signature{};
  std::byte* sink = nullptr;
  size_t sink_bytes = 0;
};

// Runs one sparse all-reduce to completion. Throws InputError on bad arguments (the same on
// every rank), RuntimeError on a transfer failure.
void run_sparse_allreduce(const SparseContext& context, const SparseArgs& args);

}  // namespace flexplan
