// The sparse all-reduce's four steps over UCX tagged messages (one message per peer and step).
//
// Tags: (sequence, step << 24 | sender rank, 0). Each sender sends a receiver at most one
// message per step, so the tag alone names it. Messages of step 3 are (index, value) pairs as
// two arrays, c uint32 offsets from the start of the slices' overlap, then c values; the
// receiver learns c from the received length.
#include "runtime/sparse_allreduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "ir/plan.hpp"
#include "runtime/errors.hpp"
#include "runtime/tag.hpp"
#include "runtime/ucx_transport.hpp"
#include "sparse/mstopk.hpp"

namespace flexplan {

struct SparseResidualAccess {
  static std::vector<std::byte>& values(SparseResidual& r) { return r.values_; }
  static void bind(SparseResidual& r, uint64_t count, DataType type, size_t slice_bytes) {
    if (!r.bound_) {
      r.bound_ = true;
      r.count_ = count;
      r.type_ = type;
      r.values_.assign(slice_bytes, std::byte{0});
      return;
    }
    if (r.count_ != count || r.type_ != type) {
      throw InputError(fmt::format(
          "flexplan sparse_allreduce: residual belongs to a {} x {} buffer, called with {} x {}",
          r.count_, to_string(r.type_), count, to_string(type)));
    }
  }
};

namespace {

constexpr int kStepBits = 24;

uint64_t sparse_tag(uint64_t sequence, uint64_t step, int32_t sender) {
  return tag::make(sequence, (step << kStepBits) | static_cast<uint64_t>(sender), 0);
}

size_t selected_count(double density, uint64_t slice_length) {
  const double k = std::ceil(density * static_cast<double>(slice_length));
  return static_cast<size_t>(std::min<double>(k, static_cast<double>(slice_length)));
}

// The transfers of one step: posted, then driven until all completed.
class StepTransfers {
 public:
  StepTransfers(const SparseContext& context, std::string step) : context_(context), step_(std::move(step)) {}
  ~StepTransfers() {
    for (auto& t : transfers_) {
      if (t.request == nullptr) continue;
      context_.transport->cancel(t.request);
      ucp_request_free(t.request);
    }
  }

  void send(int32_t peer, const void* data, size_t bytes, uint64_t tag) {
    ucs_status_ptr_t request = context_.transport->send(peer, data, bytes, tag);
    if (UCS_PTR_IS_ERR(request)) {
      throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: send to {} failed: {}", step_,
                                     context_.describe_rank(peer),
                                     ucs_status_string(UCS_PTR_STATUS(request))));
    }
    if (request != nullptr) transfers_.push_back({request, false, peer, nullptr});
  }
  // `received` gets the length that arrived.
  void recv(int32_t peer, void* data, size_t capacity, uint64_t tag, size_t* received) {
    ucs_status_ptr_t request = context_.transport->recv(data, capacity, tag);
    if (UCS_PTR_IS_ERR(request)) {
      throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: receive from {} failed: {}",
                                     step_, context_.describe_rank(peer),
                                     ucs_status_string(UCS_PTR_STATUS(request))));
    }
    transfers_.push_back({request, true, peer, received});
  }

  void wait() {
    context_.drive([this] { return poll(); }, step_);
  }

 private:
  struct Transfer {
    void* request;
    bool receive;
    int32_t peer;
    size_t* received;
  };

  size_t poll() {
    size_t remaining = 0;
    for (auto& t : transfers_) {
      if (t.request == nullptr) continue;
      ucs_status_t status;
      size_t length = 0;
      if (t.receive) {
        ucp_tag_recv_info_t info{};
        status = ucp_tag_recv_request_test(t.request, &info);
        length = info.length;
      } else {
        status = ucp_request_check_status(t.request);
      }
      if (status == UCS_INPROGRESS) {
        ++remaining;
        continue;
      }
      ucp_request_free(t.request);
      t.request = nullptr;
      if (status != UCS_OK) {
        throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: {} {} failed: {}", step_,
                                       t.receive ? "receive from" : "send to",
                                       context_.describe_rank(t.peer), ucs_status_string(status)));
      }
      if (t.received != nullptr) *t.received = length;
    }
    return remaining;
  }

  const SparseContext& context_;
  std::string step_;
  std::vector<Transfer> transfers_;
};

template <typename T>
void run_typed(const SparseContext& context, const SparseArgs& args) {
  const ir::SparseLayout& layout = *context.layout;
  const int32_t rank = context.rank;
  const int32_t machine = layout.machine_of[static_cast<size_t>(rank)];
  const auto& locals = layout.machines[static_cast<size_t>(machine)];
  const uint64_t count = args.count;
  T* buffer = static_cast<T*>(args.buffer);
  const ir::SparseLayout::Slice mine = layout.slice(rank, count);
  const size_t length = mine.end - mine.begin;
  const uint64_t seq = context.sequence;

  // The residual is checked before any message, so that a mismatch fails every rank alike.
  T* residual = nullptr;
  if (args.residual != nullptr) {
    SparseResidualAccess::bind(*args.residual, count, args.type, length * sizeof(T));
    residual = reinterpret_cast<T*>(SparseResidualAccess::values(*args.residual).data());
  }

  // 1. Reduce-scatter within the machine: each local peer's slice goes to it; the slice sums
  // in local order. Peer q's part lands at q * length in the scratch.
  SparseScratch& scratch = *context.scratch;
  T* local_parts = reinterpret_cast<T*>(scratch.local_parts(locals.size() * length * sizeof(T)));
  {
    StepTransfers step(context, "step 1 (reduce-scatter within the machine)");
    std::vector<size_t> got(locals.size());
    for (size_t q = 0; q < locals.size(); ++q) {
      const int32_t peer = locals[q];
      if (peer == rank) continue;
      const auto theirs = layout.slice(peer, count);
      step.send(peer, buffer + theirs.begin, (theirs.end - theirs.begin) * sizeof(T), sparse_tag(seq, 1, rank));
      step.recv(peer, local_parts + q * length, length * sizeof(T), sparse_tag(seq, 1, peer), &got[q]);
    }
    step.wait();
    for (size_t q = 0; q < locals.size(); ++q) {
      if (locals[q] != rank && got[q] != length * sizeof(T)) {
        throw RuntimeError(fmt::format("flexplan sparse_allreduce: step 1: {} sent {} bytes, expected {}",
                                       context.describe_rank(locals[q]), got[q], length * sizeof(T)));
      }
    }
  }
  const std::span<T> reduced(reinterpret_cast<T*>(scratch.reduced(length * sizeof(T))), length);
  for (size_t q = 0; q < locals.size(); ++q) {
    const T* part = locals[q] == rank ? buffer + mine.begin : local_parts + q * length;
    if (q == 0) {
      std::copy(part, part + length, reduced.begin());
    } else {
      for (size_t e = 0; e < length; ++e) reduced[e] += part[e];
    }
  }

  // 2. Selection, with the residual of the last call added first.
  if (residual != nullptr) {
    for (size_t e = 0; e < length; ++e) reduced[e] += residual[e];
  }
  std::vector<uint32_t>& selected = scratch.selected();  // offsets in the slice, ascending
  sparse::mstopk<T>(std::span<const T>(reduced.data(), length), selected_count(args.density, length), selected,
                    sparse::MsTopKOptions{args.iterations, 0});
  if (residual != nullptr) {
    std::copy(reduced.begin(), reduced.end(), residual);
    for (uint32_t offset : selected) residual[offset] = 0;
  }

  // 3. Pairs to the owners on every other machine, and theirs from them.
  struct Exchange {
    int32_t peer;
    uint64_t begin, end;  // the overlap of the two slices
    std::vector<std::byte> out, in;
    size_t received = 0;
  };
  std::vector<std::vector<Exchange>> by_machine(layout.machines.size());
  {
    StepTransfers step(context, "step 3 (top-k pairs between machines)");
    for (size_t other = 0; other < layout.machines.size(); ++other) {
      if (static_cast<int32_t>(other) == machine || length == 0) continue;
      for (int32_t peer : layout.overlapping(static_cast<int32_t>(other), mine, count)) {
        const auto theirs = layout.slice(peer, count);
        Exchange x{peer, std::max(mine.begin, theirs.begin), std::min(mine.end, theirs.end), {}, {}, 0};
        const auto first = std::lower_bound(selected.begin(), selected.end(), x.begin - mine.begin);
        const auto last = std::lower_bound(selected.begin(), selected.end(), x.end - mine.begin);
        const size_t c = static_cast<size_t>(last - first);
        // Values first, then offsets: both arrays stay aligned for any c (offsets first would
        // put doubles at 4 mod 8 for odd c).
        x.out.resize(c * (sizeof(uint32_t) + sizeof(T)));
        auto* out_value = reinterpret_cast<T*>(x.out.data());
        auto* out_index = reinterpret_cast<uint32_t*>(x.out.data() + c * sizeof(T));
        for (size_t s = 0; s < c; ++s) {
          const uint32_t offset = first[static_cast<ptrdiff_t>(s)];
          out_index[s] = static_cast<uint32_t>(mine.begin + offset - x.begin);
          out_value[s] = reduced[offset];
        }
        const size_t capacity = std::min<uint64_t>(selected_count(args.density, theirs.end - theirs.begin),
                                                   x.end - x.begin);
        x.in.resize(capacity * (sizeof(uint32_t) + sizeof(T)));
        by_machine[other].push_back(std::move(x));
      }
    }
    for (auto& list : by_machine) {
      for (auto& x : list) {
        step.send(x.peer, x.out.data(), x.out.size(), sparse_tag(seq, 3, rank));
        step.recv(x.peer, x.in.data(), x.in.size(), sparse_tag(seq, 3, x.peer), &x.received);
      }
    }
    step.wait();
  }
  // The sum, machine by machine in machine order, of what each selected in this slice, made in
  // place: the slice of the buffer is no longer read (its part is in `reduced`).
  T* sum = buffer + mine.begin;
  std::fill(sum, sum + length, T{0});
  for (size_t m = 0; m < layout.machines.size(); ++m) {
    if (static_cast<int32_t>(m) == machine) {
      for (uint32_t offset : selected) sum[offset] += reduced[offset];
      continue;
    }
    for (const Exchange& x : by_machine[m]) {
      const size_t pair = sizeof(uint32_t) + sizeof(T);
      if (x.received % pair != 0) {
        throw RuntimeError(fmt::format("flexplan sparse_allreduce: step 3: {} sent {} bytes, not whole pairs",
                                       context.describe_rank(x.peer), x.received));
      }
      const size_t c = x.received / pair;
      const auto* in_value = reinterpret_cast<const T*>(x.in.data());
      const auto* in_index = reinterpret_cast<const uint32_t*>(x.in.data() + c * sizeof(T));
      for (size_t s = 0; s < c; ++s) {
        const uint64_t element = x.begin + in_index[s];
        if (element >= x.end) {
          throw RuntimeError(fmt::format("flexplan sparse_allreduce: step 3: {} sent index {} outside [{}, {})",
                                         context.describe_rank(x.peer), element, x.begin, x.end));
        }
        sum[element - mine.begin] += in_value[s];
      }
    }
  }

  // 4. All-gather within the machine.
  {
    StepTransfers step(context, "step 4 (all-gather within the machine)");
    std::vector<size_t> got(locals.size());
    for (size_t q = 0; q < locals.size(); ++q) {
      const int32_t peer = locals[q];
      if (peer == rank) continue;
      const auto theirs = layout.slice(peer, count);
      step.send(peer, buffer + mine.begin, length * sizeof(T), sparse_tag(seq, 4, rank));
      step.recv(peer, buffer + theirs.begin, (theirs.end - theirs.begin) * sizeof(T),
                sparse_tag(seq, 4, peer), &got[q]);
    }
    step.wait();
  }
}

}  // namespace

void run_sparse_allreduce(const SparseContext& context, const SparseArgs& args) {
  if (!(args.density > 0.0 && args.density <= 1.0)) {
    throw InputError(fmt::format("flexplan sparse_allreduce: density {} is not in (0, 1]", args.density));
  }
  if (args.iterations < 0 || args.iterations > 64) {
    throw InputError(fmt::format("flexplan sparse_allreduce: {} MSTopK iterations (0 to 64)", args.iterations));
  }
  if (context.layout->machine_of.size() >= (size_t{1} << kStepBits)) {
    throw InputError("flexplan sparse_allreduce: at most 2^24 ranks");
  }
  if (args.count > 0 && args.buffer == nullptr) {
    throw InputError(fmt::format("flexplan sparse_allreduce: null buffer for {} elements", args.count));
  }
  // Slices are indexed by 32-bit offsets (on the wire and in MSTopK).
  if (args.count > std::numeric_limits<uint32_t>::max()) {
    throw InputError(fmt::format("flexplan sparse_allreduce: count {} exceeds 2^32-1", args.count));
  }
  if (args.type != DataType::Float32 && args.type != DataType::Float64) {
    throw InputError(fmt::format("flexplan sparse_allreduce: {} is not supported (float32, float64)",
                                 to_string(args.type)));
  }
  if (args.count == 0) return;  // every rank alike: nothing to move
  switch (args.type) {
    case DataType::Float32:
      return run_typed<float>(context, args);
    case DataType::Float64:
      return run_typed<double>(context, args);
    default:
      throw InputError(fmt::format("flexplan sparse_allreduce: {} is not supported (float32, float64)",
                                   to_string(args.type)));
  }
}

}  // namespace flexplan
