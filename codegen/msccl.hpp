// MSCCL algorithm XML: the model of one file (algo > gpu > tb > step), the export of a schedule
// into it, the XML text both ways, and a checker that loads a file under the executors' rules
// and runs its semantics on host buffers. docs/codegen.md describes the format and semantics.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::codegen::msccl {

enum class Buffer : uint8_t { Input, Output, Scratch };  // "i", "o", "s"

// The step types; the fused ones (rcs, rrs, rrc, rrcs) are refused by RCCL's executor.
enum class StepType : uint8_t {
  Send,                // s: send src
  Recv,                // r: dst = received
  RecvCopySend,        // rcs: dst = received, and send it on
  RecvReduceSend,      // rrs: send (received op src)
  RecvReduceCopy,      // rrc: dst = received op src
  RecvReduceCopySend,  // rrcs: dst = received op src, and send it on
  Copy,                // cpy: dst = src
  Reduce,              // re: dst = dst op src
  Nop,                 // nop: only carries a dependency
};
std::string_view to_string(StepType);
std::string_view to_string(Buffer);
bool sends(StepType);
bool receives(StepType);
bool fused(StepType);

struct Step {
  StepType type = StepType::Nop;
  Buffer src = Buffer::Input;
  int32_t src_offset = -1;  // in chunks
  Buffer dst = Buffer::Output;
  int32_t dst_offset = -1;
  int32_t count = 0;         // chunks
  int32_t depend_tb = -1;    // wait until threadblock depend_tb of this gpu finished ...
  int32_t depend_step = -1;  // ... its step depend_step
  bool has_dependents = false;  // hasdep: another threadblock waits on this step
  friend bool operator==(const Step&, const Step&) = default;
};

struct ThreadBlock {
  int32_t id = 0;
  int32_t send = -1;  // peer this threadblock sends to, or -1
  int32_t recv = -1;  // peer it receives from, or -1
  int32_t channel = 0;
  std::vector<Step> steps;
  friend bool operator==(const ThreadBlock&, const ThreadBlock&) = default;
};

struct Gpu {
  int32_t id = 0;
  int32_t input_chunks = 0, output_chunks = 0, scratch_chunks = 0;
  std::vector<ThreadBlock> threadblocks;
  friend bool operator==(const Gpu&, const Gpu&) = default;
};

struct Algorithm {
  std::string name;
  std::string protocol = "Simple";  // Simple, LL or LL128
  int32_t channels = 1;
  int32_t chunks_per_loop = 1;
  int32_t world = 0;  // ngpus
  std::string collective = "allreduce";
  bool in_place = true, out_of_place = true;
  int64_t min_bytes = 0, max_bytes = 0;  // max inclusive; 0 means no limit
  std::vector<Gpu> gpus;
  friend bool operator==(const Algorithm&, const Algorithm&) = default;
};

// What the executors accept (docs/codegen.md, Limits). The defaults are the strictest of
// msccl-executor-nccl and RCCL.
struct Limits {
  int steps_per_threadblock = 64;     // MSCCL_MAX_NUM_STEPS (a build option, 64 by default)
  int threadblocks_per_gpu = 64;      // RCCL's MSCCL_MAX_NUM_THREAD_BLOCKS
  int peers_per_channel = 32;         // MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL
  int channels = 32;                  // MAXCHANNELS
  int max_count = 71;                 // cnt < MSCCL_MAX_COUNT (72)
  int max_gpus = 1024;                // the XML reader's MAX_SUBS children of <algo>
  int max_nodes = 4096;               // the XML reader's MAX_NODES: algo + gpus + own tbs + steps
  bool rccl = false;                  // refuse the fused step types
};

// A plan that cannot be exported, with the reason.
class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A schedule too large for the executors' limits (steps, threadblocks, peers, XML elements,
// scratch): a smaller variant of it may fit.
class DoesNotFit : public ExportError {
 public:
  using ExportError::ExportError;
};

struct ExportOptions {
  Limits limits;
  // nchunksperloop; 0: the schedule's units when at most kAutoChunks, else kAutoChunks. For an
  // all-gather or reduce-scatter it counts the whole vector and must be a multiple of the
  // ranks; 0: the largest shard's units per rank, at most kAutoChunks in all (and 1 per rank).
  uint64_t chunks = 0;
  std::string protocol = "Simple";
};
inline constexpr uint64_t kAutoChunks = 256;

// How the schedule's units became chunks: boundary u goes to chunk round(u * chunks / units);
// for an all-gather or reduce-scatter, rank r's shard [s, e) goes onto chunks [r k, (r + 1) k)
// (k = chunks / ranks), boundary u to r k + round((u - s) k / (e - s)).
struct ChunkReport {
  uint64_t units = 0, chunks = 0;
  int32_t shard_chunks = 0;          // k (all-gather, reduce-scatter), else 0
  uint64_t smallest_shard_units = 0, largest_shard_units = 0;  // likewise
  // Every boundary landed on a chunk boundary (and every shard held the same units).
  bool exact = true;
  double largest_shift = 0;          // of a boundary, in chunks (at most 0.5)
  // Each rank's share of the vector it reduces (the ranges it roots in reduce ops), as planned
  // and as exported; the worst ratio of exported to planned, and ranks whose share vanished.
  double worst_share_ratio = 1;
  int32_t worst_rank = -1;
  std::vector<int32_t> ranks_losing_share;
  uint64_t ops_dropped = 0;          // ops whose range became empty
};

struct Export {
  Algorithm algorithm;
  ChunkReport chunking;
};

// Exports schedule `index` of a verified plan: an all-reduce, all-gather or reduce-scatter (coll
// "allreduce", "allgather", "reducescatter"; one file serving calls in place and out of
// place). It must be held whole (ir::materialize). Throws DoesNotFit where the schedule cannot
// fit the limits (naming the gpu, threadblock and count); ExportError for a star wider than a
// channel or more ranks than the reader holds (no variant fits those either), for a broadcast or
// reduce (the executors' XML names no root), and for an all-gather or reduce-scatter whose
// explicit shards are not the equal ones in rank order or that leaves a rank an empty shard
// (the executors give every rank the same count).
Export export_schedule(const ir::Plan& plan, size_t index, const ExportOptions& options = {});

// What export_fitting wrote for a schedule: the planned variant, or the deepest pipeline of the
// same base that fits the limits.
struct FittedExport {
  Export exported;
  std::string planned;                  // the schedule's algorithm as planned ("flexreduce@64")
  std::string algorithm;                // the variant exported ("flexreduce@16"; == planned when it fit)
  uint32_t planned_slices = 1, slices = 1;
  // Empty when the planned variant fit; else why it did not (export_schedule's reason).
  std::string why;
  // Every variant tried that did not fit, deepest first ("flexreduce@64", "flexreduce@32").
  std::vector<std::string> too_deep;
};

// Exports schedule `index` of a verified plan, held compact or whole. A pipeline
// (ir::pipeline_base) that exceeds the limits is exported as the deepest pipeline of its base
// that fits: the slice counts tried are the planned one, then its halves down to the base (the
// planner's variants are powers of two), then the counts between the deepest that fits and the
// shallowest that does not, by bisection (deeper fits are assumed not to follow shallower misfits
// there). Throws ExportError as export_schedule does: for a schedule that is not a pipeline, or
// whose base does not fit either (the base's reason), or that is refused for another reason.
FittedExport export_fitting(const ir::Plan& plan, size_t index, const ExportOptions& options = {});

// One schedule of a plan as export_plan wrote it, or why not.
struct ScheduleExport {
  size_t index = 0;
  std::optional<FittedExport> fitted;
  // When no variant of this schedule fits: the schedule whose export stands for it over its
  // byte range (fitted then holds that schedule's export, with this one's range and name), and
  // why this one did not fit. Otherwise source == index.
  size_t source = 0;
  std::string substituted_because;
  std::string refused;  // when nothing was written: why
};

// Every schedule of the plan through export_fitting. A schedule of which no variant fits is
// exported as the nearest schedule of the same collective that fits (nearest in the order of
// their byte ranges, the one serving smaller messages first at equal distance), over its own
// byte range: every schedule computes the whole collective at any size, so the file is right,
// only planned for other sizes. Refused (ScheduleExport::refused) where nothing of its
// collective fits, and for what export_schedule refuses whatever the size (broadcast, reduce,
// unequal shards, more ranks than the reader holds).
std::vector<ScheduleExport> export_plan(const ir::Plan& plan, const ExportOptions& options = {});

// The XML text: no declaration, one tag per line, two-space indentation, double quotes.
std::string to_xml(const Algorithm& algorithm);

// A file rejected by the reader or by the executors' load rules, or one whose run fails.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads XML written under the executors' reader rules (no declaration, no tabs, one tag per
// line, attributes separated by single spaces, double quotes). Throws FormatError naming the
// line.
Algorithm parse_xml(std::string_view text);

// The executors' load-time checks (ids, peers, channels, offsets, counts, limits, dependency
// chains, RCCL's refusal of fused steps with limits.rccl). Throws FormatError.
void check_loadable(const Algorithm& algorithm, const Limits& limits = {});

// Runs the algorithm on host buffers for every gpu, out of place and in place (input and output
// one buffer: for an all-gather the input is the gpu's slice of the output, for a
// reduce-scatter the output the gpu's slice of the input), with rendezvous transfers and the
// executors' dependency semantics; first checks that no two accesses of a gpu to one chunk (one
// a write) from different threadblocks are left unordered. Returns "" when every gpu ends as its
// collective promises, else what went wrong: all-reduce, every input's sum; all-gather, every
// gpu's input, gpu h's at chunks [h k, (h + 1) k) of the output; reduce-scatter, the sum of
// every input's chunks [g k, (g + 1) k) on gpu g (k = nchunksperloop / ngpus). Other
// collectives are reported as not run.
std::string simulate(const Algorithm& algorithm);
// simulate, for a file that must be an all-reduce.
std::string simulate_allreduce(const Algorithm& algorithm);

}  // namespace flexplan::codegen::msccl
