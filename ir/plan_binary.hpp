// plan.bin: the versioned binary form of a plan. Format 7: a little-endian fixed header (magic,
// format version, flexplan version, topology hash, world size, payload length, the plan's
// fingerprint, the sections' lengths, a header checksum), then the head (every schedule's
// fields and steps without their ops), a table of blocks (a step's ops cut into pieces a reader
// can start at, each with its checksum and the ranks it holds), a table of chunks of per-rank
// entries, the blocks and the chunks. A rank can read its own part alone (plan_slice.hpp).
// docs/ir.md has the byte layout. Format 6 files are read whole.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/errors.hpp"
#include "ir/plan.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

// 2: ops relative to the op before; 3: ops carry their shape; 4: a pipeline is written as its
// base and slice count (ir/pipeline_form.hpp) and expanded when read; 5: a schedule whose steps
// an earlier schedule of the plan wrote (the same base at another slice count) names it; 6: the
// collectives' roots and shards; 7: ops in blocks with checksums, per-rank entries, and the
// fingerprint in the header, so that a rank can read and check its own part alone.
// Version 6 is still read (whole); older ones are refused, naming the version.
inline constexpr uint32_t kPlanFormatVersion = 7;

// Serializes the plan as it is; does not verify (write_plan_file does).
std::vector<uint8_t> encode_plan(const Plan& plan);
// verify_plan, then encode_plan with the header's flag that says the plan was verified as a
// whole when written, as write_plan_file writes it: a job's ranks then check their own parts
// alone (ir/job_plan.hpp). Throws VerifyError for a plan that does not verify.
std::vector<uint8_t> encode_verified_plan(const Plan& plan);
// Whether format 7 bytes carry that flag (false for format 6); throws as the header's checks do.
bool verified_when_written(std::span<const uint8_t> bytes, const std::string& source);
// The same in format 6, which this flexplan still reads, for tests of that path.
std::vector<uint8_t> encode_plan_version6(const Plan& plan);
// The format version of plan.bin bytes (their first 12 bytes at least); throws PlanFormatError
// for an empty file, a bad magic or bytes too short to hold the version.
uint32_t plan_format_version(std::span<const uint8_t> bytes, const std::string& source);

// Parses plan.bin bytes and verifies the plan (verify_plan). Malformed bytes throw
// PlanFormatError naming `source` and the byte offset; a wrong schedule throws VerifyError.
Plan decode_plan(std::span<const uint8_t> bytes, const std::string& source);

// decode_plan without verify_plan, for callers that verify themselves (flexplan verify times
// each schedule). Everything else should use decode_plan.
Plan decode_plan_unverified(std::span<const uint8_t> bytes, const std::string& source);

// A 64-bit fingerprint of a plan's content: the one format 7 stores in the header, FNV-1a 64
// over the header's flags, topology hash and world size, then the head and the block and chunk
// tables (which hold the checksum of every block of ops and every chunk of per-rank entries),
// as encode_plan writes them, so equal plans get equal fingerprints whichever flexplan version
// wrote them (while the format stays 7). Ranks compare it at job start; generated program
// libraries embed it. A format 7 file is fingerprinted from its own bytes (checked against the
// header's): a valid file coded otherwise than encode_plan would (longer varints, the other group
// form, other block boundaries, steps written out that it would name) fingerprints differently,
// which fails safe (ranks holding differently coded copies refuse to run together). A format 6
// file's plan is fingerprinted as format 7 would write it.
uint64_t plan_fingerprint(const Plan& plan);

// decode_plan_unverified, with the fingerprint: the one the file stores, checked against its
// head and tables, instead of by encoding the plan again. Checks every block's and chunk's
// checksum and the per-rank index against the ops (each rank's entry, each block's ranks).
struct FingerprintedPlan {
  Plan plan;
  uint64_t fingerprint = 0;
};
FingerprintedPlan decode_fingerprinted_plan(std::span<const uint8_t> bytes,
                                            const std::string& source);
// What a rank of a job decodes (ir/job_plan.hpp): decode_fingerprinted_plan with every checksum
// and the fingerprint, but without the per-rank index, which each rank checks for its own rank
// (read_rank_slice); instead every rank of every op must be in the world, so that no op holds a
// rank that no slice checks. Format 6 files as decode_fingerprinted_plan.
FingerprintedPlan decode_job_plan(std::span<const uint8_t> bytes, const std::string& source);

// True when `bytes` start with the plan.bin magic, or are a truncated start of it (used to tell
// plan.bin from a text plan, so that a truncated plan.bin still gets the binary form's error).
bool has_plan_magic(std::span<const uint8_t> bytes);

// verify_plan, then write (as encode_verified_plan). Throws PlanFormatError if the file cannot
// be written. With `already`, the schedules it holds are taken as verified (verify.hpp).
void write_plan_file(const std::string& path, const Plan& plan, const VerifiedSchedules* already = nullptr);

// Read (read_plan_bytes), decode and verify_plan.
Plan read_plan_file(const std::string& path);

namespace detail {
class FileReader;
}

// A plan.bin file's bytes for the decoders, read in a bounded way: the fixed header first (the
// 100 bytes of format 7's), so that a bad magic, another format version, a file shorter than
// the header, a bad header checksum (format 7) or a payload length that disagrees with the
// file's size is refused (PlanFormatError, as the decoders word it) having read at most that;
// then no more than the payload the header announces and one byte (which the decoder reports as
// trailing). The decoders check everything again.
std::vector<uint8_t> read_plan_bytes(const std::string& path);
// The same from a file read from its start; some of it may have been read already.
std::vector<uint8_t> read_plan_bytes(detail::FileReader& file);

}  // namespace flexplan::ir
