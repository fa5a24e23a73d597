// Export of a schedule as an MSCCL algorithm (msccl.hpp): the point-to-point programs of every
// rank (rank_program.hpp), chains and stars, become threadblock instructions on chunk ranges,
// with the dependencies that keep each gpu's accesses in the schedule's order; a pipeline beyond
// the executors' limits is exported as the deepest variant of it that fits.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "codegen/msccl.hpp"
#include "codegen/rank_program.hpp"
#include "ir/collective_contract.hpp"
#include "ir/errors.hpp"
#include "ir/pipeline_form.hpp"

namespace flexplan::codegen::msccl {
namespace {

// How the schedule's units become chunks. All-reduce: boundary u goes to chunk
// round(u * chunks / units), halves up. All-gather and reduce-scatter: the executors give every
// rank the same count, so rank r's shard of units goes onto chunks [r k, (r + 1) k) of the
// whole vector (k = chunks / ranks), boundary u of a shard [s, e) to r k + round((u - s) k /
// (e - s)). Either map is monotone, takes 0 to 0 and units to chunks (and shard boundaries to
// rank boundaries), so every chunk lies in the image of exactly one unit and behaves like it.
struct Layout {
  uint64_t units = 1, chunks = 1;
  int32_t world = 1;
  bool sharded = false;
  int32_t shard_chunks = 0;                // k, when sharded
  std::vector<uint64_t> shard_begin;       // when sharded: rank r's shard is [begin[r], begin[r + 1])

  // The shard holding boundary u (the later one where two meet).
  size_t shard_at(uint64_t u) const {
    const auto it = std::upper_bound(shard_begin.begin(), shard_begin.end() - 1, u);
    return static_cast<size_t>(it - shard_begin.begin()) - 1;
  }
  uint64_t to_chunk(uint64_t u) const {
    if (!sharded) {
      const auto scaled = static_cast<unsigned __int128>(u) * chunks;
      return static_cast<uint64_t>((scaled + units / 2) / units);
    }
    if (u >= units) return chunks;
    const size_t r = shard_at(u);
    const uint64_t s = shard_begin[r], e = shard_begin[r + 1];
    const auto k = static_cast<uint64_t>(shard_chunks);
    const auto scaled = static_cast<unsigned __int128>(u - s) * k;
    return r * k + static_cast<uint64_t>((scaled + (e - s) / 2) / (e - s));
  }
  // Where boundary u would land without rounding.
  double exact_chunk(uint64_t u) const {
    if (!sharded || u >= units)
      return static_cast<double>(u) * static_cast<double>(chunks) / static_cast<double>(units);
    const size_t r = shard_at(u);
    const double s = static_cast<double>(shard_begin[r]), e = static_cast<double>(shard_begin[r + 1]);
    return static_cast<double>(r * static_cast<uint64_t>(shard_chunks)) +
           (static_cast<double>(u) - s) * shard_chunks / (e - s);
  }
};

ChunkReport report_chunking(const ir::Plan& plan, const ir::Schedule& schedule, const Layout& layout) {
  ChunkReport report;
  report.units = schedule.units;
  report.chunks = layout.chunks;
  report.shard_chunks = layout.shard_chunks;
  const double units = static_cast<double>(schedule.units);
  std::vector<double> planned(plan.world_size, 0), exported(plan.world_size, 0);
  const auto shift = [&](uint64_t u) {
    return std::fabs(layout.exact_chunk(u) - static_cast<double>(layout.to_chunk(u)));
  };
  for (const ir::Step& step : schedule.steps) {
    for (const ir::Op& op : step.ops) {
      const uint64_t b = layout.to_chunk(op.begin);
      const uint64_t e = layout.to_chunk(op.end);
      report.largest_shift = std::max({report.largest_shift, shift(op.begin), shift(op.end)});
      if (b == e) ++report.ops_dropped;
      if (op.kind != ir::OpKind::Reduce) continue;
      planned[op.root] += static_cast<double>(op.end - op.begin) / units;
      exported[op.root] += static_cast<double>(e - b) / static_cast<double>(layout.chunks);
    }
  }
  if (layout.sharded) {
    report.smallest_shard_units = UINT64_MAX;
    for (size_t r = 0; r + 1 < layout.shard_begin.size(); ++r) {
      const uint64_t size = layout.shard_begin[r + 1] - layout.shard_begin[r];
      report.smallest_shard_units = std::min(report.smallest_shard_units, size);
      report.largest_shard_units = std::max(report.largest_shard_units, size);
    }
  }
  // Shards of unequal units become equal chunk counts: their units then weigh differently.
  report.exact = report.largest_shift < 1e-9 && report.smallest_shard_units == report.largest_shard_units;
  for (int32_t r = 0; r < plan.world_size; ++r) {
    if (planned[r] <= 0) continue;
    if (exported[r] == 0) report.ranks_losing_share.push_back(r);
    const double ratio = exported[r] / planned[r];
    if (report.worst_rank < 0 || ratio > report.worst_share_ratio) {
      report.worst_share_ratio = ratio;
      report.worst_rank = r;
    }
  }
  return report;
}

// Where an instruction reads or writes: the input and the output count as one place (they are
// one buffer when run in place), scratch as another.
struct Access {
  bool scratch = false;
  int32_t begin = 0, end = 0;
};

// A place in one rank's buffers, in chunks.
struct Ref {
  Buffer buffer = Buffer::Output;
  int32_t offset = 0;
  Ref at(int32_t delta) const { return {buffer, offset + delta}; }
  friend bool operator==(const Ref&, const Ref&) = default;
};

// One rank's buffers under the layout: where its input and its result of chunk c of the whole
// vector are. All-reduce: input c and output c. All-gather: its input holds only its shard,
// [r k, (r + 1) k) at input [0, k); the output is the whole vector. Reduce-scatter: the input is
// the whole vector, the output only the rank's shard; the rest of the result (partial sums the
// rank relays) is kept in scratch [0, C - k), below and above the shard's place.
class RankBuffers {
 public:
  RankBuffers(ir::Collective collective, int32_t rank, const Layout& layout)
      : collective_(collective), rank_(rank), chunks_(static_cast<int32_t>(layout.chunks)) {
    if (layout.sharded) {
      shard_begin_ = rank * layout.shard_chunks;
      shard_end_ = shard_begin_ + layout.shard_chunks;
    } else {
      shard_end_ = chunks_;
    }
  }
  int32_t input_chunks() const { return collective_ == ir::Collective::AllGather ? shard_end_ - shard_begin_ : chunks_; }
  int32_t output_chunks() const {
    return collective_ == ir::Collective::ReduceScatter ? shard_end_ - shard_begin_ : chunks_;
  }
  // Scratch chunks [0, this) hold the result off the shard (reduce-scatter).
  int32_t result_scratch() const {
    return collective_ == ir::Collective::ReduceScatter ? chunks_ - (shard_end_ - shard_begin_) : 0;
  }
  // Where input and output chunk 0 sit in the one buffer they form when run in place: the
  // executors call in place an all-gather whose input is the rank's slice of the output, and a
  // reduce-scatter whose output is the rank's slice of the input.
  int32_t input_place() const { return collective_ == ir::Collective::AllGather ? shard_begin_ : 0; }
  int32_t output_place() const { return collective_ == ir::Collective::ReduceScatter ? shard_begin_ : 0; }

  Ref input(int32_t c) const {
    if (collective_ != ir::Collective::AllGather) return {Buffer::Input, c};
    if (c < shard_begin_ || c >= shard_end_)
      throw ExportError(fmt::format("gpu {} would read chunk {} from its input, which holds only its shard [{}, {})",
                                    rank_, c, shard_begin_, shard_end_));
    return {Buffer::Input, c - shard_begin_};
  }
  Ref result(int32_t c) const {
    if (collective_ != ir::Collective::ReduceScatter) return {Buffer::Output, c};
    if (c < shard_begin_) return {Buffer::Scratch, c};
    if (c >= shard_end_) return {Buffer::Scratch, c - (shard_end_ - shard_begin_)};
    return {Buffer::Output, c - shard_begin_};
  }
  // Whether chunk c's result is part of the collective's result on this rank.
  bool result_kept(int32_t c) const { return result(c).buffer != Buffer::Scratch; }

 private:
  ir::Collective collective_;
  int32_t rank_;
  int32_t chunks_;
  int32_t shard_begin_ = 0, shard_end_ = 0;
};

struct Instruction {
  Step step;
  int tb = 0;
  std::vector<Access> reads, writes;
  std::vector<int> depends_on;  // instruction ids, one per other threadblock at most
};

// One gpu's program while it is being built.
class GpuBuilder {
 public:
  GpuBuilder(int32_t rank, const RankBuffers& buffers)
      : rank_(rank), buffers_(buffers), scratch_chunks_(buffers.result_scratch()) {}

  // Relays (receive from q, send to p) share a threadblock when the pair is matched; every peer
  // can be matched once per direction, so a channel keeps one threadblock per (peer, direction).
  void match(const std::map<std::pair<int32_t, int32_t>, int>& relays) {
    std::vector<std::tuple<int, int32_t, int32_t>> by_weight;
    for (const auto& [pair, weight] : relays) by_weight.push_back({-weight, pair.first, pair.second});
    std::sort(by_weight.begin(), by_weight.end());
    for (const auto& [weight, q, p] : by_weight) {
      if (send_partner_.count(q) || recv_partner_.count(p)) continue;
      send_partner_[q] = p;
      recv_partner_[p] = q;
    }
  }
  int receiving_tb(int32_t from, int32_t channel) {
    const auto it = send_partner_.find(from);
    return tb(from, it == send_partner_.end() ? -1 : it->second, channel);
  }
  int sending_tb(int32_t to, int32_t channel) {
    const auto it = recv_partner_.find(to);
    return tb(it == recv_partner_.end() ? -1 : it->second, to, channel);
  }
  int local_tb(int32_t channel) { return tb(-1, -1, channel); }
  bool matched(int32_t from, int32_t to) const {
    const auto it = send_partner_.find(from);
    return it != send_partner_.end() && it->second == to;
  }

  int32_t scratch(int32_t count) {
    const int32_t at = scratch_chunks_;
    scratch_chunks_ += count;
    return at;
  }

  int emit(int tb, StepType type, Ref src, Ref dst, int32_t count) {
    return emit(tb, type, src.buffer, src.offset, dst.buffer, dst.offset, count);
  }
  // A send: reads src, writes nothing.
  int send(int tb, Ref src, int32_t count) {
    return emit(tb, StepType::Send, src.buffer, src.offset, Buffer::Output, -1, count);
  }
  // A receive (or receive-copy-send): reads nothing of this rank's, writes dst.
  int receive(int tb, StepType type, Ref dst, int32_t count) {
    return emit(tb, type, Buffer::Input, -1, dst.buffer, dst.offset, count);
  }
  int emit(int tb, StepType type, Buffer src, int32_t src_offset, Buffer dst, int32_t dst_offset,
           int32_t count) {
    Instruction in;
    in.tb = tb;
    in.step = {type, src, src_offset, dst, dst_offset, count};
    const bool reads_src = type == StepType::Send || type == StepType::RecvReduceSend ||
                           type == StepType::RecvReduceCopy || type == StepType::RecvReduceCopySend ||
                           type == StepType::Copy || type == StepType::Reduce;
    const bool writes_dst = type == StepType::Recv || type == StepType::RecvCopySend ||
                            type == StepType::RecvReduceCopy || type == StepType::RecvReduceCopySend ||
                            type == StepType::Copy || type == StepType::Reduce;
    if (reads_src) in.reads.push_back(place(src, src_offset, count));
    if (type == StepType::Reduce) in.reads.push_back(place(dst, dst_offset, count));
    if (writes_dst) in.writes.push_back(place(dst, dst_offset, count));
    // Fields a type does not use read "i -1" and "o -1", as other generators write them.
    if (!reads_src) in.step.src = Buffer::Input, in.step.src_offset = -1;
    if (!writes_dst && type != StepType::Reduce) in.step.dst = Buffer::Output, in.step.dst_offset = -1;
    instructions_.push_back(std::move(in));
    return static_cast<int>(instructions_.size()) - 1;
  }

  // Threadblocks that only receive share with ones that only send on the same channel, and
  // local copies join another threadblock: fewer threadblocks, at the price of running in one
  // program order what could overlap.
  void pair_one_way_threadblocks();

  Gpu finish();

 private:
  int tb(int32_t recv, int32_t send, int32_t channel) {
    const auto key = std::make_tuple(recv, send, channel);
    const auto it = tb_index_.find(key);
    if (it != tb_index_.end()) return it->second;
    tbs_.push_back(key);
    return tb_index_[key] = static_cast<int>(tbs_.size()) - 1;
  }
  void add_dependencies();
  // Input and output count as one place (they are one buffer when run in place), scratch as another.
  Access place(Buffer buffer, int32_t offset, int32_t count) const {
    if (buffer == Buffer::Scratch) return {true, offset, offset + count};
    const int32_t at = offset + (buffer == Buffer::Input ? buffers_.input_place() : buffers_.output_place());
    return {false, at, at + count};
  }

  int32_t rank_;
  RankBuffers buffers_;
  std::map<int32_t, int32_t> send_partner_, recv_partner_;  // matched relays: q -> p, p -> q
  std::map<std::tuple<int32_t, int32_t, int32_t>, int> tb_index_;
  std::vector<std::tuple<int32_t, int32_t, int32_t>> tbs_;  // (recv, send, channel)
  std::vector<Instruction> instructions_;                     // in the schedule's order
  int32_t scratch_chunks_;
};

void GpuBuilder::pair_one_way_threadblocks() {
  using Key = std::tuple<int32_t, int32_t, int32_t>;  // (recv, send, channel)
  std::map<int32_t, std::vector<int>> receiving, sending;  // by channel: one-way threadblocks
  std::map<int32_t, int> local, any;                       // by channel: the local one, and some other
  for (int t = 0; t < static_cast<int>(tbs_.size()); ++t) {
    const auto& [recv, send, channel] = tbs_[t];
    if (recv >= 0 && send < 0) receiving[channel].push_back(t);
    if (recv < 0 && send >= 0) sending[channel].push_back(t);
    if (recv < 0 && send < 0) local[channel] = t;
    else any.try_emplace(channel, t);
  }
  std::vector<Key> key(tbs_.begin(), tbs_.end());
  for (const auto& [channel, receivers] : receiving) {
    const std::vector<int>& senders = sending[channel];
    for (size_t i = 0; i < std::min(receivers.size(), senders.size()); ++i) {
      const Key both{std::get<0>(tbs_[receivers[i]]), std::get<1>(tbs_[senders[i]]), channel};
      key[receivers[i]] = key[senders[i]] = both;
    }
  }
  for (const auto& [channel, t] : local)
    if (any.count(channel)) key[t] = key[any[channel]];
  std::map<Key, int> index;
  std::vector<Key> merged;
  std::vector<int> new_tb(tbs_.size());
  for (size_t t = 0; t < tbs_.size(); ++t) {
    const auto [it, added] = index.try_emplace(key[t], static_cast<int>(merged.size()));
    if (added) merged.push_back(key[t]);
    new_tb[t] = it->second;
  }
  for (Instruction& in : instructions_) in.tb = new_tb[in.tb];
  tbs_ = std::move(merged);
  tb_index_ = std::move(index);
}

// Program order is the schedule's order; every instruction waits for the latest earlier
// instruction of each other threadblock that touches a chunk it touches (one of them writing).
void GpuBuilder::add_dependencies() {
  struct History {
    int writer = -1;
    std::vector<int> readers;  // since the last write
  };
  std::map<std::pair<bool, int32_t>, History> chunks;
  for (int id = 0; id < static_cast<int>(instructions_.size()); ++id) {
    Instruction& in = instructions_[id];
    std::map<int, int> latest;  // threadblock -> instruction
    const auto depend = [&](int other) {
      if (other < 0 || instructions_[other].tb == in.tb) return;
      int& slot = latest.try_emplace(instructions_[other].tb, other).first->second;
      slot = std::max(slot, other);
    };
    for (const Access& a : in.reads)
      for (int32_t c = a.begin; c < a.end; ++c) depend(chunks[{a.scratch, c}].writer);
    for (const Access& a : in.writes)
      for (int32_t c = a.begin; c < a.end; ++c) {
        const History& h = chunks[{a.scratch, c}];
        depend(h.writer);
        for (int reader : h.readers) depend(reader);
      }
    for (const Access& a : in.reads)
      for (int32_t c = a.begin; c < a.end; ++c) chunks[{a.scratch, c}].readers.push_back(id);
    for (const Access& a : in.writes)
      for (int32_t c = a.begin; c < a.end; ++c) chunks[{a.scratch, c}] = History{id, {}};
    for (const auto& [tb, other] : latest) in.depends_on.push_back(other);
  }
}

Gpu GpuBuilder::finish() {
  add_dependencies();
  // Drop waits already implied by an earlier wait of the same threadblock.
  std::vector<std::map<int, int>> waited(tbs_.size());  // per tb: other tb -> latest waited
  std::vector<int> position(instructions_.size());
  std::vector<int> length(tbs_.size(), 0);
  for (int id = 0; id < static_cast<int>(instructions_.size()); ++id) {
    Instruction& in = instructions_[id];
    std::vector<int> kept;
    for (int other : in.depends_on) {
      auto& seen = waited[in.tb];
      const auto it = seen.find(instructions_[other].tb);
      if (it != seen.end() && it->second >= other) continue;
      seen[instructions_[other].tb] = other;
      kept.push_back(other);
    }
    in.depends_on = kept;
    // Extra waits become nops in front of the instruction, each carrying one.
    const int nops = std::max<int>(0, static_cast<int>(kept.size()) - 1);
    position[id] = length[in.tb] + nops;
    length[in.tb] += nops + 1;
  }
  Gpu gpu;
  gpu.id = rank_;
  gpu.input_chunks = buffers_.input_chunks();
  gpu.output_chunks = buffers_.output_chunks();
  gpu.scratch_chunks = scratch_chunks_;
  // Threadblock ids: sorted by channel, then peers, for a readable file.
  std::vector<int> order(tbs_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& [ra, sa, ca] = tbs_[a];
    const auto& [rb, sb, cb] = tbs_[b];
    return std::tie(ca, ra, sa) < std::tie(cb, rb, sb);
  });
  std::vector<int> id_of(tbs_.size());
  for (size_t i = 0; i < order.size(); ++i) id_of[order[i]] = static_cast<int>(i);
  gpu.threadblocks.resize(tbs_.size());
  for (size_t t = 0; t < tbs_.size(); ++t) {
    ThreadBlock& tb = gpu.threadblocks[id_of[t]];
    tb.id = id_of[t];
    std::tie(tb.recv, tb.send, tb.channel) = tbs_[t];
  }
  for (const Instruction& in : instructions_) {
    ThreadBlock& tb = gpu.threadblocks[id_of[in.tb]];
    for (size_t d = 0; d < in.depends_on.size(); ++d) {
      const int other = in.depends_on[d];
      Step step = d + 1 == in.depends_on.size() ? in.step : Step{};
      if (step.type == StepType::Nop) step = {StepType::Nop, Buffer::Input, -1, Buffer::Output, -1, 0};
      step.depend_tb = id_of[instructions_[other].tb];
      step.depend_step = position[other];
      tb.steps.push_back(step);
    }
    if (in.depends_on.empty()) tb.steps.push_back(in.step);
  }
  for (const Instruction& in : instructions_)
    for (int other : in.depends_on)
      gpu.threadblocks[id_of[instructions_[other].tb]].steps[position[other]].has_dependents = true;
  return gpu;
}

// A star reduce's root, one piece of `count` chunks: every member's piece arrives on the
// threadblock receiving from that member, and the total lands at dest. The root
// folds its own data first (when it is in the group), then the members' in group order. Each
// step after the first reads and writes the total, so the dependencies (add_dependencies)
// serialize the members' reductions; RCCL mode receives each member's piece into scratch of
// its own first, so only the `re` steps wait on one another and the receives overlap.
void emit_star_root_reduce(GpuBuilder& gpu, const Task& task, int32_t channel, Ref own, int32_t count, Ref dest,
                           bool fuse) {
  // Where the fold so far is held: own data until the first member's arrives, then the total.
  bool started = task.add_own;
  Ref held = own;
  for (const Link& from : task.sources) {
    const int tb = gpu.receiving_tb(from.rank, channel);
    if (!started) {
      gpu.receive(tb, StepType::Recv, dest, count);
    } else if (fuse) {
      gpu.emit(tb, StepType::RecvReduceCopy, held, dest, count);
    } else {
      // Own data in the input (or the total staged): place it at the total first. In place,
      // input and output are one buffer and this copy may be a copy onto itself.
      if (held != dest) gpu.emit(tb, StepType::Copy, held, dest, count);
      const Ref partial{Buffer::Scratch, gpu.scratch(count)};
      gpu.receive(tb, StepType::Recv, partial, count);
      gpu.emit(tb, StepType::Reduce, partial, dest, count);
    }
    started = true;
    held = dest;
  }
}

struct Attempt {
  std::vector<Gpu> gpus;
  // A threadblock with too many steps or a channel with too many peers, which more channels
  // may cure; empty when everything fits.
  std::string crowded;
  std::string too_many_tbs;    // threadblocks (even paired), XML elements or scratch beyond the limits
};

std::string tb_name(const Gpu& gpu, const ThreadBlock& tb) {
  return fmt::format("gpu {} threadblock {} (recv {}, send {}, channel {})", gpu.id, tb.id, tb.recv,
                     tb.send, tb.channel);
}

Attempt build(const ir::Schedule& schedule, const std::vector<RankProgram>& programs, const Layout& layout,
              int32_t channels, bool pair_one_way, const Limits& limits) {
  const int32_t world = static_cast<int32_t>(programs.size());
  const int32_t max_count = std::max(1, limits.max_count);
  const auto chunk_of = [&](uint64_t u) { return static_cast<int32_t>(layout.to_chunk(u)); };
  std::vector<uint64_t> ops_before(schedule.steps.size() + 1, 0);
  for (size_t s = 0; s < schedule.steps.size(); ++s) ops_before[s + 1] = ops_before[s] + schedule.steps[s].ops.size();
  Attempt attempt;
  for (int32_t rank = 0; rank < world; ++rank) {
    const RankProgram& program = programs[rank];
    const RankBuffers buffers(schedule.collective, rank, layout);
    GpuBuilder gpu(rank, buffers);
    std::map<std::pair<int32_t, int32_t>, int> relays;
    for (const StepProgram& step : program.steps)
      for (const Task& task : step.tasks)
        if (task.receives() && task.sends()) ++relays[{task.sources[0].rank, task.destinations[0].rank}];
    gpu.match(relays);
    const bool fuse = !limits.rccl;
    // Where a rank's input or result moves to another buffer or place: its shard's ends.
    const auto shard_cuts = [&](int32_t r, std::vector<int32_t>& cuts) {
      if (!layout.sharded) return;
      cuts.push_back(r * layout.shard_chunks);
      cuts.push_back((r + 1) * layout.shard_chunks);
    };
    std::vector<int32_t> own_cuts;
    shard_cuts(rank, own_cuts);
    // Splits [begin, end) into pieces of at most max_count chunks, also at `cuts` (sorted).
    // Transfers are cut at every member's shard ends, so that both ends of each cut alike and
    // every piece of every member lies within one buffer.
    const auto pieces = [&](int32_t begin, int32_t end, const std::vector<int32_t>& cuts, auto&& body) {
      auto cut = std::upper_bound(cuts.begin(), cuts.end(), begin);
      for (int32_t b = begin; b < end;) {
        while (cut != cuts.end() && *cut <= b) ++cut;
        const int32_t e = std::min({end, b + max_count, cut == cuts.end() ? end : *cut});
        body(b, e);
        b = e;
      }
    };
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const StepProgram& step = program.steps[s];
      // Ops are dealt round robin over the channels, counting across steps; both ends of a
      // transfer count alike, so they agree on its channel.
      const auto channel_of = [&](uint32_t op) {
        return static_cast<int32_t>((ops_before[s] + op) % static_cast<uint64_t>(channels));
      };
      const int32_t channel = channel_of(0);
      for (const UnitRange& range : step.copy_in)
        pieces(chunk_of(range.begin), chunk_of(range.end), own_cuts, [&](int32_t b, int32_t e) {
          gpu.emit(gpu.local_tb(channel), StepType::Copy, buffers.input(b), buffers.result(b), e - b);
        });
      struct Flush {
        int tb;
        int32_t stage, begin, end;
      };
      std::vector<Flush> flushes;
      for (const Task& task : step.tasks) {
        const int32_t cb = chunk_of(task.unit_begin), ce = chunk_of(task.unit_end);
        if (cb == ce) continue;
        std::vector<int32_t> cuts;
        if (layout.sharded) {
          const ir::Op& op = schedule.steps[s].ops[task.op_index];
          shard_cuts(op.root, cuts);
          for (const int32_t member : op.group) shard_cuts(member, cuts);
          std::sort(cuts.begin(), cuts.end());
          cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
        }
        // Own data: the input while no step wrote the range, else the result so far.
        const auto own = [&](int32_t b) { return task.own_from_send ? buffers.input(b) : buffers.result(b); };
        const int32_t stage = task.stage_writes ? gpu.scratch(ce - cb) : -1;
        // Where a written range lands: the result, or the stage copied in at the step's end.
        const auto dest = [&](int32_t b) {
          return task.stage_writes ? Ref{Buffer::Scratch, stage + (b - cb)} : buffers.result(b);
        };
        const int32_t op_channel = channel_of(task.op_index);
        if (task.sources.size() > 1) {  // a star reduce's root
          const int last_tb = gpu.receiving_tb(task.sources.back().rank, op_channel);
          if (task.stage_writes) flushes.push_back({last_tb, stage, cb, ce});
          pieces(cb, ce, cuts, [&](int32_t b, int32_t e) {
            emit_star_root_reduce(gpu, task, op_channel, own(b), e - b, dest(b), fuse);
          });
          continue;
        }
        if (task.destinations.size() > 1) {  // a star broadcast's root sends its own to each member
          pieces(cb, ce, cuts, [&](int32_t b, int32_t e) {
            for (const Link& to : task.destinations) gpu.send(gpu.sending_tb(to.rank, op_channel), own(b), e - b);
          });
          continue;
        }
        // A chain member, or a star member (which exchanges with its root alone): at most one
        // source and one destination.
        const int32_t prev = task.receives() ? task.sources[0].rank : -1;
        const int32_t next = task.sends() ? task.destinations[0].rank : -1;
        const int in_tb = task.receives() ? gpu.receiving_tb(prev, channel_of(task.op_index)) : -1;
        const int out_tb = task.sends() ? gpu.sending_tb(next, channel_of(task.op_index)) : -1;
        const bool same_tb = task.receives() && task.sends() && gpu.matched(prev, next);
        if (task.stage_writes) flushes.push_back({in_tb, stage, cb, ce});
        pieces(cb, ce, cuts, [&](int32_t b, int32_t e) {
          const int32_t n = e - b;
          if (!task.receives()) {  // a chain's start sends its own data
            gpu.send(out_tb, own(b), n);
            return;
          }
          if (!task.reduce) {  // a broadcast member stores what arrives and maybe passes it on
            if (task.sends() && same_tb && fuse) {
              gpu.receive(in_tb, StepType::RecvCopySend, dest(b), n);
              return;
            }
            gpu.receive(in_tb, StepType::Recv, dest(b), n);
            if (task.sends()) gpu.send(out_tb, dest(b), n);
            return;
          }
          if (task.sends()) {  // a reduce member in the middle: add own data, pass the sum on
            if (same_tb && fuse && task.add_own) {
              gpu.emit(in_tb, StepType::RecvReduceSend, own(b), Ref{Buffer::Output, -1}, n);
              return;
            }
            const Ref partial{Buffer::Scratch, gpu.scratch(n)};
            if (fuse && task.add_own) {
              gpu.emit(in_tb, StepType::RecvReduceCopy, own(b), partial, n);
            } else {
              gpu.receive(in_tb, StepType::Recv, partial, n);
              if (task.add_own) gpu.emit(in_tb, StepType::Reduce, own(b), partial, n);
            }
            gpu.send(out_tb, partial, n);
            return;
          }
          // The chain's end, the root: the total lands in its range.
          if (!task.add_own) {
            gpu.receive(in_tb, StepType::Recv, dest(b), n);
          } else if (fuse) {
            gpu.emit(in_tb, StepType::RecvReduceCopy, own(b), dest(b), n);
          } else if (own(b) == dest(b)) {
            const Ref partial{Buffer::Scratch, gpu.scratch(n)};
            gpu.receive(in_tb, StepType::Recv, partial, n);
            gpu.emit(in_tb, StepType::Reduce, partial, dest(b), n);
          } else {
            // Own data elsewhere (the input, or the result while the total is staged): sum in
            // scratch, then place it (the total that lands in scratch, staged or off a
            // reduce-scatter's shard, is summed where it lands).
            const bool in_scratch = dest(b).buffer == Buffer::Scratch;
            const Ref partial = in_scratch ? dest(b) : Ref{Buffer::Scratch, gpu.scratch(n)};
            gpu.receive(in_tb, StepType::Recv, partial, n);
            gpu.emit(in_tb, StepType::Reduce, own(b), partial, n);
            if (!in_scratch) gpu.emit(in_tb, StepType::Copy, partial, dest(b), n);
          }
        });
      }
      for (const Flush& flush : flushes)
        pieces(flush.begin, flush.end, own_cuts, [&](int32_t b, int32_t e) {
          gpu.emit(flush.tb, StepType::Copy, Ref{Buffer::Scratch, flush.stage + (b - flush.begin)}, buffers.result(b),
                   e - b);
        });
    }
    // What no step writes: the input is the result there. Off a reduce-scatter's shard any
    // value will do, so nothing is copied there.
    for (const UnitRange& range : program.copy_at_end)
      pieces(chunk_of(range.begin), chunk_of(range.end), own_cuts, [&](int32_t b, int32_t e) {
        if (buffers.result_kept(b))
          gpu.emit(gpu.local_tb(0), StepType::Copy, buffers.input(b), buffers.result(b), e - b);
      });
    if (pair_one_way) gpu.pair_one_way_threadblocks();
    attempt.gpus.push_back(gpu.finish());
    const Gpu& built = attempt.gpus.back();
    if (static_cast<int>(built.threadblocks.size()) > limits.threadblocks_per_gpu && attempt.too_many_tbs.empty())
      attempt.too_many_tbs = fmt::format("gpu {} needs {} threadblocks, the executors run at most {}",
                                         rank, built.threadblocks.size(), limits.threadblocks_per_gpu);
    size_t steps = 0;
    for (const ThreadBlock& tb : built.threadblocks) {
      steps += tb.steps.size();
      if (static_cast<int>(tb.steps.size()) > limits.steps_per_threadblock && attempt.crowded.empty())
        attempt.crowded = fmt::format("{} needs {} steps, the executors hold at most {} per threadblock",
                                      tb_name(built, tb), tb.steps.size(), limits.steps_per_threadblock);
    }
    std::map<std::pair<int32_t, bool>, int> peers;  // (channel, sending) -> threadblocks
    for (const ThreadBlock& tb : built.threadblocks) {
      if (tb.send >= 0) ++peers[{tb.channel, true}];
      if (tb.recv >= 0) ++peers[{tb.channel, false}];
    }
    for (const auto& [where, count] : peers)
      if (count > limits.peers_per_channel && attempt.crowded.empty())
        attempt.crowded = fmt::format("gpu {} needs {} {} peers on channel {}, the executors connect at most {} "
                                      "per channel",
                                      rank, count, where.second ? "send" : "receive", where.first,
                                      limits.peers_per_channel);
    const size_t nodes = 1 + static_cast<size_t>(world) + built.threadblocks.size() + steps;
    if (nodes > static_cast<size_t>(limits.max_nodes) && attempt.too_many_tbs.empty())
      attempt.too_many_tbs = fmt::format("gpu {} needs {} XML elements (algo, every gpu, its threadblocks "
                                         "and steps), the executors' reader holds at most {}",
                                         rank, nodes, limits.max_nodes);
    if (built.scratch_chunks > 32767 && attempt.too_many_tbs.empty())
      attempt.too_many_tbs = fmt::format("gpu {} needs {} scratch chunks; offsets are 16-bit", rank,
                                         built.scratch_chunks);
    // One gpu that does not fit ends the attempt (a deep pipeline's failing attempts would
    // otherwise cost as much as its export).
    if (!attempt.too_many_tbs.empty() || !attempt.crowded.empty()) return attempt;
  }
  return attempt;
}

std::string sanitized(std::string text) {
  for (char& c : text)
    if (c == '"' || c == '<' || c == '>' || c == '&' || c == '\'' || static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f)
      c = '_';
  if (text.size() > 200) text.resize(200);
  return text;
}

// The executors' name of a collective (their `coll`).
std::string msccl_collective(ir::Collective collective) {
  switch (collective) {
    case ir::Collective::AllReduce: return "allreduce";
    case ir::Collective::AllGather: return "allgather";
    case ir::Collective::ReduceScatter: return "reducescatter";
    case ir::Collective::Broadcast: return "broadcast";
    case ir::Collective::Reduce: return "reduce";
  }
  return "";
}

std::string range_text(ir::UnitRange r) { return fmt::format("[{},{})", r.begin, r.end); }

// The chunks and, for all-gather and reduce-scatter, the shards. The executors give every rank
// of those the same count, in rank order (their XML has no counts per rank), and multiply it by
// the ranks: nchunksperloop counts the whole vector, k = nchunksperloop / ranks per shard.
Layout make_layout(const ir::Plan& plan, const ir::Schedule& schedule, const ExportOptions& options,
                   const std::string& label) {
  Layout layout;
  layout.units = schedule.units;
  layout.world = plan.world_size;
  if (!ir::has_shards(schedule.collective)) {
    layout.chunks = options.chunks ? options.chunks : std::min(schedule.units, kAutoChunks);
    return layout;
  }
  const std::string name = msccl_collective(schedule.collective);
  const auto world = static_cast<uint64_t>(plan.world_size);
  if (!schedule.shards.empty()) {
    // Explicit shards export only when they are the equal ones in rank order.
    ir::Schedule equal = schedule;
    equal.shards.clear();
    for (int32_t r = 0; r < plan.world_size; ++r) {
      const ir::UnitRange mine = ir::shard_of(schedule, plan.world_size, r);
      const ir::UnitRange even = ir::shard_of(equal, plan.world_size, r);
      if (!(mine == even))
        throw ExportError(fmt::format(
            "{}: explicit shards that are not the equal ones in rank order (rank {} holds {}, the equal split "
            "{}): MSCCL's {} gives every rank the same count, in rank order (there is no {}v), so this schedule "
            "is not exported",
            label, r, range_text(mine), range_text(even), name, name));
    }
  }
  layout.sharded = true;
  uint64_t largest = 0;
  for (int32_t r = 0; r <= plan.world_size; ++r) {
    const uint64_t begin = r < plan.world_size ? ir::shard_of(schedule, plan.world_size, r).begin : schedule.units;
    if (r > 0) {
      const uint64_t size = begin - layout.shard_begin.back();
      if (size == 0)
        throw ExportError(fmt::format(
            "{}: rank {}'s shard is empty ({} units over {} ranks): MSCCL's {} gives every rank the same count "
            "of data, and this schedule moves none of rank {}'s; not exported",
            label, r - 1, schedule.units, plan.world_size, name, r - 1));
      largest = std::max(largest, size);
    }
    layout.shard_begin.push_back(begin);
  }
  uint64_t chunks = options.chunks;
  if (chunks == 0) {
    const uint64_t per_shard = std::min(largest, std::max<uint64_t>(1, kAutoChunks / world));
    chunks = per_shard * world;
  } else if (chunks % world != 0) {
    throw ExportError(fmt::format("{}: {} chunks: the nchunksperloop of coll=\"{}\" counts the whole vector and "
                                  "must be a multiple of the {} ranks",
                                  label, chunks, name, world));
  }
  if (chunks > 32767)
    throw ExportError(fmt::format("{}: {} chunks; chunk offsets are 16-bit (at most 32767)", label, chunks));
  layout.chunks = chunks;
  layout.shard_chunks = static_cast<int32_t>(chunks / world);
  return layout;
}

// build, with a plan the lowering cannot place (an all-gather reading input off its shard,
// which a verified plan never does) refused under the schedule's name.
Attempt build_or_refuse(const ir::Schedule& schedule, const std::vector<RankProgram>& programs,
                        const Layout& layout, int32_t channels, bool pair_one_way, const Limits& limits,
                        const std::string& label) {
  try {
    return build(schedule, programs, layout, channels, pair_one_way, limits);
  } catch (const ExportError& e) {
    throw ExportError(fmt::format("{}: {}", label, e.what()));
  }
}

// What no variant of the schedule could change: refused before any is built.
void refuse_at_any_size(const ir::Plan& plan, const ir::Schedule& schedule, const std::string& label,
                        const Limits& limits) {
  if (ir::has_root(schedule.collective))
    throw ExportError(fmt::format(
        "{}: a {} from root {}: not exported. The MSCCL algorithm XML names no root, and the executors "
        "(msccl-executor-nccl, RCCL) pick an algorithm by collective, size and rank count alone, so a file "
        "planned for one root would run every call, whatever its root, and give wrong results; msccl-tools "
        "writes no broadcast or reduce either. Only allreduce, allgather and reducescatter are exported "
        "(--target cpp runs every collective)",
        label, ir::to_string(schedule.collective), schedule.root));
  if (plan.world_size > limits.max_gpus)
    throw ExportError(fmt::format("{}: {} ranks; the executors' XML reader holds at most {} gpu elements",
                                  label, plan.world_size, limits.max_gpus));
  if (schedule.max_bytes && *schedule.max_bytes <= 1)
    throw ExportError(label + ": it serves only empty messages, which MSCCL never runs (and maxBytes 0 "
                              "would mean no limit)");
  if (schedule.min_bytes > static_cast<uint64_t>(INT64_MAX) ||
      (schedule.max_bytes && *schedule.max_bytes - 1 > static_cast<uint64_t>(INT64_MAX)))
    throw ExportError(label + ": its byte range does not fit the executors' 64-bit signed sizes");
}

// export_schedule of `schedule` standing as schedule `index` of the plan (a variant of it, for
// export_fitting).
Export export_as(const ir::Plan& plan, const ir::Schedule& schedule, size_t index, const ExportOptions& options) {
  ir::require_materialized(schedule, "export_schedule");
  const Limits& limits = options.limits;
  const std::string label = fmt::format("schedule {} ({})", index, schedule.algorithm);
  refuse_at_any_size(plan, schedule, label, limits);
  const Layout layout = make_layout(plan, schedule, options, label);
  const uint64_t chunks = layout.chunks;
  if (chunks > 32767)
    throw ExportError(fmt::format("{}: {} chunks; chunk offsets are 16-bit (at most 32767)", label, chunks));
  if (options.protocol != "Simple" && options.protocol != "LL" && options.protocol != "LL128")
    throw ExportError(fmt::format("unknown protocol '{}' (Simple, LL or LL128)", options.protocol));

  // A star's root exchanges with every other member on the star's channel, one threadblock
  // each; more channels cannot spread one star, nor more slices shrink it: a limit the schedule
  // does not fit (export_plan then serves its sizes with the nearest schedule that does).
  for (size_t s = 0; s < schedule.steps.size(); ++s)
    for (size_t o = 0; o < schedule.steps[s].ops.size(); ++o) {
      const ir::Op& op = schedule.steps[s].ops[o];
      if (op.shape != ir::OpShape::Star) continue;
      const auto members = static_cast<int64_t>(op.group.size()) - (op.root_in_group() ? 1 : 0);
      if (members > limits.peers_per_channel)
        throw DoesNotFit(fmt::format("{}: cannot fit: step {} op {} is a star whose root {} exchanges with {} "
                                     "members on one channel, the executors connect at most {} peers per channel",
                                     label, s, o, op.root, members, limits.peers_per_channel));
    }
  std::vector<RankProgram> programs;
  for (int32_t r = 0; r < plan.world_size; ++r) programs.push_back(lower_rank_program(schedule, r));

  Export result;
  const std::string collective_name = msccl_collective(schedule.collective);
  result.chunking = report_chunking(plan, schedule, layout);
  // Every channel count is tried: more channels spread steps and peers but add threadblocks, and
  // a gpu short of threadblocks over K channels may fit over more (a deal round robin moves its
  // peers between channels).
  std::string crowding, too_many;
  int32_t crowded_at = 0, too_many_at = 0;
  const int32_t max_channels = std::max(1, limits.channels);
  for (int32_t channels = 1; channels <= max_channels; ++channels) {
    // Threadblocks are paired only where a gpu needs more than the executors run.
    Attempt attempt = build_or_refuse(schedule, programs, layout, channels, false, limits, label);
    if (!attempt.too_many_tbs.empty() && attempt.crowded.empty())
      attempt = build_or_refuse(schedule, programs, layout, channels, true, limits, label);
    if (!attempt.crowded.empty()) {
      crowding = attempt.crowded;
      crowded_at = channels;
      continue;
    }
    if (!attempt.too_many_tbs.empty()) {
      too_many = attempt.too_many_tbs;
      too_many_at = channels;
      continue;
    }
    Algorithm& algorithm = result.algorithm;
    algorithm.name = sanitized(fmt::format("flexplan {} {} {} schedule {}", schedule.algorithm, collective_name,
                                           plan.topology_name.empty() ? "-" : plan.topology_name, index));
    algorithm.collective = collective_name;
    algorithm.protocol = options.protocol;
    algorithm.chunks_per_loop = static_cast<int32_t>(chunks);
    algorithm.world = plan.world_size;
    algorithm.min_bytes = static_cast<int64_t>(schedule.min_bytes);
    algorithm.max_bytes = schedule.max_bytes ? static_cast<int64_t>(*schedule.max_bytes - 1) : 0;
    algorithm.gpus = std::move(attempt.gpus);
    algorithm.channels = 1;
    for (const Gpu& gpu : algorithm.gpus)
      for (const ThreadBlock& tb : gpu.threadblocks) algorithm.channels = std::max(algorithm.channels, tb.channel + 1);
    return result;
  }
  if (too_many.empty())
    throw DoesNotFit(fmt::format("{}: cannot fit: {} even over {} channels", label, crowding, max_channels));
  if (crowding.empty())
    throw DoesNotFit(fmt::format("{}: cannot fit: {} (over 1 to {} channels)", label, too_many, max_channels));
  throw DoesNotFit(fmt::format("{}: cannot fit over 1 to {} channels: over {} channel(s) {}; over {} channel(s) {}",
                               label, max_channels, crowded_at, crowding, too_many_at, too_many));
}

}  // namespace

Export export_schedule(const ir::Plan& plan, size_t index, const ExportOptions& options) {
  if (index >= plan.schedules.size())
    throw ExportError(fmt::format("the plan has no schedule {}", index));
  return export_as(plan, plan.schedules[index], index, options);
}

namespace {

// What each variant of a base exported to, shared by the schedules of a plan that are pipelines
// of one base (the planner's variants of one algorithm): each variant is built once. A result is
// kept with the schedule it was built for, and restamped for another.
class VariantCache {
 public:
  struct Result {
    std::optional<Export> fit;
    std::string misfit;  // why not, when !fit
    size_t index = 0;    // the schedule it was built as
  };
  // The results of `base`'s variants, by slice count.
  std::map<uint32_t, Result>& of(const ir::Schedule& base) {
    const auto key = std::make_tuple(base.algorithm, base.collective, base.root);
    for (auto& [known, results] : entries_[key])
      if (known.units == base.units && known.shards == base.shards && known.steps == base.steps) return results;
    return entries_[key].emplace_back(base, std::map<uint32_t, Result>{}).second;
  }

 private:
  std::map<std::tuple<std::string, ir::Collective, int32_t>,
           std::vector<std::pair<ir::Schedule, std::map<uint32_t, Result>>>>
      entries_;
};

// A cached export or reason, as built for schedule `index` of the plan.
void restamp(Export& e, const ir::Plan& plan, const ir::Schedule& schedule, const std::string& variant, size_t index) {
  Algorithm& a = e.algorithm;
  a.name = sanitized(fmt::format("flexplan {} {} {} schedule {}", variant, a.collective,
                                 plan.topology_name.empty() ? "-" : plan.topology_name, index));
  a.min_bytes = static_cast<int64_t>(schedule.min_bytes);
  a.max_bytes = schedule.max_bytes ? static_cast<int64_t>(*schedule.max_bytes - 1) : 0;
}
std::string restamp(std::string why, size_t from, size_t index) {
  const std::string old = fmt::format("schedule {} (", from);
  if (why.rfind(old, 0) == 0) why.replace(0, old.size(), fmt::format("schedule {} (", index));
  return why;
}

FittedExport fit(const ir::Plan& plan, size_t index, const ExportOptions& options, VariantCache& cache) {
  if (index >= plan.schedules.size())
    throw ExportError(fmt::format("the plan has no schedule {}", index));
  const ir::Schedule& schedule = plan.schedules[index];
  FittedExport fitted;
  fitted.planned = fitted.algorithm = schedule.algorithm;
  refuse_at_any_size(plan, schedule, fmt::format("schedule {} ({})", index, schedule.algorithm), options.limits);
  const auto pipeline = ir::pipeline_base(schedule);
  if (!pipeline) {
    fitted.exported = export_as(plan, ir::materialize(schedule), index, options);
    return fitted;
  }
  fitted.planned_slices = pipeline->slices;
  const std::string& name = pipeline->base.algorithm;
  const auto variant_name = [&](uint32_t slices) {
    return slices == 1 ? name : fmt::format("{}@{}", name, slices);
  };
  std::map<uint32_t, VariantCache::Result>& results = cache.of(pipeline->base);
  // Whether the variant of `slices` fits.
  const auto fits = [&](uint32_t slices) {
    auto it = results.find(slices);
    if (it == results.end()) {
      VariantCache::Result result;
      result.index = index;
      try {
        const ir::Schedule whole =
            slices == 1 ? pipeline->base
            : slices == pipeline->slices && schedule.slices == 1
                ? schedule
                : ir::materialize(ir::compact_pipeline(pipeline->base, slices));
        result.fit = export_as(plan, whole, index, options);
      } catch (const DoesNotFit& e) {
        result.misfit = e.what();
      } catch (const ir::TooLargeToExpand& e) {  // far beyond the executors' limits as well
        result.misfit = fmt::format("schedule {} ({}): {}", index, variant_name(slices), e.what());
      }
      it = results.emplace(slices, std::move(result)).first;
    }
    return it->second.fit.has_value();
  };
  const auto why = [&](uint32_t slices) {
    const VariantCache::Result& r = results.at(slices);
    return restamp(r.misfit, r.index, index);
  };
  // The planned variant, then halves down to the base; the base's refusal is the schedule's.
  uint32_t best = pipeline->slices;
  std::vector<uint32_t> misfits;  // deepest first
  if (!fits(best)) {
    misfits.push_back(best);
    uint32_t deeper = best;  // the shallowest variant known not to fit
    best = deeper / 2;
    for (; best > 1 && !fits(best); best /= 2) misfits.push_back(deeper = best);
    if (best <= 1) {
      best = 1;
      if (!fits(1)) {
        std::string tried;
        for (const uint32_t m : misfits) tried += (tried.empty() ? "" : ", ") + variant_name(m);
        throw DoesNotFit(fmt::format("{} (nor does any pipeline of it: {})", why(1), tried));
      }
    }
    // The deepest between the one that fits and the shallowest known not to.
    std::vector<uint32_t> between;
    while (deeper - best > 1) {
      const uint32_t middle = best + (deeper - best) / 2;
      if (fits(middle)) {
        best = middle;
      } else {
        deeper = middle;
        between.push_back(middle);
      }
    }
    std::sort(between.rbegin(), between.rend());
    misfits.insert(misfits.end(), between.begin(), between.end());
    std::sort(misfits.rbegin(), misfits.rend());
    fitted.why = why(pipeline->slices);
    for (const uint32_t m : misfits) fitted.too_deep.push_back(variant_name(m));
  }
  fitted.slices = best;
  fitted.algorithm = best == pipeline->slices ? schedule.algorithm : variant_name(best);
  fitted.exported = *results.at(best).fit;
  if (results.at(best).index != index) restamp(fitted.exported, plan, schedule, fitted.algorithm, index);
  return fitted;
}

}  // namespace

FittedExport export_fitting(const ir::Plan& plan, size_t index, const ExportOptions& options) {
  VariantCache cache;
  return fit(plan, index, options, cache);
}

std::vector<ScheduleExport> export_plan(const ir::Plan& plan, const ExportOptions& options) {
  std::vector<ScheduleExport> out(plan.schedules.size());
  std::vector<size_t> misfits;
  VariantCache cache;
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    out[i].index = out[i].source = i;
    try {
      out[i].fitted = fit(plan, i, options, cache);
    } catch (const DoesNotFit& e) {
      out[i].refused = e.what();
      misfits.push_back(i);
    } catch (const ExportError& e) {
      out[i].refused = e.what();
    }
  }
  for (const size_t i : misfits) {
    const ir::Schedule& schedule = plan.schedules[i];
    // The same collective's exported schedules, by byte range.
    std::vector<size_t> same;
    for (size_t j = 0; j < plan.schedules.size(); ++j)
      if (out[j].fitted && out[j].source == j && plan.schedules[j].collective == schedule.collective &&
          plan.schedules[j].root == schedule.root)
        same.push_back(j);
    if (same.empty()) continue;
    const auto below = [&](size_t j) { return plan.schedules[j].min_bytes < schedule.min_bytes; };
    // Nearest by position among the ranges; the one serving smaller messages first at a tie.
    std::vector<std::pair<size_t, size_t>> order;  // (distance, j)
    std::vector<size_t> lower, upper;
    for (const size_t j : same) (below(j) ? lower : upper).push_back(j);
    const auto by_min = [&](size_t a, size_t b) { return plan.schedules[a].min_bytes < plan.schedules[b].min_bytes; };
    std::sort(lower.begin(), lower.end(), [&](size_t a, size_t b) { return by_min(b, a); });
    std::sort(upper.begin(), upper.end(), by_min);
    for (size_t d = 0; d < lower.size(); ++d) order.push_back({2 * d, lower[d]});
    for (size_t d = 0; d < upper.size(); ++d) order.push_back({2 * d + 1, upper[d]});
    const size_t source = std::min_element(order.begin(), order.end())->second;
    ScheduleExport& e = out[i];
    e.source = source;
    e.substituted_because = e.refused;
    e.refused.clear();
    e.fitted = *out[source].fitted;
    Algorithm& a = e.fitted->exported.algorithm;
    a.min_bytes = static_cast<int64_t>(schedule.min_bytes);
    a.max_bytes = schedule.max_bytes ? static_cast<int64_t>(*schedule.max_bytes - 1) : 0;
    a.name = sanitized(fmt::format("flexplan {} {} {} schedule {} (as schedule {})", e.fitted->algorithm, a.collective,
                                   plan.topology_name.empty() ? "-" : plan.topology_name, i, source));
  }
  return out;
}

}  // namespace flexplan::codegen::msccl
