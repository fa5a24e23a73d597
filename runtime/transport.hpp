// The transport seam: the small interface every executor (Operation, the sparse exchange) is
// written against. Tagged, non-blocking sends and receives of a buffer range (or up to three
// pieces of one), told complete through a callback from inside progress(); single copy where
// both ends share a host; peer failures and abort notices; an orderly close. UCX is the implementation the communicator uses
// (ucx_transport.hpp); tests run the executor over an in-process one. Nothing here knows plans.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <sys/types.h>
#include <string>
#include <vector>

#include "runtime/single_copy.hpp"

namespace flexplan {

// How a transfer ended. `text` is the implementation's own words for it (static storage), so
// that error messages read as they always did ("Message truncated", "Connection reset ...").
struct TransportStatus {
  enum Code : uint8_t {
    Ok,
    Truncated,  // the message was longer than the receive's pieces
    Canceled,
    Failed,     // anything else: a dead peer, an endpoint error
  };
  Code code = Ok;
  const char* text = "Success";
  bool ok() const { return code == Ok; }
};

class Transport {
 public:
  using Status = TransportStatus;
  // An operation in flight, opaque; null where it completed at once.
  using Request = void*;

  // A range of a message: a call signature before the data, a sink behind it
  // (call_signature.hpp). Laid out as UCX's iov entry, which ucx_transport.cpp checks.
  struct Piece {
    void* data;
    size_t bytes;
  };
  static constexpr size_t kMaxPieces = 3;

  // Told when a transfer completes, from inside progress() (or from inside recv() when the
  // message is already there): its status and, for a receive, the received length and the tag it
  // was sent with (which a masked receive needs). A released request is never told.
  struct Completion {
    void (*notify)(Completion* self, Status status, size_t length, uint64_t tag) = nullptr;
  };

  struct PeerFailure {
    int32_t rank;
    Status status;
  };
  // Abort notices: one short message to every peer, saying which rank failed and why.
  struct AbortNotice {
    int32_t rank;
    std::string reason;
  };

  virtual ~Transport() = default;
  // Names the implementation in messages ("UCX reports peer rank 3 failed: ...").
  virtual const char* name() const = 0;

  // What peers need to reach this one, and the connection to every rank but `self` from all
  // ranks' addresses indexed by rank. For the peers with detect_failure[peer], a dead peer is
  // reported (failure()). connect() also posts the receive for abort notices.
  virtual const std::vector<uint8_t>& address() const = 0;
  virtual void connect(const std::vector<std::vector<uint8_t>>& addresses, int32_t self,
                       const std::vector<bool>& detect_failure) = 0;

  // Non-blocking tagged transfers of `count` (1 to kMaxPieces) pieces, gathered on send and
  // scattered on receive; the piece array must stay untouched until the transfer completes.
  // A send sets *request to null when it completed at once (nothing is told then). A receive
  // always gets a request; its length tells a count mismatch, and a message longer than its
  // pieces ends Truncated. A status not ok: nothing was posted.
  virtual Status send(int32_t peer, const Piece* pieces, size_t count, uint64_t tag, Completion* completion,
                      Request* request) = 0;
  virtual Status recv(const Piece* pieces, size_t count, uint64_t tag, uint64_t tag_mask, Completion* completion,
                      Request* request) = 0;
  // Contiguous forms.
  Status send(int32_t peer, const void* data, size_t bytes, uint64_t tag, Completion* completion, Request* request) {
    const Piece piece{const_cast<void*>(data), bytes};
    return send(peer, &piece, 1, tag, completion, request);
  }
  Status recv(void* data, size_t bytes, uint64_t tag, Completion* completion, Request* request,
              uint64_t tag_mask = ~uint64_t{0}) {
    const Piece piece{data, bytes};
    return recv(&piece, 1, tag, tag_mask, completion, request);
  }
  // Single copy where both ends share a host (single_copy.hpp; docs/runtime.md, Single-copy
  // transfers). A message that goes so is a descriptor of the sender's range under the message's
  // own tag (single_copy_descriptor); the receiver hands it to single_copy_read, which checks it
  // and reads the range straight out of the sender, then acknowledges with an empty message
  // under tag::ack(sequence, cookie); until the ack the sender's range stays untouched. Both ends
  // decide alike (single_copy_to) from the length and the peer. Set once after creation's probe:
  // by rank, the pid of a peer on this host that this process can read, 0 for the others; empty
  // (the default) is off. Every rank uses the same min_bytes.
  void set_single_copy(std::vector<pid_t> readable_pids, size_t min_bytes);
  bool single_copy_on() const { return !single_copy_pids_.empty(); }
  size_t single_copy_min_bytes() const { return single_copy_min_bytes_; }
  bool single_copy_to(int32_t peer, size_t bytes) const {
    return single_copy::goes_by_single_copy(single_copy_pids_, single_copy_min_bytes_, peer, bytes);
  }
  // The descriptor message of `bytes` at `data` for single_copy_to(peer, bytes); the cookie comes
  // back in the acknowledgement's tag.
  static single_copy::Descriptor single_copy_descriptor(const void* data, size_t bytes, uint64_t cookie) {
    return {single_copy::kMagic, reinterpret_cast<uint64_t>(data), bytes, cookie};
  }
  // What a received descriptor message (`length` bytes at `message`) from `peer` says and the
  // read it names: `expected` bytes into `into`. Ok, or NotDescriptor (the peer sent something
  // else, *got untouched: ranks passing different counts), WrongLength (*got says what it
  // describes), ReadFailed (`why` has the system's reason: a peer that died).
  struct SingleCopyRead {
    enum Code : uint8_t { Ok, NotDescriptor, WrongLength, ReadFailed };
    Code code = Ok;
    single_copy::Descriptor got{};
    std::string why;
  };
  SingleCopyRead single_copy_read(int32_t peer, const void* message, size_t length, size_t expected, void* into);
  // The same checks without the read (Ok, NotDescriptor or WrongLength), for a receiver that reads
  // the range later in parts (single_copy_read_part), as a reduce does to add each part while it
  // is in cache; the sender's range stays untouched until the receiver's ack, whenever it reads.
  SingleCopyRead single_copy_check(const void* message, size_t length, size_t expected) const;
  // Reads `bytes` at `offset` of the range a checked descriptor from `peer` names into `into`:
  // empty, or why not (a part beyond the range is refused, not read).
  std::string single_copy_read_part(int32_t peer, const single_copy::Descriptor& descriptor, size_t offset,
                                    size_t bytes, void* into);
  // Whether `length` bytes of data where `expected` were due from `peer` are in fact a plausible
  // descriptor (a peer that sent a long message where this rank expects a short one).
  bool looks_like_descriptor(int32_t peer, const void* data, size_t length, size_t expected,
                             uint64_t max_cookie) const;

  // Cancels a receive (its completion is then told, Canceled, unless released first).
  virtual void cancel(Request request) = 0;
  // Gives the request back: once it completed, or to stop its notification. The transfer may
  // still move on its own (a send's data is read until the transport closes).
  virtual void release(Request request) = 0;

  // Moves whatever can move now; true if anything happened.
  virtual bool progress() = 0;
  // Blocking mode: sleep until an event or `limit` passed; returns at once where events are
  // already pending, and at once outside blocking mode.
  virtual void wait_for_event(std::chrono::milliseconds limit) = 0;
  virtual bool blocking() const = 0;

  // The first peer found dead, if any.
  virtual const std::optional<PeerFailure>& failure() const = 0;

  // Sends `reason` (cut to a few KB) from rank `self` to every peer, progressing until the
  // sends are out or `limit` passed (a dead peer's may never be). Once.
  virtual void send_abort(int32_t self, const std::string& reason, std::chrono::milliseconds limit) = 0;
  // The first notice received, if any (call after progress()).
  virtual std::optional<AbortNotice> abort_notice() = 0;

  // Shutdown, best effort within `limit`: everything sent delivered. False on timeout or error.
  virtual bool flush(std::chrono::milliseconds limit) = 0;
  // Closes every connection; `force` skips the goodbye with the peer.
  virtual void close_endpoints(bool force, std::chrono::milliseconds limit) = 0;

 protected:
  // The read behind single_copy_read: `bytes` at `remote` in `peer`'s memory into `local`; empty
  // on success, else why. Cross-memory attach from the peer's pid (single_copy::read); an
  // implementation whose peers share its address space may copy instead.
  virtual std::string read_from_peer(int32_t peer, pid_t pid, uint64_t remote, void* local, size_t bytes);

 private:
  std::vector<pid_t> single_copy_pids_;
  size_t single_copy_min_bytes_ = single_copy::kDefaultMinBytes;
};

// The UCX implementation (ucx_transport.cpp). `blocking` makes wait_for_event sleep on the
// worker's event fd. `transports`, if given, replaces UCX_TLS; `eager` sends every message
// eagerly unless UCX_RNDV_THRESH is set; `copy_sends` keeps sends off the zero-copy path unless
// UCX_ZCOPY_THRESH is set (ucx_transport.hpp says why). Throws RuntimeError.
std::unique_ptr<Transport> make_ucx_transport(bool blocking, int32_t world_size, const char* transports,
                                              bool eager, bool copy_sends);

}  // namespace flexplan
