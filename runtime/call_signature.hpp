// Call signatures: every message of a call carries what its sender called (collective, root,
// type, op, count, call number), and the receiver compares it with its own call, so that ranks
// issuing different calls of the same byte size fail, naming both, instead of computing
// something (docs/runtime.md, Call checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/datatype.hpp"

namespace flexplan {

// The collective a caller asked for. The runtime carries several out as all-reduces (the
// PyTorch backend's broadcast and all-gather); naming the real one lets a rank calling
// broadcast and one calling all-reduce of the same size fail rather than both "succeed".
enum class UserCollective : uint8_t {
  AllReduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  Reduce,
  SparseAllReduce,
  SparseMachineSteps,
  Barrier,
};
// "allreduce", "broadcast", "allgather", "reduce_scatter", "reduce", "sparse_allreduce", "barrier", ...
std::string_view to_string(UserCollective collective);

// What the caller called, when it is not a plain all-reduce of the arguments given.
struct CallInfo {
  UserCollective collective = UserCollective::AllReduce;
  int32_t root = -1;  // broadcast's or reduce's root rank; -1 where there is none
  // The caller's element type and count where the runtime moves the data as another (bytes
  // for a broadcast of any type, the concatenation for an all-gather): compared and named
  // instead of the runtime's.
  std::optional<DataType> type;
  std::optional<uint64_t> count;
  // A reduce-scatter's or all-gather's per-rank counts when the call gives them (the v forms):
  // a digest of them (layout_digest), 0 for equal counts.
  uint64_t layout = 0;
};

// A digest of per-rank counts for CallInfo::layout (never 0).
uint64_t layout_digest(const uint64_t* counts, size_t ranks);

// On the wire, first in every message of a call (32 bytes, host byte order: one job, one
// architecture).
struct CallSignature {
  uint32_t magic = 0;  // kMagic: tells a signature from data (a peer that sends none)
  uint8_t collective = 0;
  uint8_t type = 0;
  uint8_t op = 0;
  uint8_t reserved = 0;
  int32_t root = -1;
  uint32_t call = 0;   // the communicator's call number (sequence), low 32 bits
  uint64_t count = 0;  // elements
  uint64_t layout = 0;  // CallInfo::layout
  static constexpr uint32_t kMagic = 0x31534346;  // "FCS1"
  bool operator==(const CallSignature&) const = default;
};
static_assert(sizeof(CallSignature) == 32);

CallSignature make_signature(const CallInfo& call, uint64_t count, DataType type, ReduceOp op,
                             uint64_t call_number);

// Reads a signature from the first bytes of a message of `length` bytes; false if it is too
// short or does not start with the magic word.
bool read_signature(const void* message, size_t length, CallSignature* out);

// "broadcast (root 0) of 1024 float32, call 7", "allreduce sum of 1024 float32, call 7".
// With `show_op`, the op even of a collective that does not reduce (when it is what differs).
std::string describe(const CallSignature& signature, bool show_op = false);

// Why a message of `sender` (described, "rank 1 (m0/gpu1)") does not belong to this rank's
// call: "rank 1 (m0/gpu1) called broadcast (root 0) of ...; rank 0 (m0/gpu0) called allreduce
// sum of ..., call 7", then a hint.
std::string describe_mismatch(const CallSignature& theirs, const std::string& sender, const CallSignature& mine,
                              const std::string& receiver);

// FLEXPLAN_CHECK_CALLS: on (default) or off. Sets *error (naming the variable and value) and
// returns true when malformed.
bool check_calls_from_env(std::string* error);

}  // namespace flexplan
