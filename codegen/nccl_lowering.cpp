// The NCCL lowering pass, its communicator table and the issue-order check (nccl_lowering.hpp).
#include "codegen/nccl_lowering.hpp"
#include "ir/pipeline_form.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace flexplan::codegen {
namespace {

// The ranks an op's NCCL call spans: the group, plus a root outside it; ascending.
std::vector<int32_t> call_members(const ir::Op& op) {
  std::vector<int32_t> members = op.group.to_vector();
  members.push_back(op.root);
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  return members;
}

bool overlaps(const NcclCall& a, const NcclCall& b) {
  return a.unit_begin < b.unit_end && b.unit_begin < a.unit_end;
}

// Writes the buffer: a reduce's root, a broadcast's receivers. Every other call reads it
// (a reduce root sending the identity reads nothing, but its write still must not land before
// the others read).
bool writes(const NcclCall& call) {
  return call.kind == NcclCallKind::Reduce ? call.is_root : !call.is_root;
}

// A write overlapping any other call's range on this rank in the same step is staged.
// Steps hold few calls per rank except on star roots, so sort by start and sweep.
void mark_staged_writes(NcclStep& step) {
  std::vector<size_t> order(step.calls.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return step.calls[a].unit_begin < step.calls[b].unit_begin;
  });
  uint64_t furthest_end = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    NcclCall& call = step.calls[order[k]];
    if (call.unit_begin == call.unit_end) continue;
    const bool earlier = k > 0 && furthest_end > call.unit_begin;
    bool later = false;
    for (size_t j = k + 1; j < order.size() && !later; ++j) {
      const NcclCall& next = step.calls[order[j]];
      if (next.unit_begin >= call.unit_end) break;
      later = overlaps(call, next);
    }
    if (writes(call) && (earlier || later)) call.stage_write = true;
    furthest_end = std::max(furthest_end, call.unit_end);
  }
}

std::string join(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ',';
    if (i == 8 && ranks.size() > 10) return out + fmt::format("... ({} ranks)", ranks.size());
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

int32_t NcclGroup::sub_rank(int32_t rank) const {
  const auto it = std::lower_bound(members.begin(), members.end(), rank);
  return it != members.end() && *it == rank ? static_cast<int32_t>(it - members.begin()) : -1;
}

int32_t NcclCommTable::group_of(uint32_t split, int32_t rank) const {
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].split == split && groups[g].sub_rank(rank) >= 0) return static_cast<int32_t>(g);
  return -1;
}

int32_t NcclCommTable::color(uint32_t split, int32_t rank) const {
  const int32_t g = group_of(split, rank);
  return g < 0 ? -1 : groups[static_cast<size_t>(g)].color;
}

int32_t NcclCommTable::find(const std::vector<int32_t>& sorted_members) const {
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].members == sorted_members) return static_cast<int32_t>(g);
  return -1;
}

NcclCommTable build_nccl_comm_table(const std::vector<const ir::Schedule*>& schedules,
                                    int32_t world_size) {
  NcclCommTable table;
  table.world_size = world_size;
  std::map<std::vector<int32_t>, int32_t> index;
  // Per split: which ranks it already colors. A new set goes to the first split where all its
  // members are still free, so disjoint sets share split calls.
  std::vector<std::vector<bool>> taken;
  for (const ir::Schedule* schedule : schedules) {
    for (const ir::Step& step : schedule->steps) {
      for (const ir::Op& op : step.ops) {
        std::vector<int32_t> members = call_members(op);
        if (members.size() < 2 || index.count(members)) continue;
        for (int32_t r : members)
          if (r < 0 || r >= world_size)
            throw std::invalid_argument(fmt::format("op rank {} outside world size {}", r, world_size));
        uint32_t split = 0;
        while (split < taken.size() &&
               std::any_of(members.begin(), members.end(),
                           [&](int32_t r) { return taken[split][static_cast<size_t>(r)]; }))
          ++split;
        if (split == taken.size()) taken.emplace_back(static_cast<size_t>(world_size), false);
        for (int32_t r : members) taken[split][static_cast<size_t>(r)] = true;
        NcclGroup group;
        group.split = split;
        // Colors are distinct within a split; the group's index keeps them unique overall.
        group.color = static_cast<int32_t>(table.groups.size());
        group.members = members;
        index.emplace(std::move(members), static_cast<int32_t>(table.groups.size()));
        table.groups.push_back(std::move(group));
      }
    }
  }
  table.splits = static_cast<uint32_t>(taken.size());
  return table;
}

NcclCommTable build_nccl_comm_table(const ir::Plan& plan) {
  std::vector<const ir::Schedule*> schedules;
  for (const ir::Schedule& s : plan.schedules) schedules.push_back(&s);
  return build_nccl_comm_table(schedules, plan.world_size);
}

NcclRankProgram lower_nccl_rank(const ir::Schedule& schedule, const NcclCommTable& table,
                                int32_t rank) {
  // Member set -> communicator, built once per call of the pass.
  std::map<std::vector<int32_t>, int32_t> index;
  for (size_t g = 0; g < table.groups.size(); ++g)
    index.emplace(table.groups[g].members, static_cast<int32_t>(g));
  NcclRankProgram program;
  program.rank = rank;
  // This rank's calls in each base step: one pass over the base, whatever the slice count.
  struct MyCall {
    uint32_t op;    // index in its base step
    int32_t comm;
  };
  std::vector<std::vector<MyCall>> mine(schedule.steps.size());
  for (size_t b = 0; b < schedule.steps.size(); ++b) {
    const auto& ops = schedule.steps[b].ops;
    for (size_t k = 0; k < ops.size(); ++k) {
      const ir::Op& op = ops[k];
      if (op.begin == op.end) continue;
      const std::vector<int32_t> members = call_members(op);
      if (members.size() < 2 || !std::binary_search(members.begin(), members.end(), rank)) continue;
      const auto it = index.find(members);
      if (it == index.end())
        throw std::invalid_argument(fmt::format("NCCL lowering: no communicator for ranks {} (step {}, op {})",
                                                join(members), b, k));
      mine[b].push_back({static_cast<uint32_t>(k), it->second});
    }
  }
  // A compact pipeline is lowered from its base, step by step of its expansion
  // (pipeline_form.hpp): the same calls as the materialized schedule's.
  program.steps.resize(ir::expanded_step_count(schedule, schedule.slices));
  for (size_t t = 0; t < program.steps.size(); ++t) {
    NcclStep& out = program.steps[t];
    size_t offset = 0;  // the index in step t of slice j's first op
    for (size_t j = ir::first_slice_in_step(schedule, t); j <= ir::last_slice_in_step(schedule.slices, t); ++j) {
      const size_t b = t - j;
      for (const MyCall& my : mine[b]) {
        const ir::Op& op = schedule.steps[b].ops[my.op];
        const NcclGroup& group = table.groups[static_cast<size_t>(my.comm)];
        NcclCall call;
        call.kind = op.kind == ir::OpKind::Reduce ? NcclCallKind::Reduce : NcclCallKind::Broadcast;
        call.op_index = static_cast<uint32_t>(offset + my.op);
        call.comm = my.comm;
        call.root = group.sub_rank(op.root);
        call.unit_begin = op.begin + j * schedule.units;
        call.unit_end = op.end + j * schedule.units;
        call.is_root = rank == op.root;
        call.send_identity = call.is_root && call.kind == NcclCallKind::Reduce && !op.root_in_group();
        out.calls.push_back(call);
      }
      offset += schedule.steps[b].ops.size();
    }
    mark_staged_writes(out);
  }
  return program;
}

std::string describe(const NcclCall& call) {
  return fmt::format("{} root {} units [{},{}) in comm {}",
                     call.kind == NcclCallKind::Reduce ? "ncclReduce" : "ncclBroadcast", call.root,
                     call.unit_begin, call.unit_end, call.comm);
}

std::string check_nccl_issue_order(const std::vector<NcclRankProgram>& programs,
                                   const NcclCommTable& table) {
  struct Issued {
    size_t step;
    const NcclCall* call;
  };
  // Per communicator, per member: its calls in issue order.
  std::vector<std::map<int32_t, std::vector<Issued>>> sequences(table.groups.size());
  for (const NcclRankProgram& program : programs) {
    for (size_t s = 0; s < program.steps.size(); ++s) {
      for (const NcclCall& call : program.steps[s].calls) {
        if (call.comm < 0 || static_cast<size_t>(call.comm) >= table.groups.size())
          return fmt::format("rank {} step {}: {} names no communicator of the table", program.rank,
                             s, describe(call));
        const NcclGroup& group = table.groups[static_cast<size_t>(call.comm)];
        if (group.sub_rank(program.rank) < 0)
          return fmt::format("rank {} step {}: {} but rank {} is not in that communicator ({})",
                             program.rank, s, describe(call), program.rank, join(group.members));
        sequences[static_cast<size_t>(call.comm)][program.rank].push_back({s, &call});
      }
    }
  }
  // Steps are issued in increasing index by construction of the program (one vector); what
  // could go wrong is the per-communicator order, checked here member against first member.
  for (size_t c = 0; c < table.groups.size(); ++c) {
    const NcclGroup& group = table.groups[c];
    const auto& by_rank = sequences[c];
    const int32_t first = group.members.front();
    const auto first_it = by_rank.find(first);
    const std::vector<Issued> none;
    const std::vector<Issued>& reference = first_it == by_rank.end() ? none : first_it->second;
    for (int32_t member : group.members) {
      const auto it = by_rank.find(member);
      if (it == by_rank.end() && reference.empty()) continue;
      if (it == by_rank.end() && std::none_of(programs.begin(), programs.end(), [&](const NcclRankProgram& p) {
            return p.rank == member;
          }))
        continue;  // the caller checked a subset of ranks
      const std::vector<Issued>& mine = it == by_rank.end() ? none : it->second;
      const size_t n = std::max(mine.size(), reference.size());
      for (size_t k = 0; k < n; ++k) {
        const auto show = [](const std::vector<Issued>& seq, size_t i) {
          return i < seq.size() ? fmt::format("{} in step {}", describe(*seq[i].call), seq[i].step)
                                : std::string("nothing");
        };
        const bool same = k < mine.size() && k < reference.size() && mine[k].step == reference[k].step &&
                          mine[k].call->kind == reference[k].call->kind &&
                          mine[k].call->root == reference[k].call->root &&
                          mine[k].call->unit_begin == reference[k].call->unit_begin &&
                          mine[k].call->unit_end == reference[k].call->unit_end;
        if (!same)
          return fmt::format(
              "communicator {} (ranks {}): call {} is {} on rank {} but {} on rank {}; the issue "
              "order differs between ranks and could deadlock",
              c, join(group.members), k, show(reference, k), first, show(mine, k), member);
      }
    }
  }
  return "";
}

}  // namespace flexplan::codegen
