// plan.bin: the versioned binary form of a plan. Little-endian fixed header (magic, format
// version, flexplan version, topology hash, world size, payload length, FNV-1a 64 checksum),
// then a varint-coded payload. docs/ir.md has the byte layout.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/errors.hpp"
#include "ir/plan.hpp"

namespace flexplan::ir {

// 2: ops relative to the op before; 3: ops carry their shape; 4: a pipeline is written as its
// base and slice count (ir/pipeline_form.hpp) and expanded when read; 5: a schedule whose steps
// an earlier schedule of the plan wrote (the same base at another slice count) names it.
inline constexpr uint32_t kPlanFormatVersion = 6;

// Serializes the plan as it is; does not verify (write_plan_file does).
std::vector<uint8_t> encode_plan(const Plan& plan);

// Parses plan.bin bytes and verifies the plan (verify_plan). Malformed bytes throw
// PlanFormatError naming `source` and the byte offset; a wrong schedule throws VerifyError.
Plan decode_plan(std::span<const uint8_t> bytes, const std::string& source);

// decode_plan without verify_plan, for callers that verify themselves (flexplan verify times
// each schedule). Everything else should use decode_plan.
Plan decode_plan_unverified(std::span<const uint8_t> bytes, const std::string& source);

// A 64-bit fingerprint of a plan's content: FNV-1a 64 over the header's flags, topology hash
// and world size, then the payload (holding every other field), as encode_plan writes them, so
// equal plans get equal fingerprints whichever flexplan version wrote them. Ranks compare it at
// job start; generated program libraries embed it. A file decoded by
// decode_fingerprinted_plan is fingerprinted from its own bytes: a valid file coded otherwise
// than encode_plan would (longer varints, the other group form, steps written out that it would
// name or named from another schedule) fingerprints differently, which
// fails safe (ranks holding differently coded copies refuse to run together).
uint64_t plan_fingerprint(const Plan& plan);

// decode_plan_unverified, with plan_fingerprint of the result computed in the checksum's pass
// over the bytes instead of by encoding the plan again.
struct FingerprintedPlan {
  Plan plan;
  uint64_t fingerprint = 0;
};
FingerprintedPlan decode_fingerprinted_plan(std::span<const uint8_t> bytes,
                                            const std::string& source);

// True when `bytes` start with the plan.bin magic, or are a truncated start of it (used to tell
// plan.bin from a text plan, so that a truncated plan.bin still gets the binary form's error).
bool has_plan_magic(std::span<const uint8_t> bytes);

// verify_plan, then write. Throws PlanFormatError if the file cannot be written.
void write_plan_file(const std::string& path, const Plan& plan);

// Read (read_plan_bytes), decode and verify_plan.
Plan read_plan_file(const std::string& path);

namespace detail {
class FileReader;
}

// A plan.bin file's bytes for the decoders, read in a bounded way: the fixed header first, so
// that a bad magic, another format version, a file shorter than the header, or a payload length
// that disagrees with the file's size is refused (PlanFormatError, as the decoders word it)
// having read at most the header; then no more than the payload the header announces and one
// byte (which the decoder reports as trailing). The decoders check everything again.
std::vector<uint8_t> read_plan_bytes(const std::string& path);
// The same from a file read from its start; some of it may have been read already.
std::vector<uint8_t> read_plan_bytes(detail::FileReader& file);

}  // namespace flexplan::ir
