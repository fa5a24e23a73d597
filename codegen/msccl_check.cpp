// Loading an MSCCL algorithm under the executors' rules and running it on host buffers against
// its collective's contract (all-reduce, all-gather, reduce-scatter; msccl.hpp). The run follows
// the executors' semantics: each threadblock executes its steps in order; steps become
// transmissions the way the executors' reader groups them (nops lend their dependency to the
// next transmission, consecutive reductions into one destination fuse); a
// dependency waits until the other threadblock's flag, the kernel's step counter at its last
// flagged transmission, reaches the step; sends and receives pair up in order per (sender,
// receiver, channel) and a transfer completes only once both sides reached it (rendezvous, the
// strictest the executors' bounded buffers can be).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "codegen/msccl.hpp"

namespace flexplan::codegen::msccl {
namespace {

[[noreturn]] void fail(const std::string& what) { throw FormatError(what); }

std::string where(const Gpu& gpu, const ThreadBlock& tb, size_t step) {
  return fmt::format("gpu {} threadblock {} step {}", gpu.id, tb.id, step);
}

bool reads_src(StepType t) {
  return t == StepType::Send || t == StepType::RecvReduceSend || t == StepType::RecvReduceCopy ||
         t == StepType::RecvReduceCopySend || t == StepType::Copy || t == StepType::Reduce;
}
bool writes_dst(StepType t) {
  return t == StepType::Recv || t == StepType::RecvCopySend || t == StepType::RecvReduceCopy ||
         t == StepType::RecvReduceCopySend || t == StepType::Copy || t == StepType::Reduce;
}

int32_t chunks_of(const Gpu& gpu, Buffer b) {
  return b == Buffer::Input ? gpu.input_chunks : b == Buffer::Output ? gpu.output_chunks : gpu.scratch_chunks;
}

// A transmission as the executors' reader builds it from steps.
struct Transmission {
  StepType type = StepType::Nop;
  Buffer src = Buffer::Input, dst = Buffer::Output;
  std::vector<int32_t> src_offsets;  // one, or several for fused reductions
  int32_t dst_offset = 0, count = 0;
  std::vector<std::pair<int32_t, int32_t>> depends;  // (threadblock, step)
  bool sets_flag = false;
  int64_t flag = 0;  // the kernel's step counter when it completes
  int64_t send_seq = -1, recv_seq = -1;
};

constexpr int kMaxReduceFusion = 16;  // MSCCL_MAX_REDUCE_FUSION

std::vector<Transmission> compile(const Gpu& gpu, const ThreadBlock& tb) {
  std::vector<Transmission> out;
  std::vector<std::pair<int32_t, int32_t>> pending;
  bool chain = false;  // the last transmission is a reduction further ones may fuse into
  int reductions = 0;  // in this threadblock so far
  int64_t counter = 0;
  for (size_t i = 0; i < tb.steps.size(); ++i) {
    const Step& s = tb.steps[i];
    if (s.depend_tb >= 0) pending.push_back({s.depend_tb, s.depend_step});
    if (s.type == StepType::Nop) continue;
    if (s.type == StepType::Reduce && chain && s.depend_tb < 0 && out.back().dst == s.dst &&
        out.back().dst_offset == s.dst_offset && out.back().src == s.src) {
      Transmission& t = out.back();
      if (t.count != s.count)
        fail(fmt::format("{}: this re fuses with the one before (same destination, no dependency), "
                         "and the executors would run both with cnt {}, not {}",
                         where(gpu, tb, i), s.count, t.count));
      t.src_offsets.push_back(s.src_offset);
      t.sets_flag = s.has_dependents;
      ++t.flag;  // the kernel counts each fused reduction as a step
      ++counter;
      ++reductions;
      chain = !s.has_dependents && reductions != kMaxReduceFusion;
      continue;
    }
    if (!pending.empty() && s.depend_tb < 0)
      fail(fmt::format("{}: nops with dependencies must be followed by a step with a dependency of "
                       "its own (the executors refuse the file otherwise)",
                       where(gpu, tb, i)));
    Transmission t;
    t.type = s.type;
    t.src = s.src;
    t.dst = s.dst;
    t.src_offsets = {s.src_offset};
    t.dst_offset = s.dst_offset;
    t.count = s.count;
    t.depends = pending;
    pending.clear();
    t.sets_flag = s.has_dependents;
    // The kernel's step counter: a transmission waiting on k flags counts k - 1 extra steps
    // (its nops), and each counts one for itself.
    if (!t.depends.empty()) counter += static_cast<int64_t>(t.depends.size()) - 1;
    t.flag = counter++;
    if (s.type == StepType::Reduce) {
      ++reductions;
      chain = !s.has_dependents && reductions != kMaxReduceFusion;
    } else {
      chain = false;
    }
    out.push_back(std::move(t));
  }
  return out;
}

// {sum, count}: a contribution counted twice or missing shows.
struct Value {
  uint64_t sum = 0;
  uint32_t count = 0;
  friend bool operator==(const Value&, const Value&) = default;
};
Value combine(Value a, Value b) { return {a.sum + b.sum, a.count + b.count}; }
uint64_t input_value(int32_t gpu, int32_t chunk) {
  uint64_t x = (static_cast<uint64_t>(gpu) << 32) ^ static_cast<uint64_t>(chunk) ^ 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

using Connection = std::tuple<int32_t, int32_t, int32_t>;  // sender, receiver, channel

// Where input and output chunk 0 of a gpu sit in the one buffer they form when run in place:
// the executors call an all-gather in place when its input is the rank's slice of the output,
// a reduce-scatter when its output is the rank's slice of the input (and the others when the
// two are one).
struct InPlace {
  int32_t input = 0, output = 0;
};
InPlace in_place_offsets(const Algorithm& a, const Gpu& gpu) {
  if (a.collective == "allgather") return {gpu.id * gpu.input_chunks, 0};
  if (a.collective == "reducescatter") return {0, gpu.id * gpu.output_chunks};
  return {};
}

struct Program {
  const Algorithm* algorithm = nullptr;
  std::vector<std::vector<std::vector<Transmission>>> code;  // [gpu][tb] -> transmissions
  // Per connection: the receiving (gpu, tb) and, per sequence number, its transmission index.
  std::map<Connection, std::pair<int32_t, std::vector<size_t>>> receivers;
};

Program compile_all(const Algorithm& a) {
  Program p;
  p.algorithm = &a;
  std::map<Connection, int64_t> sent;
  for (const Gpu& gpu : a.gpus) {
    p.code.emplace_back();
    for (const ThreadBlock& tb : gpu.threadblocks) {
      p.code.back().push_back(compile(gpu, tb));
      auto& code = p.code.back().back();
      for (size_t t = 0; t < code.size(); ++t) {
        if (sends(code[t].type)) code[t].send_seq = sent[{gpu.id, tb.send, tb.channel}]++;
        if (receives(code[t].type)) {
          auto& [receiver_tb, indices] = p.receivers[{tb.recv, gpu.id, tb.channel}];
          receiver_tb = tb.id;
          code[t].recv_seq = static_cast<int64_t>(indices.size());
          indices.push_back(t);
        }
      }
    }
  }
  for (const auto& [connection, count] : sent) {
    const auto& [from, to, channel] = connection;
    const auto it = p.receivers.find(connection);
    const int64_t received = it == p.receivers.end() ? 0 : static_cast<int64_t>(it->second.second.size());
    if (received != count)
      fail(fmt::format("gpu {} sends {} transfers to gpu {} on channel {}, which receives {}", from, count, to,
                       channel, received));
  }
  for (const auto& [connection, receiver] : p.receivers) {
    if (!sent.count(connection))
      fail(fmt::format("gpu {} receives from gpu {} on channel {}, which never sends to it",
                       std::get<1>(connection), std::get<0>(connection), std::get<2>(connection)));
  }
  return p;
}

// The first transmission of threadblock `tb` whose flag reaches `step`, or -1.
int64_t flagging_transmission(const std::vector<Transmission>& code, int32_t step) {
  for (size_t t = 0; t < code.size(); ++t)
    if (code[t].sets_flag && code[t].flag >= step) return static_cast<int64_t>(t);
  return -1;
}

// Accesses of one gpu to one chunk place (input and output count as one) by different
// threadblocks, one a write, must be ordered by threadblock order and dependencies.
std::string check_races(const Program& p) {
  const Algorithm& a = *p.algorithm;
  for (size_t g = 0; g < a.gpus.size(); ++g) {
    const Gpu& gpu = a.gpus[g];
    const auto& code = p.code[g];
    const size_t tbs = code.size();
    // Vector clocks after each transmission: entry u = transmissions of u known to be done.
    std::vector<std::vector<std::vector<uint32_t>>> after(tbs);
    for (size_t b = 0; b < tbs; ++b) after[b].resize(code[b].size());
    std::vector<size_t> done(tbs, 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t b = 0; b < tbs; ++b) {
        while (done[b] < code[b].size()) {
          const Transmission& t = code[b][done[b]];
          std::vector<uint32_t> clock = done[b] ? after[b][done[b] - 1] : std::vector<uint32_t>(tbs, 0);
          bool ready = true;
          for (const auto& [u, step] : t.depends) {
            const int64_t at = flagging_transmission(code[u], step);
            if (at < 0)
              return fmt::format("gpu {} threadblock {} waits for threadblock {} step {}, whose flag "
                                 "is never set that far",
                                 gpu.id, b, u, step);
            if (static_cast<size_t>(at) >= done[u]) {
              ready = false;
              break;
            }
            for (size_t i = 0; i < tbs; ++i) clock[i] = std::max(clock[i], after[u][at][i]);
          }
          if (!ready) break;
          clock[b] = static_cast<uint32_t>(done[b] + 1);
          after[b][done[b]] = std::move(clock);
          ++done[b];
          moved = true;
        }
      }
    }
    for (size_t b = 0; b < tbs; ++b)
      if (done[b] < code[b].size())
        return fmt::format("gpu {}: the dependencies among its threadblocks form a cycle (threadblock "
                           "{} cannot pass transmission {})",
                           gpu.id, b, done[b]);
    struct Touch {
      size_t tb, t;
      bool write;
    };
    // Input and output count as one place, where the in-place call puts them.
    const InPlace shift = in_place_offsets(a, gpu);
    std::map<std::pair<bool, int32_t>, std::vector<Touch>> touches;
    for (size_t b = 0; b < tbs; ++b)
      for (size_t t = 0; t < code[b].size(); ++t) {
        const Transmission& x = code[b][t];
        const auto touch = [&](Buffer buffer, int32_t offset, bool write) {
          const int32_t at = offset + (buffer == Buffer::Input ? shift.input : buffer == Buffer::Output ? shift.output : 0);
          for (int32_t c = at; c < at + x.count; ++c)
            touches[{buffer == Buffer::Scratch, c}].push_back({b, t, write});
        };
        if (reads_src(x.type))
          for (int32_t offset : x.src_offsets) touch(x.src, offset, false);
        if (x.type == StepType::Reduce) touch(x.dst, x.dst_offset, false);
        if (writes_dst(x.type)) touch(x.dst, x.dst_offset, true);
      }
    for (const auto& [place, list] : touches)
      for (size_t i = 0; i < list.size(); ++i)
        for (size_t j = i + 1; j < list.size(); ++j) {
          const Touch& x = list[i];
          const Touch& y = list[j];
          if (x.tb == y.tb || (!x.write && !y.write)) continue;
          const bool x_first = after[y.tb][y.t][x.tb] > x.t;
          const bool y_first = after[x.tb][x.t][y.tb] > y.t;
          if (!x_first && !y_first)
            return fmt::format("gpu {}: threadblock {} transmission {} and threadblock {} transmission {} "
                               "both touch {} chunk {} (one writes) with nothing ordering them",
                               gpu.id, x.tb, x.t, y.tb, y.t, place.first ? "scratch" : "input/output",
                               place.second);
        }
  }
  return "";
}

std::string run(const Program& p, bool in_place) {
  const Algorithm& a = *p.algorithm;
  const size_t world = a.gpus.size();
  // In place, input and output are views of one buffer (`output`), at in_place_offsets.
  struct Memory {
    std::vector<Value> input, output, scratch;
    InPlace shift;
  };
  const Value garbage{0xbad, 1000};
  std::vector<Memory> memory(world);
  for (size_t g = 0; g < world; ++g) {
    const Gpu& gpu = a.gpus[g];
    Memory& m = memory[g];
    if (in_place) {
      m.shift = in_place_offsets(a, gpu);
      m.output.assign(std::max(m.shift.input + gpu.input_chunks, m.shift.output + gpu.output_chunks), garbage);
    } else {
      m.input.resize(gpu.input_chunks);
      m.output.assign(gpu.output_chunks, garbage);
    }
    std::vector<Value>& input = in_place ? m.output : m.input;
    for (int32_t c = 0; c < gpu.input_chunks; ++c)
      input[m.shift.input + c] = {input_value(static_cast<int32_t>(g), c), 1};
    m.scratch.assign(gpu.scratch_chunks, garbage);
  }
  const auto cell = [&](size_t g, Buffer b, int32_t offset) -> Value& {
    Memory& m = memory[g];
    if (b == Buffer::Scratch) return m.scratch[offset];
    if (!in_place) return b == Buffer::Input ? m.input[offset] : m.output[offset];
    return m.output[offset + (b == Buffer::Input ? m.shift.input : m.shift.output)];
  };
  std::vector<std::vector<size_t>> pc(world);
  std::vector<std::vector<int64_t>> flag(world);
  for (size_t g = 0; g < world; ++g) {
    pc[g].assign(p.code[g].size(), 0);
    flag[g].assign(p.code[g].size(), -1);
  }
  std::map<std::pair<Connection, int64_t>, std::vector<Value>> posted;
  std::map<std::pair<size_t, size_t>, bool> has_posted;  // (gpu, tb): the current one posted
  const auto enabled = [&](size_t g, size_t b) {
    if (pc[g][b] >= p.code[g][b].size()) return false;
    for (const auto& [u, step] : p.code[g][b][pc[g][b]].depends)
      if (flag[g][u] < step) return false;
    return true;
  };
  size_t remaining = 0;
  for (size_t g = 0; g < world; ++g)
    for (const auto& code : p.code[g]) remaining += code.size();
  while (remaining > 0) {
    bool moved = false;
    for (size_t g = 0; g < world; ++g) {
      const Gpu& gpu = a.gpus[g];
      for (size_t b = 0; b < p.code[g].size(); ++b) {
        if (!enabled(g, b)) continue;
        const ThreadBlock& tb = gpu.threadblocks[b];
        const Transmission& t = p.code[g][b][pc[g][b]];
        const Connection in{tb.recv, gpu.id, tb.channel}, out{gpu.id, tb.send, tb.channel};
        const std::vector<Value>* received = nullptr;
        if (receives(t.type)) {
          const auto it = posted.find({in, t.recv_seq});
          if (it == posted.end()) continue;
          received = &it->second;
        }
        std::vector<Value> result(t.count);
        const auto src = [&](int32_t i) { return cell(g, t.src, t.src_offsets[0] + i); };
        for (int32_t i = 0; i < t.count; ++i) {
          switch (t.type) {
            case StepType::Send: result[i] = src(i); break;
            case StepType::Recv: case StepType::RecvCopySend: result[i] = (*received)[i]; break;
            case StepType::RecvReduceSend: case StepType::RecvReduceCopy: case StepType::RecvReduceCopySend:
              result[i] = combine((*received)[i], src(i));
              break;
            case StepType::Copy: result[i] = src(i); break;
            case StepType::Reduce: {
              Value v = cell(g, t.dst, t.dst_offset + i);
              for (int32_t offset : t.src_offsets) v = combine(v, cell(g, t.src, offset + i));
              result[i] = v;
              break;
            }
            case StepType::Nop: break;
          }
        }
        if (sends(t.type) && !has_posted[{g, b}]) {
          posted[{out, t.send_seq}] = result;
          has_posted[{g, b}] = true;
          moved = true;
        }
        if (sends(t.type)) {  // rendezvous: done only once the receiver reached its receive
          const auto& [receiver_tb, indices] = p.receivers.at(out);
          const size_t index = indices[static_cast<size_t>(t.send_seq)];
          const size_t r = static_cast<size_t>(tb.send);
          const bool reached = pc[r][receiver_tb] > index || (pc[r][receiver_tb] == index && enabled(r, receiver_tb));
          if (!reached) continue;
        }
        if (writes_dst(t.type))
          for (int32_t i = 0; i < t.count; ++i) cell(g, t.dst, t.dst_offset + i) = result[i];
        if (received) posted.erase({in, t.recv_seq});
        if (t.sets_flag) flag[g][b] = t.flag;
        has_posted[{g, b}] = false;
        ++pc[g][b];
        --remaining;
        moved = true;
      }
    }
    if (!moved) {
      std::string stuck;
      for (size_t g = 0; g < world && stuck.size() < 400; ++g)
        for (size_t b = 0; b < p.code[g].size(); ++b)
          if (pc[g][b] < p.code[g][b].size())
            stuck += fmt::format(" gpu {} threadblock {} at transmission {} ({});", g, b, pc[g][b],
                                 to_string(p.code[g][b][pc[g][b]].type));
      return fmt::format("deadlock ({}):{}", in_place ? "in place" : "out of place", stuck);
    }
  }
  // The contract: output chunk c of gpu g must hold expected(g, c).
  const std::string mode = in_place ? "in place" : "out of place";
  for (size_t g = 0; g < world; ++g) {
    const Gpu& gpu = a.gpus[g];
    for (int32_t c = 0; c < gpu.output_chunks; ++c) {
      const Value got = cell(g, Buffer::Output, c);
      if (a.collective == "allgather") {
        // Every gpu ends with every gpu's input: chunk c is gpu c / k's input chunk c % k.
        const int32_t k = gpu.input_chunks;
        const Value want{input_value(c / k, c % k), 1};
        if (!(got == want))
          return fmt::format("{}: gpu {} output chunk {} should be a copy of gpu {}'s input chunk {}, but it holds {}",
                             mode, g, c, c / k, c % k,
                             got.count == 1 ? "a copy of something else" : fmt::format("{} contributions", got.count));
        continue;
      }
      // All-reduce: chunk c of the sum; reduce-scatter: chunk g k + c of it, the gpu's shard.
      const int32_t whole = a.collective == "reducescatter" ? static_cast<int32_t>(g) * gpu.output_chunks + c : c;
      Value total;
      for (size_t h = 0; h < world; ++h) total = combine(total, {input_value(static_cast<int32_t>(h), whole), 1});
      if (!(got == total))
        return fmt::format("{}: gpu {} ends with {} of {} contributions{} on {}chunk {}", mode, g, got.count, world,
                           got.count == world ? " (but the wrong ones)" : "", whole == c ? "" : "output ", c);
    }
    if (!in_place)
      for (int32_t c = 0; c < gpu.input_chunks; ++c)
        if (!(memory[g].input[c] == Value{input_value(static_cast<int32_t>(g), c), 1}))
          return fmt::format("out of place: gpu {} wrote its input buffer (chunk {})", g, c);
  }
  return "";
}

}  // namespace

void check_loadable(const Algorithm& a, const Limits& limits) {
  static const std::set<std::string> collectives{"reduce", "broadcast", "allreduce", "reducescatter", "allgather",
                                                 "send", "recv", "gather", "scatter", "alltoall", "alltoallv"};
  if (!collectives.count(a.collective)) fail(fmt::format("unknown collective coll=\"{}\"", a.collective));
  if (a.protocol != "Simple" && a.protocol != "LL" && a.protocol != "LL128")
    fail(fmt::format("unknown protocol proto=\"{}\"", a.protocol));
  if (a.world < 1 || static_cast<size_t>(a.world) != a.gpus.size())
    fail(fmt::format("ngpus=\"{}\" but {} gpu elements", a.world, a.gpus.size()));
  if (a.world > limits.max_gpus) fail(fmt::format("{} gpus; the executors' reader holds at most {}", a.world, limits.max_gpus));
  if (a.channels < 1 || a.channels > limits.channels) fail(fmt::format("nchannels=\"{}\" outside [1, {}]", a.channels, limits.channels));
  if (a.chunks_per_loop < 1) fail("nchunksperloop must be at least 1");
  if (a.min_bytes < 0 || a.max_bytes < 0 || (a.max_bytes != 0 && a.max_bytes < a.min_bytes))
    fail(fmt::format("minBytes {} / maxBytes {}: not a size range", a.min_bytes, a.max_bytes));
  for (size_t g = 0; g < a.gpus.size(); ++g) {
    const Gpu& gpu = a.gpus[g];
    if (gpu.id != static_cast<int32_t>(g)) fail(fmt::format("gpu element {} has id {}", g, gpu.id));
    if (gpu.input_chunks < 0 || gpu.output_chunks < 0 || gpu.scratch_chunks < 0 || gpu.scratch_chunks > 32767 ||
        gpu.input_chunks > 32767 || gpu.output_chunks > 32767)
      fail(fmt::format("gpu {}: chunk counts must be in [0, 32767]", gpu.id));
    if (static_cast<int>(gpu.threadblocks.size()) > limits.threadblocks_per_gpu)
      fail(fmt::format("gpu {}: {} threadblocks; the executors run at most {}", gpu.id, gpu.threadblocks.size(),
                       limits.threadblocks_per_gpu));
    size_t nodes = 1 + a.gpus.size() + gpu.threadblocks.size();
    std::set<std::pair<int32_t, int32_t>> send_peers, recv_peers;  // (channel, peer)
    std::map<int32_t, int> senders_on, receivers_on;
    for (size_t b = 0; b < gpu.threadblocks.size(); ++b) {
      const ThreadBlock& tb = gpu.threadblocks[b];
      if (tb.id != static_cast<int32_t>(b)) fail(fmt::format("gpu {}: threadblock {} has id {}", gpu.id, b, tb.id));
      const auto bad_peer = [&](int32_t peer) { return peer < -1 || peer >= a.world || peer == gpu.id; };
      if (bad_peer(tb.send) || bad_peer(tb.recv))
        fail(fmt::format("gpu {} threadblock {}: peers send {} / recv {} must be -1 or another gpu", gpu.id, b,
                         tb.send, tb.recv));
      if (tb.channel < 0 || tb.channel >= a.channels)
        fail(fmt::format("gpu {} threadblock {}: channel {} outside [0, nchannels)", gpu.id, b, tb.channel));
      if (tb.send >= 0 && !send_peers.insert({tb.channel, tb.send}).second)
        fail(fmt::format("gpu {}: two threadblocks send to gpu {} on channel {}; a connection has one "
                         "threadblock per (peer, channel)",
                         gpu.id, tb.send, tb.channel));
      if (tb.recv >= 0 && !recv_peers.insert({tb.channel, tb.recv}).second)
        fail(fmt::format("gpu {}: two threadblocks receive from gpu {} on channel {}; a connection has one "
                         "threadblock per (peer, channel)",
                         gpu.id, tb.recv, tb.channel));
      if (tb.send >= 0 && ++senders_on[tb.channel] > limits.peers_per_channel)
        fail(fmt::format("gpu {}: more than {} send peers on channel {}", gpu.id, limits.peers_per_channel, tb.channel));
      if (tb.recv >= 0 && ++receivers_on[tb.channel] > limits.peers_per_channel)
        fail(fmt::format("gpu {}: more than {} receive peers on channel {}", gpu.id, limits.peers_per_channel, tb.channel));
      if (static_cast<int>(tb.steps.size()) > limits.steps_per_threadblock)
        fail(fmt::format("gpu {} threadblock {}: {} steps; the executors hold at most {}", gpu.id, b,
                         tb.steps.size(), limits.steps_per_threadblock));
      nodes += tb.steps.size();
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        const Step& s = tb.steps[i];
        const std::string at = where(gpu, tb, i);
        if (limits.rccl && fused(s.type))
          fail(fmt::format("{}: type {}: RCCL's executor refuses the fused types rcs, rrs, rrc and rrcs", at,
                           to_string(s.type)));
        if (sends(s.type) && tb.send < 0) fail(at + ": a send in a threadblock without a send peer");
        if (receives(s.type) && tb.recv < 0) fail(at + ": a receive in a threadblock without a receive peer");
        if (s.type != StepType::Nop && (s.count < 0 || s.count > limits.max_count))
          fail(fmt::format("{}: cnt {} outside [0, {}]", at, s.count, limits.max_count));
        const auto in_bounds = [&](Buffer buffer, int32_t offset) {
          return offset >= 0 && offset <= 32767 && offset + s.count <= chunks_of(gpu, buffer);
        };
        if (reads_src(s.type) && !in_bounds(s.src, s.src_offset))
          fail(fmt::format("{}: source {} [{}, {}) outside the buffer's {} chunks", at, to_string(s.src),
                           s.src_offset, s.src_offset + s.count, chunks_of(gpu, s.src)));
        if ((writes_dst(s.type)) && !in_bounds(s.dst, s.dst_offset))
          fail(fmt::format("{}: destination {} [{}, {}) outside the buffer's {} chunks", at, to_string(s.dst),
                           s.dst_offset, s.dst_offset + s.count, chunks_of(gpu, s.dst)));
        if (s.depend_tb < -1 || s.depend_tb >= static_cast<int32_t>(gpu.threadblocks.size()) ||
            s.depend_tb == tb.id)
          fail(fmt::format("{}: depid {} is not another threadblock of the gpu", at, s.depend_tb));
        if (s.depend_tb >= 0 &&
            (s.depend_step < 0 || s.depend_step >= static_cast<int32_t>(gpu.threadblocks[s.depend_tb].steps.size())))
          fail(fmt::format("{}: deps {} is not a step of threadblock {}", at, s.depend_step, s.depend_tb));
      }
      compile(gpu, tb);  // the reader's grouping rules
    }
    if (nodes > static_cast<size_t>(limits.max_nodes))
      fail(fmt::format("gpu {}: {} XML elements to hold; the executors' reader holds at most {}", gpu.id, nodes,
                       limits.max_nodes));
  }
}

std::string simulate_allreduce(const Algorithm& a) {
  if (a.collective != "allreduce") return "not an allreduce: coll=\"" + a.collective + "\"";
  return simulate(a);
}

std::string simulate(const Algorithm& a) {
  try {
    Limits generous;
    generous.steps_per_threadblock = generous.threadblocks_per_gpu = 1 << 20;
    generous.peers_per_channel = generous.channels = generous.max_gpus = generous.max_nodes = 1 << 20;
    check_loadable(a, generous);
    // The buffers the executors give each collective, in chunks of the whole vector (C =
    // nchunksperloop; they multiply an all-gather's or reduce-scatter's count by the ranks).
    const int32_t chunks = a.chunks_per_loop;
    if (a.collective == "allreduce") {
      for (const Gpu& gpu : a.gpus)
        if (gpu.input_chunks != chunks || gpu.output_chunks != chunks)
          return fmt::format("gpu {}: an allreduce's input and output hold nchunksperloop chunks", gpu.id);
    } else if (a.collective == "allgather" || a.collective == "reducescatter") {
      if (chunks % a.world != 0)
        return fmt::format("an {}'s nchunksperloop ({}) must be a multiple of its {} gpus: the executors give every "
                           "rank the same count",
                           a.collective, chunks, a.world);
      const bool gather = a.collective == "allgather";
      for (const Gpu& gpu : a.gpus)
        if (gpu.input_chunks != (gather ? chunks / a.world : chunks) ||
            gpu.output_chunks != (gather ? chunks : chunks / a.world))
          return fmt::format("gpu {}: an {}'s input holds {} chunks and its output {} (i_chunks {}, o_chunks {})",
                             gpu.id, a.collective, gather ? "nchunksperloop / ngpus" : "nchunksperloop",
                             gather ? "nchunksperloop" : "nchunksperloop / ngpus", gpu.input_chunks,
                             gpu.output_chunks);
    } else {
      return fmt::format("coll=\"{}\": the checker runs allreduce, allgather and reducescatter", a.collective);
    }
    const Program program = compile_all(a);
    if (std::string race = check_races(program); !race.empty()) return race;
    if (a.out_of_place)
      if (std::string error = run(program, false); !error.empty()) return error;
    if (a.in_place)
      if (std::string error = run(program, true); !error.empty()) return error;
    return "";
  } catch (const FormatError& e) {
    return e.what();
  }
}

}  // namespace flexplan::codegen::msccl
