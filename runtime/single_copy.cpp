// Cross-memory reads between processes of one host (single_copy.hpp).
#include "runtime/single_copy.hpp"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace flexplan::single_copy {
namespace {

// The word peers read to check that they can: a per-process random value, so that a read that
// reaches some other process by the same pid (another pid namespace) does not pass.
const uint64_t& probe_word() {
  static const uint64_t word = [] {
    std::random_device device;
    const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return (uint64_t{device()} << 32 | device()) ^ now ^ static_cast<uint64_t>(getpid());
  }();
  return word;
}

}  // namespace

bool is_descriptor(const void* message, size_t length, Descriptor* out) {
  Descriptor descriptor;
  if (length != sizeof descriptor) return false;
  std::memcpy(&descriptor, message, sizeof descriptor);
  if (descriptor.magic != kMagic) return false;
  if (out != nullptr) *out = descriptor;
  return true;
}

std::string publish_probe_target() {
#ifdef PR_SET_PTRACER
  // Fails harmlessly (EINVAL) where Yama is absent.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
  const ProbeTarget target{getpid(), reinterpret_cast<uint64_t>(&probe_word()), probe_word()};
  return std::string(reinterpret_cast<const char*>(&target), sizeof target);
}

pid_t pid_of(const std::string& published) {
  ProbeTarget target;
  if (published.size() != sizeof target) return 0;
  std::memcpy(&target, published.data(), sizeof target);
  return target.pid;
}

std::string probe(const std::string& published) {
  ProbeTarget target;
  if (published.size() != sizeof target) return "malformed probe target";
  std::memcpy(&target, published.data(), sizeof target);
  uint64_t word = 0;
  if (auto error = read(target.pid, target.address, &word, sizeof word); !error.empty()) return error;
  if (word != target.nonce) return fmt::format("pid {} is another process here (another pid namespace?)", target.pid);
  return "";
}

std::string read(pid_t pid, uint64_t remote, void* local, size_t bytes) {
  auto* to = static_cast<char*>(local);
  while (bytes > 0) {
    iovec local_part{to, bytes};
    iovec remote_part{reinterpret_cast<void*>(remote), bytes};
    const ssize_t got = process_vm_readv(pid, &local_part, 1, &remote_part, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return fmt::format("process_vm_readv from pid {}: {}", pid, std::strerror(errno));
    }
    if (got == 0) return fmt::format("process_vm_readv from pid {}: read nothing", pid);
    // A partial read: the kernel stops at a page it could not take; go on from there.
    to += got;
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return "";
}

}  // namespace flexplan::single_copy
