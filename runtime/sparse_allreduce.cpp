// The sparse all-reduce's steps over the transport seam's tagged messages (transport.hpp): the transfer schedule
// (ir/sparse_exchange.hpp) run one step at a time, one message per peer and step.
//
// Tags: (sequence, step << 23 | sender rank, 0). Each sender sends a receiver at most one
// message per step, so the tag alone names it. Within a machine, where single copy is on, a
// message of the dense steps is a descriptor instead: the receiver reads the data out of the
// sender's memory and acknowledges under tag::ack(sequence, step << 23 | receiver rank).
// With call checks every message but the acknowledgements starts with the call's signature
// (call_signature.hpp), which the receiver compares with its own.
#include "runtime/sparse_allreduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>
#include <map>
#include <new>
#include <span>
#include <string>

#include <fmt/format.h>

#include "ir/plan.hpp"
#include "runtime/errors.hpp"
#include "runtime/single_copy.hpp"
#include "runtime/tag.hpp"
#include "runtime/transport.hpp"
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

constexpr int kSenderBits = 23;  // below the step: ranks < 2^23, steps < 2^(31 - 23) = 256

uint64_t sparse_tag(uint64_t sequence, uint64_t step, int32_t sender) {
  return tag::make(sequence, (step << kSenderBits) | static_cast<uint64_t>(sender), 0);
}

size_t selected_count(double density, uint64_t slice_length) {
  const double k = std::ceil(density * static_cast<double>(slice_length));
  return static_cast<size_t>(std::min<double>(k, static_cast<double>(slice_length)));
}

// The transfers of one step: posted, then driven until all completed. `signed_messages`: its
// messages carry the call's signature where call checks are on (not the acknowledgements).
class StepTransfers {
 public:
  StepTransfers(const SparseContext& context, std::string step, bool signed_messages = true)
      : context_(context), step_(std::move(step)), signed_(signed_messages && context.check_calls) {}
  ~StepTransfers() {
    for (auto& t : transfers_) {
      if (t.request == nullptr) continue;
      context_.transport->cancel(t.request);
      context_.transport->release(t.request);
    }
  }

  // A message's signature and pieces, in the communicator's scratch (SparseScratch::frame).
  struct Frame {
    CallSignature signature;
    Transport::Piece iov[Transport::kMaxPieces];
  };
  static_assert(sizeof(Frame) <= SparseScratch::kFrameBytes);

  void send(int32_t peer, const void* data, size_t bytes, uint64_t tag) {
    Transfer& t = transfers_.emplace_back(peer, false);
    TransportStatus status;
    if (signed_) {
      Frame* frame = new (context_.scratch->frame()) Frame{context_.signature, {}};
      size_t pieces = 0;
      frame->iov[pieces++] = {&frame->signature, sizeof(CallSignature)};
      if (bytes > 0) frame->iov[pieces++] = {const_cast<void*>(data), bytes};
      status = context_.transport->send(peer, frame->iov, pieces, tag, &t, &t.request);
    } else {
      status = context_.transport->send(peer, data, bytes, tag, &t, &t.request);
    }
    if (!status.ok()) {
      transfers_.pop_back();
      throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: send to {} failed: {}", step_,
                                     context_.describe_rank(peer), status.text));
    }
    if (t.request == nullptr) transfers_.pop_back();  // sent at once
  }
  // `received` gets the length that arrived.
  void recv(int32_t peer, void* data, size_t capacity, uint64_t tag, size_t* received) {
    Transfer& t = transfers_.emplace_back(peer, true);
    t.received = received;
    TransportStatus status;
    Frame* frame = nullptr;
    if (signed_) {
      // The signature, the data, then the sink for what a peer of another count sends beyond.
      frame = new (context_.scratch->frame()) Frame{};
      size_t pieces = 0;
      frame->iov[pieces++] = {&frame->signature, sizeof(CallSignature)};
      if (capacity > 0) frame->iov[pieces++] = {data, capacity};
      frame->iov[pieces++] = {context_.sink, context_.sink_bytes};
      status = context_.transport->recv(frame->iov, pieces, tag, ~uint64_t{0}, &t, &t.request);
    } else {
      status = context_.transport->recv(data, capacity, tag, &t, &t.request);
    }
    if (!status.ok()) {
      transfers_.pop_back();
      throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: receive from {} failed: {}",
                                     step_, context_.describe_rank(peer), status.text));
    }
    t.frame = frame;
  }

  void wait() {
    context_.drive([this] { return poll(); }, step_);
  }

 private:
  // A transfer in flight; the transport tells its end through the Completion base.
  struct Transfer : Transport::Completion {
    Transfer(int32_t from_or_to, bool is_receive) : receive(is_receive), peer(from_or_to) {
      notify = [](Completion* self, TransportStatus status, size_t length, uint64_t) {
        auto* t = static_cast<Transfer*>(self);
        t->complete = true;
        t->status = status;
        t->length = length;
      };
    }
    Transport::Request request = nullptr;
    bool receive;
    int32_t peer;
    size_t* received = nullptr;
    const Frame* frame = nullptr;  // a signed receive's
    bool complete = false;
    TransportStatus status;
    size_t length = 0;
  };

  size_t poll() {
    size_t remaining = 0;
    for (auto& t : transfers_) {
      if (t.request == nullptr) continue;
      if (!t.complete) {
        ++remaining;
        continue;
      }
      context_.transport->release(t.request);
      t.request = nullptr;
      size_t length = t.length;
      if (!t.status.ok()) {
        throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: {} {} failed: {}", step_,
                                       t.receive ? "receive from" : "send to",
                                       context_.describe_rank(t.peer), t.status.text));
      }
      if (t.frame != nullptr) length = checked_length(t, length);
      if (t.received != nullptr) *t.received = length;
    }
    return remaining;
  }

  // The length of a signed message's data, once its signature is found to be this call's.
  size_t checked_length(const Transfer& t, size_t length) const {
    CallSignature theirs;
    if (!read_signature(&t.frame->signature, length, &theirs)) {
      throw RuntimeError(fmt::format(
          "flexplan sparse_allreduce: {}: the message from {} carries no call signature ({} bytes; is "
          "FLEXPLAN_CHECK_CALLS alike on every rank, and every rank the same build?)",
          step_, context_.describe_rank(t.peer), length));
    }
    if (theirs != context_.signature) {
      throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: the message from {} belongs to another call: {}",
                                     step_, context_.describe_rank(t.peer),
                                     describe_mismatch(theirs, context_.describe_rank(t.peer), context_.signature,
                                                       context_.describe_rank(context_.rank))));
    }
    return length - sizeof(CallSignature);
  }

  const SparseContext& context_;
  std::string step_;
  bool signed_;
  std::deque<Transfer> transfers_;  // (a deque: the transport holds their addresses)
};

// One message per (step, sender, receiver): the sections of the step's ops that the sender
// sends the receiver, in op order. A section is the op's element range of the sender's values:
// dense in the steps within machines; in the sparse steps a count c (uint64), then c values and
// c uint32 offsets from the range's start, ascending, padded to 8 bytes.
struct Section {
  size_t op;
  uint64_t begin, end;  // elements
};

size_t sparse_section_bytes(size_t pairs, size_t value_bytes) {
  const size_t bytes = sizeof(uint64_t) + pairs * (value_bytes + sizeof(uint32_t));
  return (bytes + 7) / 8 * 8;
}

template <typename T>
class SparseRun {
 public:
  SparseRun(const SparseContext& context, const SparseArgs& args)
      : context_(context),
        layout_(*context.layout),
        exchange_(*context.exchange),
        rank_(context.rank),
        count_(args.count),
        buffer_(static_cast<T*>(args.buffer)),
        mine_(layout_.slice(rank_, count_)),
        density_(args.density) {}

  void run(const SparseArgs& args) {
    const size_t length = mine_.end - mine_.begin;
    // The residual is checked before any message, so that a mismatch fails every rank alike.
    T* residual = nullptr;
    if (args.residual != nullptr) {
      SparseResidualAccess::bind(*args.residual, count_, args.type, length * sizeof(T));
      residual = reinterpret_cast<T*>(SparseResidualAccess::values(*args.residual).data());
    }
    const auto& steps = exchange_.schedule.steps;
    for (size_t s = 0; s < exchange_.first_sparse; ++s) dense_step(s, "reduce-scatter within the machine");
    if (args.machine_steps_only) {
      for (size_t s = exchange_.end_sparse; s < steps.size(); ++s) dense_step(s, "all-gather within the machine");
      return;
    }

    // Selection on this rank's slice (the machine's sum there), with the last call's residual
    // added first. Afterwards the slice holds the selected values and zeros elsewhere.
    SparseScratch& scratch = *context_.scratch;
    const std::span<T> reduced(reinterpret_cast<T*>(scratch.reduced(length * sizeof(T))), length);
    T* slice = buffer_ + mine_.begin;
    std::copy(slice, slice + length, reduced.begin());
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
    std::fill(slice, slice + length, T{0});
    for (uint32_t offset : selected) slice[offset] = reduced[offset];
    support_.assign(selected.begin(), selected.end());

    start_bounds();
    for (size_t s = exchange_.first_sparse; s < exchange_.end_sparse; ++s) {
      sparse_step(s);
      advance_bounds(s);
    }
    for (size_t s = exchange_.end_sparse; s < steps.size(); ++s) dense_step(s, "all-gather within the machine");
  }

 private:
  using PeerSections = std::map<int32_t, std::vector<Section>>;

  uint64_t element(uint64_t unit) const { return exchange_.element(unit, count_); }

  // Upper bounds on the pairs each rank holds per unit of the exchange, as of the sparse step
  // about to run: after the selection, what the owner can have selected there; a reduce's
  // root, the sum of its members'; a broadcast's members, the root's. A receive is sized by
  // its sender's bound, and a count above it is refused.
  void start_bounds() {
    const size_t units = exchange_.schedule.units, world = layout_.machine_of.size();
    unit_pairs_.assign(world * units, 0);
    for (size_t r = 0; r < world; ++r) {
      const auto slice = layout_.slice(static_cast<int32_t>(r), count_);
      const uint64_t k = selected_count(density_, slice.end - slice.begin);
      for (size_t u = 0; u < units; ++u) {
        if (element(u) >= slice.begin && element(u + 1) <= slice.end)
          unit_pairs_[r * units + u] = std::min<uint64_t>(element(u + 1) - element(u), k);
      }
    }
  }
  void advance_bounds(size_t s) {
    const size_t units = exchange_.schedule.units;
    std::vector<std::pair<size_t, uint64_t>> updates;
    for (const ir::Op& op : exchange_.schedule.steps[s].ops) {
      for (uint64_t u = op.begin; u < op.end; ++u) {
        if (op.kind == ir::OpKind::Reduce) {
          uint64_t sum = 0;
          for (int32_t member : op.group) sum += unit_pairs_[static_cast<size_t>(member) * units + u];
          updates.push_back({static_cast<size_t>(op.root) * units + u, std::min(sum, element(u + 1) - element(u))});
        } else {
          for (int32_t member : op.group)
            updates.push_back({static_cast<size_t>(member) * units + u, unit_pairs_[static_cast<size_t>(op.root) * units + u]});
        }
      }
    }
    for (const auto& [index, bound] : updates) unit_pairs_[index] = bound;
  }
  uint64_t pairs_bound(int32_t sender, const Section& section, size_t s) const {
    const ir::Op& op = exchange_.schedule.steps[s].ops[section.op];
    uint64_t bound = 0;
    for (uint64_t u = op.begin; u < op.end; ++u)
      bound += unit_pairs_[static_cast<size_t>(sender) * exchange_.schedule.units + u];
    return std::min(bound, section.end - section.begin);
  }

  // This rank's sends and receives in step s, by peer.
  void sections_of(size_t s, PeerSections* out, PeerSections* in) const {
    const auto& ops = exchange_.schedule.steps[s].ops;
    for (size_t o = 0; o < ops.size(); ++o) {
      const ir::Op& op = ops[o];
      const bool root = op.root == rank_;
      if (!root && std::find(op.group.begin(), op.group.end(), rank_) == op.group.end()) continue;
      const Section section{o, element(op.begin), element(op.end)};
      if (op.kind == ir::OpKind::Reduce) {
        if (root) {
          for (int32_t member : op.group)
            if (member != rank_) (*in)[member].push_back(section);
        } else {
          (*out)[op.root].push_back(section);
        }
      } else if (root) {
        for (int32_t member : op.group)
          if (member != rank_) (*out)[member].push_back(section);
      } else {
        (*in)[op.root].push_back(section);
      }
    }
  }

  std::string step_name(size_t s, const char* what) const {
    return fmt::format("step {} of {} ({})", s + 1, exchange_.schedule.steps.size(), what);
  }

  // Whether a message of the dense steps to or from `peer` goes by single copy. Through UCX's
  // shared-memory FIFO a whole slice is copied twice, 512 KiB at a time, and its sender waits
  // for the receiver's turn on a core to drain each piece: on 3+3+4 at 32 MiB, ten processes on
  // two cores, steps 1 and 4 took 95-119 ms so and 47-76 ms by single copy (docs/runtime.md).
  bool by_single_copy(int32_t peer, size_t bytes) const { return context_.transport->single_copy_to(peer, bytes); }
  // Names a single-copy message of step s to `receiver` in its acknowledgement's tag.
  static uint64_t cookie(size_t s, int32_t receiver) {
    return (static_cast<uint64_t>(s) << kSenderBits) | static_cast<uint64_t>(receiver);
  }

  // Dense values. Broadcast ranges are received straight into the buffer: no rank sends from a
  // range it receives into in the same step (tests/unit/ir_sparse_exchange_test.cpp).
  void dense_step(size_t s, const char* what) {
    PeerSections out, in;
    sections_of(s, &out, &in);
    const auto& ops = exchange_.schedule.steps[s].ops;
    // Messages of several sections are packed in the communicator's send space, which outlives
    // a failed step's requests as the buffer does; so do the descriptors, declared before them.
    size_t packed = 0;
    for (const auto& [peer, sections] : out)
      if (sections.size() > 1)
        for (const Section& x : sections) packed += x.end - x.begin;
    T* pack = reinterpret_cast<T*>(context_.scratch->sends(packed * sizeof(T)));
    std::vector<single_copy::Descriptor> descriptors;
    descriptors.reserve(out.size());
    StepTransfers acks(context_, step_name(s, what) + ", single-copy acknowledgements", /*signed_messages=*/false);
    StepTransfers step(context_, step_name(s, what));
    for (const auto& [peer, sections] : out) {
      const T* message = buffer_ + sections[0].begin;
      size_t bytes = (sections[0].end - sections[0].begin) * sizeof(T);
      if (sections.size() > 1) {
        message = pack;
        for (const Section& x : sections) pack = std::copy(buffer_ + x.begin, buffer_ + x.end, pack);
        bytes = static_cast<size_t>(pack - message) * sizeof(T);
      }
      if (by_single_copy(peer, bytes)) {
        const uint64_t c = cookie(s, peer);
        acks.recv(peer, &nothing_, 0, tag::ack(context_.sequence, c), nullptr);
        descriptors.push_back(Transport::single_copy_descriptor(message, bytes, c));
        step.send(peer, &descriptors.back(), sizeof(single_copy::Descriptor), sparse_tag(context_.sequence, s, rank_));
      } else {
        step.send(peer, message, bytes, sparse_tag(context_.sequence, s, rank_));
      }
    }
    struct Incoming {
      T* data = nullptr;  // null: received straight into the buffer
      size_t expected = 0, received = 0;
      bool by_single_copy = false;
      void* into = nullptr;  // where a single-copy message is read to
      single_copy::Descriptor descriptor;
    };
    // Receive space is the communicator's, kept between calls (docs/sparse.md, Memory).
    // A peer's message lands straight in the buffer when it is one broadcast's range; anything
    // else (parts of a sum, several sections) is staged.
    const auto direct = [&ops](const std::vector<Section>& sections) {
      return sections.size() == 1 && ops[sections[0].op].kind == ir::OpKind::Broadcast;
    };
    std::map<int32_t, Incoming> incoming;
    size_t staged = 0;
    for (const auto& [peer, sections] : in) {
      Incoming& x = incoming[peer];
      for (const Section& section : sections) x.expected += (section.end - section.begin) * sizeof(T);
      if (!direct(sections)) staged += x.expected;
    }
    T* space = reinterpret_cast<T*>(context_.scratch->parts(staged));
    for (const auto& [peer, sections] : in) {
      Incoming& x = incoming[peer];
      void* into = buffer_ + sections[0].begin;
      if (!direct(sections)) {
        x.data = space;
        space += x.expected / sizeof(T);
        into = x.data;
      }
      x.by_single_copy = by_single_copy(peer, x.expected);
      if (x.by_single_copy) {
        x.into = into;
        step.recv(peer, &x.descriptor, sizeof x.descriptor, sparse_tag(context_.sequence, s, peer), &x.received);
      } else {
        step.recv(peer, into, x.expected, sparse_tag(context_.sequence, s, peer), &x.received);
      }
    }
    step.wait();
    for (auto& [peer, x] : incoming) {
      if (!x.by_single_copy) continue;
      // The seam checks the descriptor and reads the message straight out of the sender.
      const Transport::SingleCopyRead read =
          context_.transport->single_copy_read(peer, &x.descriptor, x.received, x.expected, x.into);
      const single_copy::Descriptor& d = read.got;
      if (read.code == Transport::SingleCopyRead::ReadFailed) {
        throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: reading {} bytes out of {} failed: {}",
                                       step_name(s, what), d.bytes, context_.describe_rank(peer), read.why));
      }
      const bool descriptor = read.code != Transport::SingleCopyRead::NotDescriptor;
      if (!descriptor || read.code == Transport::SingleCopyRead::WrongLength || d.cookie != cookie(s, rank_)) {
        throw RuntimeError(fmt::format(
            "flexplan sparse_allreduce: {}: {} sent {}, expected the single-copy descriptor of {} bytes: do all "
            "ranks pass the same count?",
            step_name(s, what), context_.describe_rank(peer),
            descriptor ? fmt::format("a descriptor of {} bytes", d.bytes) : fmt::format("{} bytes", x.received),
            x.expected));
      }
      x.received = d.bytes;
      acks.send(peer, &nothing_, 0, tag::ack(context_.sequence, d.cookie));
    }
    acks.wait();
    std::map<std::pair<int32_t, size_t>, const T*> part;  // (peer, op) -> its section
    for (const auto& [peer, sections] : in) {
      const Incoming& x = incoming[peer];
      if (x.received != x.expected) {
        throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: {} sent {} bytes, expected {}",
                                       step_name(s, what), context_.describe_rank(peer), x.received, x.expected));
      }
      const T* at = x.data;
      for (const Section& section : sections) {
        part[{peer, section.op}] = at;
        if (at != nullptr) at += section.end - section.begin;
      }
    }
    for (size_t o = 0; o < ops.size(); ++o) {
      const ir::Op& op = ops[o];
      const uint64_t begin = element(op.begin), length = element(op.end) - begin;
      if (op.kind == ir::OpKind::Reduce && op.root == rank_) {
        // In group order, so that the result does not depend on which member is the root. The
        // selection's space is free until the steps within machines are done.
        T* sum = reinterpret_cast<T*>(context_.scratch->reduced(length * sizeof(T)));
        for (size_t m = 0; m < op.group.size(); ++m) {
          const T* from = op.group[m] == rank_ ? buffer_ + begin : part.at({op.group[m], o});
          if (m == 0) {
            std::copy(from, from + length, sum);
          } else {
            for (size_t e = 0; e < length; ++e) sum[e] += from[e];
          }
        }
        std::copy(sum, sum + length, buffer_ + begin);
      } else if (op.kind == ir::OpKind::Broadcast && op.root != rank_) {
        const auto it = part.find({op.root, o});
        if (it != part.end() && it->second != nullptr) std::copy(it->second, it->second + length, buffer_ + begin);
      }
    }
  }

  // How many elements of [begin, end) this rank holds values for.
  size_t support_in(uint64_t begin, uint64_t end) const {
    const auto first = std::lower_bound(support_.begin(), support_.end(), static_cast<uint32_t>(begin - mine_.begin));
    return static_cast<size_t>(std::lower_bound(first, support_.end(), static_cast<uint32_t>(end - mine_.begin)) - first);
  }

  // The pairs of this rank's values in [begin, end): offsets from `begin`, ascending.
  void own_pairs(uint64_t begin, uint64_t end, std::vector<T>* values, std::vector<uint32_t>* offsets) const {
    const uint32_t first = static_cast<uint32_t>(begin - mine_.begin), last = static_cast<uint32_t>(end - mine_.begin);
    values->clear();
    offsets->clear();
    for (auto it = std::lower_bound(support_.begin(), support_.end(), first); it != support_.end() && *it < last; ++it) {
      values->push_back(buffer_[mine_.begin + *it]);
      offsets->push_back(*it - first);
    }
  }

  struct Pairs {
    const T* values = nullptr;
    const uint32_t* offsets = nullptr;
    size_t count = 0;
  };

  // Every op of a sparse step reads and writes only ranges inside the slices of its members
  // (ir/sparse_exchange.hpp); checked here too, since the support is kept per slice.
  void check_inside_slice(const Section& x, size_t s) const {
    if (x.begin < mine_.begin || x.end > mine_.end) {
      throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: op {} covers [{}, {}) outside this rank's slice [{}, {})",
                                     step_name(s, "pairs between machines"), x.op, x.begin, x.end, mine_.begin, mine_.end));
    }
  }

  void sparse_step(size_t s) {
    const std::string name = step_name(s, "pairs between machines");
    PeerSections out, in;
    sections_of(s, &out, &in);
    const auto& ops = exchange_.schedule.steps[s].ops;
    // Sends are packed in the communicator's send space (it outlives a failed step's requests),
    // sized first from the support.
    std::vector<T> values;
    std::vector<uint32_t> offsets;
    size_t packed = 0;
    for (const auto& [peer, sections] : out) {
      packed += sizeof(uint64_t);  // the sender's count, so that a receiver can tell a mismatch
      for (const Section& x : sections) {
        check_inside_slice(x, s);
        packed += sparse_section_bytes(support_in(x.begin, x.end), sizeof(T));
      }
    }
    std::byte* pack = context_.scratch->sends(packed);
    std::fill(pack, pack + packed, std::byte{0});
    StepTransfers step(context_, name);
    for (const auto& [peer, sections] : out) {
      std::byte* message = pack;
      std::memcpy(pack, &count_, sizeof count_);
      pack += sizeof count_;
      for (const Section& x : sections) {
        own_pairs(x.begin, x.end, &values, &offsets);
        const uint64_t c = values.size();
        std::memcpy(pack, &c, sizeof c);
        if (c > 0) {  // empty vectors may hold no pointer, which memcpy may not be given
          std::memcpy(pack + sizeof c, values.data(), c * sizeof(T));
          std::memcpy(pack + sizeof c + c * sizeof(T), offsets.data(), c * sizeof(uint32_t));
        }
        pack += sparse_section_bytes(c, sizeof(T));
      }
      step.send(peer, message, static_cast<size_t>(pack - message), sparse_tag(context_.sequence, s, rank_));
    }
    struct Incoming {
      std::byte* data = nullptr;
      size_t capacity = 0, received = 0;
    };
    std::map<int32_t, Incoming> incoming;
    size_t total = 0;
    for (const auto& [peer, sections] : in) {
      Incoming& x = incoming[peer];
      x.capacity = sizeof(uint64_t);
      for (const Section& section : sections) {
        check_inside_slice(section, s);
        x.capacity += sparse_section_bytes(pairs_bound(peer, section, s), sizeof(T));
      }
      total += x.capacity;
    }
    std::byte* space = context_.scratch->parts(total);
    for (const auto& [peer, sections] : in) {
      Incoming& x = incoming[peer];
      x.data = space;
      space += x.capacity;
      step.recv(peer, x.data, x.capacity, sparse_tag(context_.sequence, s, peer), &x.received);
    }
    step.wait();

    std::map<std::pair<int32_t, size_t>, Pairs> part;  // (peer, op) -> its pairs
    for (const auto& entry : in) {
      const int32_t peer = entry.first;  // a plain variable: clang 14 lambdas cannot capture bindings
      const std::vector<Section>& sections = entry.second;
      const Incoming& x = incoming[peer];
      uint64_t their_count = 0;
      if (x.received >= sizeof their_count) std::memcpy(&their_count, x.data, sizeof their_count);
      if (x.received < sizeof their_count || their_count != count_) {
        throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: {} passed {} elements, this rank {}: do all "
                                       "ranks pass the same count?",
                                       name, context_.describe_rank(peer), their_count, count_));
      }
      size_t at = sizeof their_count;
      for (const Section& section : sections) {
        auto fail = [&](const std::string& why) {
          return RuntimeError(fmt::format("flexplan sparse_allreduce: {}: {} sent a bad message for op {}: {}",
                                          name, context_.describe_rank(peer), section.op, why));
        };
        uint64_t c = 0;
        if (at + sizeof c > x.received) throw fail("too short");
        std::memcpy(&c, x.data + at, sizeof c);
        const uint64_t range = section.end - section.begin;
        if (c > pairs_bound(peer, section, s) || at + sparse_section_bytes(c, sizeof(T)) > x.received) {
          throw fail(fmt::format("{} pairs for a range of {} elements (at most {}) in {} bytes", c, range,
                                 pairs_bound(peer, section, s), x.received - at));
        }
        Pairs p{reinterpret_cast<const T*>(x.data + at + sizeof c),
                reinterpret_cast<const uint32_t*>(x.data + at + sizeof c + c * sizeof(T)), c};
        for (size_t i = 0; i < c; ++i) {
          if (p.offsets[i] >= range || (i > 0 && p.offsets[i] <= p.offsets[i - 1])) {
            throw fail(fmt::format("offset {} at pair {} is out of range or order", p.offsets[i], i));
          }
        }
        part[{peer, section.op}] = p;
        at += sparse_section_bytes(c, sizeof(T));
      }
      if (at != x.received) throw fail_length(name, peer, x.received, at);
    }

    std::vector<uint32_t> merged;
    for (size_t o = 0; o < ops.size(); ++o) {
      const ir::Op& op = ops[o];
      if (op.root == rank_ ? op.kind != ir::OpKind::Reduce : (op.kind != ir::OpKind::Broadcast ||
                                                             !part.count({op.root, o}))) {
        continue;
      }
      const uint64_t begin = element(op.begin), end = element(op.end);
      T* values_at = buffer_ + begin;
      const uint32_t first = static_cast<uint32_t>(begin - mine_.begin);
      merged.clear();
      if (op.kind == ir::OpKind::Reduce) {
        // In group order from zero, so that every root of the same range gets the same bits.
        own_pairs(begin, end, &values, &offsets);
        for (uint32_t offset : offsets) values_at[offset] = T{0};
        for (int32_t member : op.group) {
          const Pairs p = member == rank_ ? Pairs{values.data(), offsets.data(), values.size()} : part.at({member, o});
          for (size_t i = 0; i < p.count; ++i) values_at[p.offsets[i]] += p.values[i];
          // Offsets ascend in every member's pairs: their union is a linear merge.
          union_.clear();
          std::set_union(merged.begin(), merged.end(), p.offsets, p.offsets + p.count, std::back_inserter(union_));
          merged.swap(union_);
        }
        for (uint32_t& offset : merged) offset += first;
      } else {
        own_pairs(begin, end, &values, &offsets);
        for (uint32_t offset : offsets) values_at[offset] = T{0};
        const Pairs p = part.at({op.root, o});
        for (size_t i = 0; i < p.count; ++i) {
          values_at[p.offsets[i]] = p.values[i];
          merged.push_back(first + p.offsets[i]);
        }
      }
      const auto from = std::lower_bound(support_.begin(), support_.end(), first);
      const auto to = std::lower_bound(from, support_.end(), static_cast<uint32_t>(end - mine_.begin));
      const auto at = support_.erase(from, to);
      support_.insert(at, merged.begin(), merged.end());
    }
  }

  RuntimeError fail_length(const std::string& name, int32_t peer, size_t received, size_t parsed) const {
    return RuntimeError(fmt::format("flexplan sparse_allreduce: {}: {} sent {} bytes, {} of them whole sections",
                                    name, context_.describe_rank(peer), received, parsed));
  }

  const SparseContext& context_;
  const ir::SparseLayout& layout_;
  const ir::SparseExchange& exchange_;
  const int32_t rank_;
  const uint64_t count_;
  T* const buffer_;
  const ir::SparseLayout::Slice mine_;
  const double density_;
  std::vector<uint32_t> support_;  // offsets in the slice of the elements a value is held for
  std::vector<uint32_t> union_;    // merging space
  std::vector<uint64_t> unit_pairs_;  // by (rank, unit): start_bounds
  std::byte nothing_{};  // a single-copy acknowledgement's (empty) payload
};

template <typename T>
void run_typed(const SparseContext& context, const SparseArgs& args) {
  SparseRun<T>(context, args).run(args);
}

}  // namespace

void run_sparse_allreduce(const SparseContext& context, const SparseArgs& args) {
  if (!(args.density > 0.0 && args.density <= 1.0)) {
    throw InputError(fmt::format("flexplan sparse_allreduce: density {} is not in (0, 1]", args.density));
  }
  if (args.iterations < 0 || args.iterations > 64) {
    throw InputError(fmt::format("flexplan sparse_allreduce: {} MSTopK iterations (0 to 64)", args.iterations));
  }
  if (context.exchange->schedule.steps.size() >= (size_t{1} << (tag::kMessageBits - kSenderBits))) {
    throw InputError(fmt::format("flexplan sparse_allreduce: the exchange has {} steps, more than its tags number",
                                 context.exchange->schedule.steps.size()));
  }
  if (context.layout->machine_of.size() >= (size_t{1} << kSenderBits)) {
    throw InputError("flexplan sparse_allreduce: at most 2^23 ranks");
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
