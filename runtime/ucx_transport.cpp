// The UCX implementation of the transport seam: context, worker, endpoints, tagged transfers.
#include "runtime/ucx_transport.hpp"

#include <poll.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <ucs/config/global_opts.h>

#include "runtime/errors.hpp"
#include "runtime/tag.hpp"

namespace flexplan {
namespace {

void check(ucs_status_t status, const char* what) {
  if (status != UCS_OK) {
    throw RuntimeError(fmt::format("UCX {} failed: {}", what, ucs_status_string(status)));
  }
}

using Clock = std::chrono::steady_clock;

// An abort notice: the failing rank (int32) and its reason, cut to fit.
constexpr size_t kAbortNoticeBytes = 4096;

}  // namespace

UcxTransport::UcxTransport(bool blocking, int32_t world_size, const char* transports, bool eager,
                           bool copy_sends) {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  auto modify = [&](const char* name, const std::string& value) {
    const ucs_status_t status = ucp_config_modify(config, name, value.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      throw RuntimeError(fmt::format("UCX ucp_config_modify({}={}) failed: {}", name, value,
                                     ucs_status_string(status)));
    }
  };
  if (transports != nullptr) modify("TLS", transports);
  // Rendezvous over TCP stalls a chunk pipeline whose data flows both ways (each handshake
  // waits behind the bulk data queued on the socket); eager chunks keep it streaming. The
  // chunking rule bounds every message, so no threshold is needed below it. The user's
  // UCX_RNDV_THRESH wins.
  if (eager && std::getenv("UCX_RNDV_THRESH") == nullptr) modify("RNDV_THRESH", "inf");
  if (copy_sends && std::getenv("UCX_ZCOPY_THRESH") == nullptr) modify("ZCOPY_THRESH", "inf");

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | (blocking ? UCP_FEATURE_WAKEUP : 0);
  params.estimated_num_eps = static_cast<size_t>(world_size);
  const ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(status, "ucp_init");
  try {
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // One thread drives a communicator (progress happens inside the caller's wait/test).
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    check(ucp_worker_create(context_, &worker_params, &worker_), "ucp_worker_create");
    if (blocking) check(ucp_worker_get_efd(worker_, &event_fd_), "ucp_worker_get_efd");

    ucp_address_t* address = nullptr;
    size_t length = 0;
    check(ucp_worker_get_address(worker_, &address, &length), "ucp_worker_get_address");
    const auto* bytes = reinterpret_cast<const uint8_t*>(address);
    address_.assign(bytes, bytes + length);
    ucp_worker_release_address(worker_, address);
  } catch (...) {
    // The destructor does not run for a half-built object.
    if (worker_) ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw;
  }
}

UcxTransport::~UcxTransport() {
  cancel_abort_receive();
  // Endpoints still open here belong to a failed shutdown: drop them without a goodbye.
  close_endpoints(/*force=*/true, std::chrono::milliseconds(1000));
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
}

void UcxTransport::connect(const std::vector<std::vector<uint8_t>>& addresses, int32_t self,
                           const std::vector<bool>& detect_failure) {
  endpoints_.assign(addresses.size(), nullptr);
  error_contexts_.clear();
  error_contexts_.reserve(addresses.size());  // stable addresses for the callbacks' args
  for (size_t peer = 0; peer < addresses.size(); ++peer) {
    error_contexts_.push_back({this, static_cast<int32_t>(peer)});
    if (static_cast<int32_t>(peer) == self) continue;
    const bool detect_peer_failure = detect_failure[peer];
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
    params.err_mode = detect_peer_failure ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (detect_peer_failure) {
      params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      params.err_handler.cb = &UcxTransport::on_endpoint_error;
      params.err_handler.arg = &error_contexts_.back();
    }
    const ucs_status_t status = ucp_ep_create(worker_, &params, &endpoints_[peer]);
    if (status != UCS_OK) {
      throw RuntimeError(fmt::format("UCX ucp_ep_create to rank {} failed: {}", peer,
                                     ucs_status_string(status)));
    }
  }
  abort_inbox_.assign(kAbortNoticeBytes, '\0');
  const ucs_status_ptr_t request = ucx_recv(abort_inbox_.data(), abort_inbox_.size(), tag::abort_tag());
  if (UCS_PTR_IS_ERR(request)) {
    throw RuntimeError(fmt::format("UCX receive for abort notices failed: {}",
                                   ucs_status_string(UCS_PTR_STATUS(request))));
  }
  abort_receive_ = request;
}

namespace {
// Once a job has failed, the runtime's own error names the cause; UCX's complaints about peers
// that already exited (a failed shmat of a dead peer's shared memory, for one) only bury it.
// A UCX_LOG_LEVEL the user set stands.
void quiet_ucx_after_failure() {
  if (std::getenv("UCX_LOG_LEVEL") == nullptr) ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_FATAL;
}
}  // namespace

void UcxTransport::send_abort(int32_t self, const std::string& reason, std::chrono::milliseconds limit) {
  if (!abort_outbox_.empty()) return;  // once
  quiet_ucx_after_failure();
  const std::string text = reason.substr(0, kAbortNoticeBytes - sizeof(int32_t));
  abort_outbox_.resize(sizeof(int32_t) + text.size());
  std::memcpy(abort_outbox_.data(), &self, sizeof(int32_t));
  std::memcpy(abort_outbox_.data() + sizeof(int32_t), text.data(), text.size());
  std::vector<ucs_status_ptr_t> sends;
  for (size_t peer = 0; peer < endpoints_.size(); ++peer) {
    if (!endpoints_[peer]) continue;
    const ucs_status_ptr_t request =
        ucx_send(static_cast<int32_t>(peer), abort_outbox_.data(), abort_outbox_.size(), tag::abort_tag());
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) sends.push_back(request);
  }
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline &&
         std::any_of(sends.begin(), sends.end(),
                     [](void* r) { return ucp_request_check_status(r) == UCS_INPROGRESS; })) {
    if (!progress()) wait_for_event(std::chrono::milliseconds(1));
  }
  // One still in flight (to a dead peer) is released when it completes or its endpoint closes.
  for (void* request : sends) ucp_request_free(request);
}

std::optional<Transport::AbortNotice> UcxTransport::abort_notice() {
  if (abort_notice_ || abort_receive_ == nullptr) return abort_notice_;
  if (ucp_request_check_status(abort_receive_) == UCS_INPROGRESS) return std::nullopt;
  ucp_tag_recv_info_t info{};
  const ucs_status_t status = ucp_tag_recv_request_test(abort_receive_, &info);
  ucp_request_free(abort_receive_);
  abort_receive_ = nullptr;
  AbortNotice notice{-1, ""};
  if (status == UCS_OK && info.length >= sizeof(int32_t)) {
    std::memcpy(&notice.rank, abort_inbox_.data(), sizeof(int32_t));
    notice.reason.assign(abort_inbox_.data() + sizeof(int32_t), info.length - sizeof(int32_t));
  } else {
    notice.reason = fmt::format("(an abort notice that could not be read: {})", ucs_status_string(status));
  }
  abort_notice_ = notice;
  quiet_ucx_after_failure();
  return abort_notice_;
}

void UcxTransport::cancel_abort_receive() {
  if (abort_receive_ == nullptr) return;
  cancel(abort_receive_);
  ucp_request_free(abort_receive_);
  abort_receive_ = nullptr;
}

void UcxTransport::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  const auto* context = static_cast<const ErrorContext*>(arg);
  if (!context->transport->failure_) context->transport->failure_ = PeerFailure{context->rank, status_of(status)};
}

static_assert(sizeof(Transport::Piece) == sizeof(ucp_dt_iov_t) &&
                  offsetof(Transport::Piece, data) == offsetof(ucp_dt_iov_t, buffer) &&
                  offsetof(Transport::Piece, bytes) == offsetof(ucp_dt_iov_t, length),
              "the seam's pieces are UCX iov entries, passed as they are");

Transport::Status UcxTransport::status_of(ucs_status_t status) {
  Status out;
  out.text = ucs_status_string(status);
  switch (status) {
    case UCS_OK: out.code = Status::Ok; break;
    case UCS_ERR_MESSAGE_TRUNCATED: out.code = Status::Truncated; break;
    case UCS_ERR_CANCELED: out.code = Status::Canceled; break;
    default: out.code = Status::Failed; break;
  }
  return out;
}

namespace {
// The send and receive parameters (and callbacks) shared by the contiguous and iov forms.
ucp_request_param_t send_param(Transport::Completion* completion) {
  ucp_request_param_t param{};
  if (completion != nullptr) {
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = [](void*, ucs_status_t status, void* user_data) {
      auto* c = static_cast<Transport::Completion*>(user_data);
      c->notify(c, UcxTransport::status_of(status), 0, 0);
    };
    param.user_data = completion;
  }
  return param;
}
ucp_request_param_t recv_param(Transport::Completion* completion) {
  ucp_request_param_t param{};
  // UCX 1.13 leaves the receive info unset when a receive completes at once, and the length is
  // what tells a count mismatch: always take a request.
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  if (completion != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.recv = [](void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
      auto* c = static_cast<Transport::Completion*>(user_data);
      const bool told = status == UCS_OK && info != nullptr;
      c->notify(c, UcxTransport::status_of(status), told ? info->length : 0, told ? info->sender_tag : 0);
    };
    param.user_data = completion;
  }
  return param;
}
// A posted request as the seam gives it: the status, the request (null: complete at once).
Transport::Status posted(ucs_status_ptr_t result, Transport::Request* request) {
  if (UCS_PTR_IS_ERR(result)) {
    *request = nullptr;
    return UcxTransport::status_of(UCS_PTR_STATUS(result));
  }
  *request = result;
  return {};
}
}  // namespace

Transport::Status UcxTransport::send(int32_t peer, const Piece* pieces, size_t count, uint64_t tag,
                                     Completion* completion, Request* request) {
  ucp_request_param_t param = send_param(completion);
  const ucp_ep_h ep = endpoints_[static_cast<size_t>(peer)];
  if (count == 1) return posted(ucp_tag_send_nbx(ep, pieces[0].data, pieces[0].bytes, tag, &param), request);
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_iov();
  return posted(ucp_tag_send_nbx(ep, pieces, count, tag, &param), request);
}

Transport::Status UcxTransport::recv(const Piece* pieces, size_t count, uint64_t tag, uint64_t tag_mask,
                                     Completion* completion, Request* request) {
  ucp_request_param_t param = recv_param(completion);
  if (count == 1)
    return posted(ucp_tag_recv_nbx(worker_, pieces[0].data, pieces[0].bytes, tag, tag_mask, &param), request);
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_iov();
  // (UCX writes no iov entry: the cast only meets its signature.)
  return posted(ucp_tag_recv_nbx(worker_, const_cast<Piece*>(pieces), count, tag, tag_mask, &param), request);
}

ucs_status_ptr_t UcxTransport::ucx_send(int32_t peer, const void* buffer, size_t bytes, uint64_t tag) {
  const ucp_request_param_t param = send_param(nullptr);
  return ucp_tag_send_nbx(endpoints_[static_cast<size_t>(peer)], buffer, bytes, tag, &param);
}

ucs_status_ptr_t UcxTransport::ucx_recv(void* buffer, size_t bytes, uint64_t tag) {
  const ucp_request_param_t param = recv_param(nullptr);
  return ucp_tag_recv_nbx(worker_, buffer, bytes, tag, ~uint64_t{0}, &param);
}

bool UcxTransport::progress() {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

void UcxTransport::wait_for_event(std::chrono::milliseconds limit) {
  if (event_fd_ < 0) return;
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_ERR_BUSY) return;  // events arrived since the last progress
  check(status, "ucp_worker_arm");
  pollfd fd{event_fd_, POLLIN, 0};
  ::poll(&fd, 1, static_cast<int>(limit.count()));
}

bool UcxTransport::wait_request(ucs_status_ptr_t request, std::chrono::milliseconds limit) {
  if (request == nullptr) return true;
  if (UCS_PTR_IS_ERR(request)) return false;
  const auto deadline = Clock::now() + limit;
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (Clock::now() > deadline) {
      ucp_request_free(request);
      return false;
    }
    // Sends pending: the worker's event fd may not fire when they complete (see Engine::wait).
    if (!progress()) wait_for_event(std::chrono::milliseconds(1));
  }
  ucp_request_free(request);
  return status == UCS_OK;
}

bool UcxTransport::flush(std::chrono::milliseconds limit) {
  ucp_request_param_t param{};
  return wait_request(ucp_worker_flush_nbx(worker_, &param), limit);
}

void UcxTransport::close_endpoints(bool force, std::chrono::milliseconds limit) {
  std::vector<ucs_status_ptr_t> closing;
  for (ucp_ep_h& ep : endpoints_) {
    if (!ep) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    closing.push_back(ucp_ep_close_nbx(ep, &param));
    ep = nullptr;
  }
  const auto deadline = Clock::now() + limit;
  for (ucs_status_ptr_t request : closing) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    wait_request(request, std::max(left, std::chrono::milliseconds(0)));
  }
}

std::unique_ptr<Transport> make_ucx_transport(bool blocking, int32_t world_size, const char* transports,
                                              bool eager, bool copy_sends) {
  return std::make_unique<UcxTransport>(blocking, world_size, transports, eager, copy_sends);
}

}  // namespace flexplan
