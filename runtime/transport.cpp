// The transport seam's own part (transport.hpp): single copy where both ends share a host,
// alike for every implementation and every executor.
#include "runtime/transport.hpp"

#include <utility>

namespace flexplan {

void Transport::set_single_copy(std::vector<pid_t> readable_pids, size_t min_bytes) {
  single_copy_pids_ = std::move(readable_pids);
  single_copy_min_bytes_ = min_bytes;
}

Transport::SingleCopyRead Transport::single_copy_check(const void* message, size_t length, size_t expected) const {
  SingleCopyRead result;
  if (!single_copy::is_descriptor(message, length, &result.got)) {
    result.code = SingleCopyRead::NotDescriptor;
  } else if (result.got.bytes != expected) {
    result.code = SingleCopyRead::WrongLength;
  }
  return result;
}

Transport::SingleCopyRead Transport::single_copy_read(int32_t peer, const void* message, size_t length,
                                                      size_t expected, void* into) {
  SingleCopyRead result = single_copy_check(message, length, expected);
  if (result.code != SingleCopyRead::Ok) return result;
  result.why = single_copy_read_part(peer, result.got, 0, result.got.bytes, into);
  if (!result.why.empty()) result.code = SingleCopyRead::ReadFailed;
  return result;
}

std::string Transport::single_copy_read_part(int32_t peer, const single_copy::Descriptor& descriptor, size_t offset,
                                             size_t bytes, void* into) {
  if (offset > descriptor.bytes || bytes > descriptor.bytes - offset) {
    return "a part beyond the range the descriptor names";
  }
  return read_from_peer(peer, single_copy_pids_[static_cast<size_t>(peer)], descriptor.address + offset, into, bytes);
}

bool Transport::looks_like_descriptor(int32_t peer, const void* data, size_t length, size_t expected,
                                      uint64_t max_cookie) const {
  single_copy::Descriptor descriptor;
  return expected == sizeof descriptor && single_copy_on() && single_copy_pids_[static_cast<size_t>(peer)] != 0 &&
         single_copy::is_descriptor(data, length, &descriptor) && descriptor.bytes >= single_copy_min_bytes_ &&
         descriptor.address != 0 && descriptor.cookie <= max_cookie;
}

std::string Transport::read_from_peer(int32_t /*peer*/, pid_t pid, uint64_t remote, void* local, size_t bytes) {
  return single_copy::read(pid, remote, local, bytes);
}

}  // namespace flexplan
