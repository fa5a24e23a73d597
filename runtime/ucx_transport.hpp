// The UCX implementation of the transport seam (transport.hpp): one context, one worker, one
// endpoint per peer, tagged send/recv on host memory. Knows nothing of plans; ranks here are
// plan ranks. Only the seam's users below it (this file, tools that time bare UCX) include it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ucp/api/ucp.h>

#include "runtime/transport.hpp"

namespace flexplan {

class UcxTransport final : public Transport {
 public:
  // Context and worker. `blocking` adds UCP_FEATURE_WAKEUP for wait_for_event. UCX's own
  // configuration (UCX_TLS, UCX_NET_DEVICES, ...) comes from the environment as usual;
  // `transports`, if given, replaces UCX_TLS. `eager`, unless UCX_RNDV_THRESH is set, sends
  // every message eagerly (RNDV_THRESH=inf; docs/runtime.md, Eager chunks). `copy_sends`,
  // unless UCX_ZCOPY_THRESH is set, keeps sends off UCX's zero-copy path (ZCOPY_THRESH=inf):
  // UCX 1.13's TCP transport can complete a zero-copy send twice when its peer dies and abort
  // the sender (docs/runtime.md, Timeouts and errors). Throws RuntimeError.
  UcxTransport(bool blocking, int32_t world_size, const char* transports = nullptr, bool eager = false,
               bool copy_sends = false);
  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  const char* name() const override { return "UCX"; }

  // The worker address that peers need to reach this one.
  const std::vector<uint8_t>& address() const override { return address_; }

  // Endpoints to every rank but `self`, from all ranks' worker addresses indexed by rank.
  // For the peers with detect_failure[peer], UCX reports a dead peer
  // (UCP_ERR_HANDLING_MODE_PEER) and failure() names it.
  void connect(const std::vector<std::vector<uint8_t>>& addresses, int32_t self,
               const std::vector<bool>& detect_failure) override;

  // The seam's transfers: one piece goes contiguous (UCX's short path for small messages),
  // more as UCX's iov datatype.
  Status send(int32_t peer, const Piece* pieces, size_t count, uint64_t tag, Completion* completion,
              Request* request) override;
  Status recv(const Piece* pieces, size_t count, uint64_t tag, uint64_t tag_mask, Completion* completion,
              Request* request) override;
  using Transport::recv;
  using Transport::send;
  void cancel(Request request) override { ucp_request_cancel(worker_, request); }
  void release(Request request) override { ucp_request_free(request); }

  // Bare UCX transfers, for tools that time UCX itself (bench/flexbench/overhead.cpp): a send
  // returns nullptr when complete at once, UCS_PTR_IS_ERR on failure, else a request to poll
  // with ucp_request_check_status and free with ucp_request_free.
  ucs_status_ptr_t ucx_send(int32_t peer, const void* buffer, size_t bytes, uint64_t tag);
  ucs_status_ptr_t ucx_recv(void* buffer, size_t bytes, uint64_t tag);

  static Status status_of(ucs_status_t status);

  // Drives UCX until it has nothing more to do now; true if anything happened.
  bool progress() override;
  // Blocking mode: sleep until UCX has an event or `limit` passed. Returns at once if events
  // are already pending.
  void wait_for_event(std::chrono::milliseconds limit) override;
  bool blocking() const override { return event_fd_ >= 0; }

  const std::optional<PeerFailure>& failure() const override { return failure_; }

  // Abort notices go under the reserved tag (tag::abort_tag). connect() posts the receive for
  // the first one to arrive.
  // Sends `reason` (cut to a few KB) from rank `self` to every peer, progressing until the
  // sends are out or `limit` passed (a dead peer's may never be).
  void send_abort(int32_t self, const std::string& reason, std::chrono::milliseconds limit) override;
  // The first notice received, if any (call after progress()).
  std::optional<AbortNotice> abort_notice() override;

  // Shutdown, best effort within `limit`: flush every endpoint (all sent data delivered).
  // Returns false on timeout or error.
  bool flush(std::chrono::milliseconds limit) override;
  // Close every endpoint; `force` skips the goodbye with the peer (used once all ranks are
  // known to be done, or when the job is broken).
  void close_endpoints(bool force, std::chrono::milliseconds limit) override;

 private:
  struct ErrorContext {
    UcxTransport* transport;
    int32_t rank;
  };
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  // Progresses until `request` completes or `limit` passes; frees it. False on timeout/error.
  bool wait_request(ucs_status_ptr_t request, std::chrono::milliseconds limit);

  void cancel_abort_receive();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<uint8_t> address_;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<ErrorContext> error_contexts_;
  std::optional<PeerFailure> failure_;
  std::vector<char> abort_inbox_;    // the notice received: origin rank (int32), then the reason
  void* abort_receive_ = nullptr;    // its receive request, until it completes
  std::optional<AbortNotice> abort_notice_;
  std::vector<char> abort_outbox_;   // the notice sent; UCX may read it until the endpoints close
};

}  // namespace flexplan
