// Single-copy transfers between processes of one host: the receiver reads a chunk straight out
// of its sender's memory with Linux cross-memory attach (process_vm_readv), where UCX's
// shared-memory FIFO copies it twice (into the FIFO, out of it). The runtime's own, not UCX's
// CMA, because a failed read must fail the operation, not abort the process (docs/runtime.md,
// Single-copy transfers).
//
// A chunk sent this way is a descriptor message under the chunk's tag (where the data lies in
// the sender, and a cookie); the receiver reads, then answers with an empty message under
// tag::ack(sequence, cookie), and only then may the sender reuse the memory.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flexplan::single_copy {

// Chunks of at least this many bytes go by single copy between processes of one host; smaller
// ones through the FIFO, where the descriptor and the acknowledgement would cost more than the
// copies they save (docs/flexbench.md).
inline constexpr size_t kDefaultMinBytes = 32 * 1024;

struct Descriptor {
  uint64_t magic = 0;    // kMagic: tells a descriptor from data of the same length
  uint64_t address = 0;  // in the sender's address space
  uint64_t bytes = 0;
  uint64_t cookie = 0;   // echoed in the acknowledgement's tag
};
// A receiver expecting a descriptor checks it; one expecting 32 bytes of data from a peer that
// sent a descriptor instead (ranks passing different counts) recognises it by it.
inline constexpr uint64_t kMagic = 0x79706f632d656c67;  // "gle-copy"

// Whether a message of `bytes` bytes to or from `peer` goes by single copy: single copy is on
// (`pids`, by plan rank, is not empty), the peer is a process of this host that can be read
// (its pid is known), and the message is at least `min_bytes` long. Both ends decide alike.
inline bool goes_by_single_copy(const std::vector<pid_t>& pids, size_t min_bytes, int32_t peer, size_t bytes) {
  return bytes >= min_bytes && !pids.empty() && pids[static_cast<size_t>(peer)] != 0;
}

// Whether a message of `length` bytes is a descriptor (copied out, since UCX buffers need not
// be aligned for it).
bool is_descriptor(const void* message, size_t length, Descriptor* out = nullptr);

// What a process publishes so that the others of its host can check that they can read it:
// its pid, and the address and value of a word only it holds.
struct ProbeTarget {
  pid_t pid = 0;
  uint64_t address = 0;
  uint64_t nonce = 0;
};
// This process's target (the same on every call), as bytes for the bootstrap exchange. Where
// the kernel restricts reads to a process's descendants (Yama ptrace_scope 1), first lets any
// process of this user read this one (prctl PR_SET_PTRACER), as MPI libraries do for CMA.
std::string publish_probe_target();
// Whether this process can read the published target: the read succeeds and finds the nonce
// (so the pid is that very process, not another in a different pid namespace). Empty on
// success, else why not ("process_vm_readv: Operation not permitted").
std::string probe(const std::string& published);
// The pid in a published target.
pid_t pid_of(const std::string& published);

// Reads `bytes` from `remote` in process `pid` into `local`. Empty on success, else the
// system's reason (a peer that died: "No such process").
std::string read(pid_t pid, uint64_t remote, void* local, size_t bytes);

}  // namespace flexplan::single_copy
