// Replays the ops that touch one unit as a graph: node r < P is rank r's own contribution, each
// reduce adds a node whose children are its members' values at step start, a broadcast copies
// a node id. How many times a value holds contribution c is the number of paths from its node to
// node c; counting them (saturated at 2) is one sweep over the nodes, since children are always
// older than their parents. Nothing is sized by P x P.
#include "ir/exact_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "ir/op_text.hpp"

namespace flexplan::ir::detail {

namespace {

constexpr size_t kMembersInMessages = 16;

using NodeId = uint64_t;

// The last write to a rank on the unit, if any.
struct Provenance {
  bool written = false;
  size_t step = 0, op = 0;
};

// A cause of a wrong result and the op where it happened, to report the earliest of several.
struct Cause {
  size_t step, op;
  std::string message;
  bool before(const Cause& other) const {
    return std::pair(step, op) < std::pair(other.step, other.op);
  }
};

struct ReduceNode {
  size_t step, op;
  size_t first_child;  // children are children_[first_child, next node's first_child)
};

class ExactReplay {
 public:
  ExactReplay(const Schedule& schedule, int32_t world_size, uint64_t unit)
      : schedule_(schedule),
        world_size_(world_size),
        p_(static_cast<size_t>(world_size)),
        unit_(unit) {}

  std::optional<std::string> explain(int32_t focus_rank, const std::string& focus_range) {
    if (focus_rank < 0 || focus_rank >= world_size_) return std::nullopt;
    build();
    // Multiplicity of every contribution in the focus rank's final value.
    const std::vector<uint8_t> paths = paths_from({current_[focus_rank]});
    std::vector<int32_t> missing;
    int32_t doubled = -1;
    for (size_t c = 0; c < p_; ++c) {
      if (paths[c] == 0) missing.push_back(static_cast<int32_t>(c));
      if (paths[c] >= 2 && doubled < 0) doubled = static_cast<int32_t>(c);
    }
    if (doubled < 0 && missing.empty()) return std::nullopt;
    // The earliest cause: where a contribution it holds twice was first counted twice, or
    // where the last copy of a contribution it lacks, and no rank ends with, was discarded.
    std::optional<Cause> twice, lost;
    if (doubled >= 0) twice = counted_twice(focus_rank, focus_range, doubled);
    const std::vector<uint8_t> anywhere = paths_from(current_);
    for (int32_t c : missing) {
      if (anywhere[static_cast<size_t>(c)] == 0) {
        lost = trace_loss(c);
        break;
      }
    }
    if (twice && (!lost || twice->before(*lost))) return twice->message;
    if (lost) return lost->message;
    return fmt::format(
        "after the last step rank {} holds {} of {} contributions on units {}: it lacks the "
        "contribution of {} (checked exactly on unit {}); its value there {}",
        focus_rank, world_size_ - static_cast<int32_t>(missing.size()), world_size_, focus_range,
        format_ranks(missing), unit_, last_write_text(focus_rank));
  }

 private:
  bool touches(const Op& op) const { return op.begin <= unit_ && unit_ < op.end; }
  bool is_leaf(NodeId node) const { return node < p_; }
  const ReduceNode& reduce_node(NodeId node) const { return nodes_[node - p_]; }
  size_t children_end(NodeId node) const {
    const size_t index = node - p_ + 1;
    return index < nodes_.size() ? nodes_[index].first_child : children_.size();
  }

  // Calls write(rank) for every rank the op writes.
  template <typename Fn>
  static void for_each_written(const Op& op, Fn&& write) {
    if (op.kind == OpKind::Reduce) return write(op.root);
    for (int32_t member : op.group) {
      if (member != op.root) write(member);
    }
  }

  // Runs the ops touching the unit (building the graph when asked); calls on_write(step, op,
  // rank, old node, new node) for every write and on_step_end(step) after each step. Node ids
  // are handed out in the same order on every run.
  template <typename OnWrite, typename OnStepEnd>
  void run(std::vector<NodeId>& current, bool build_nodes, OnWrite&& on_write,
           OnStepEnd&& on_step_end) {
    current.resize(p_);
    for (size_t r = 0; r < p_; ++r) current[r] = r;
    NodeId next_node = p_;
    std::vector<std::pair<size_t, NodeId>> results;
    for (size_t s = 0; s < schedule_.steps.size(); ++s) {
      const Step& step = schedule_.steps[s];
      results.clear();
      for (size_t o = 0; o < step.ops.size(); ++o) {
        const Op& op = step.ops[o];
        if (!touches(op)) continue;
        if (op.kind == OpKind::Broadcast) {
          results.emplace_back(o, current[op.root]);
          continue;
        }
        if (build_nodes) {
          nodes_.push_back({s, o, children_.size()});
          for (int32_t member : op.group) children_.push_back(current[member]);
        }
        results.emplace_back(o, next_node++);
      }
      for (const auto& [o, node] : results) {
        for_each_written(step.ops[o], [&, o = o, node = node](int32_t rank) {
          on_write(s, o, rank, current[rank], node);
          current[rank] = node;
        });
      }
      on_step_end(s);
    }
  }

  void build() {
    provenance_.assign(p_, Provenance{});
    run(
        current_, true,
        [&](size_t s, size_t o, int32_t rank, NodeId, NodeId) {
          provenance_[rank] = Provenance{true, s, o};
        },
        [](size_t) {});
  }

  // Paths from the `roots` to every node, saturated at 2 (a parent's id is always above its
  // children's, so one sweep downwards suffices).
  std::vector<uint8_t> paths_from(const std::vector<NodeId>& roots) const {
    std::vector<uint8_t> paths(p_ + nodes_.size(), 0);
    for (NodeId root : roots) paths[root] = static_cast<uint8_t>(std::min(2, paths[root] + 1));
    for (NodeId node = paths.size(); node-- > p_;) {
      if (paths[node] == 0) continue;
      for (size_t i = reduce_node(node).first_child; i < children_end(node); ++i) {
        uint8_t& child = paths[children_[i]];
        child = static_cast<uint8_t>(std::min(2, child + paths[node]));
      }
    }
    return paths;
  }

  // Paths from every node to leaf `contributor`, saturated at 2: how often each value holds
  // that contribution.
  std::vector<uint8_t> paths_to(int32_t contributor) const {
    std::vector<uint8_t> paths(p_ + nodes_.size(), 0);
    paths[static_cast<size_t>(contributor)] = 1;
    for (NodeId node = p_; node < paths.size(); ++node) {
      int sum = 0;
      for (size_t i = reduce_node(node).first_child; i < children_end(node) && sum < 2; ++i)
        sum += paths[children_[i]];
      paths[node] = static_cast<uint8_t>(std::min(2, sum));
    }
    return paths;
  }

  // The focus rank's value holds `contributor` more than once: find the reduce that first
  // added it twice, following the value down through children that already hold it twice.
  Cause counted_twice(int32_t rank, const std::string& range, int32_t contributor) const {
    const std::vector<uint8_t> holds = paths_to(contributor);
    NodeId node = current_[rank];
    for (bool deeper = true; deeper;) {
      deeper = false;
      for (size_t i = reduce_node(node).first_child; i < children_end(node); ++i) {
        if (holds[children_[i]] >= 2) {
          node = children_[i];
          deeper = true;
          break;
        }
      }
    }
    const ReduceNode& origin = reduce_node(node);
    const Op& op = schedule_.steps[origin.step].ops[origin.op];
    std::vector<int32_t> bringers;
    for (size_t i = origin.first_child; i < children_end(node); ++i) {
      if (holds[children_[i]] == 1) bringers.push_back(op.group[i - origin.first_child]);
    }
    return Cause{
        origin.step, origin.op,
        fmt::format("after the last step rank {} holds the contribution of rank {} more than once "
                    "on units {} (checked exactly on unit {}); it was first counted twice at step "
                    "{} op {} ({}), where group members {} both brought it to rank {}; its value "
                    "there {}",
                    rank, contributor, range, unit_, origin.step, origin.op,
                    format_op(op, kMembersInMessages), format_ranks(bringers), op.root,
                    last_write_text(rank))};
  }

  // No rank ends holding `contributor`: the write after which none holds it any more (the
  // last, in op order, of the step after which no rank holds it).
  std::optional<Cause> trace_loss(int32_t contributor) {
    const std::vector<uint8_t> holds = paths_to(contributor);
    struct Discard {
      size_t step, op;
      int32_t rank;
      Provenance previous;
    };
    std::vector<NodeId> current;
    std::vector<Provenance> provenance(p_);
    int64_t holders = 1;  // ranks whose value holds the contribution: at first its own rank
    std::optional<Discard> last_discard;
    std::optional<Cause> found;
    run(
        current, false,
        [&](size_t s, size_t o, int32_t rank, NodeId before, NodeId after) {
          const bool had = holds[before] > 0, has = holds[after] > 0;
          if (had && !has) last_discard = Discard{s, o, rank, provenance[rank]};
          holders += static_cast<int64_t>(has) - static_cast<int64_t>(had);
          provenance[rank] = Provenance{true, s, o};
        },
        [&](size_t) {
          if (found || holders > 0 || !last_discard) return;
          const Discard& d = *last_discard;
          found = Cause{
              d.step, d.op,
              fmt::format("step {} op {} ({}): writing rank {} on unit {} discards the last copy "
                          "of the contribution of rank {}, held there {}, so no rank can end "
                          "with it",
                          d.step, d.op,
                          format_op(schedule_.steps[d.step].ops[d.op], kMembersInMessages),
                          d.rank, unit_, contributor, since(d.previous))};
        });
    return found;
  }

  std::string last_write_text(int32_t rank) const {
    const Provenance& last = provenance_[rank];
    return last.written ? "has not changed " + since(last) : "was never written";
  }

  // "since the start" or "since step 2 op 1 (reduce ...)".
  std::string since(const Provenance& write) const {
    if (!write.written) return "since the start";
    return fmt::format("since step {} op {} ({})", write.step, write.op,
                       format_op(schedule_.steps[write.step].ops[write.op], kMembersInMessages));
  }

  const Schedule& schedule_;
  const int32_t world_size_;
  const size_t p_;
  const uint64_t unit_;
  std::vector<ReduceNode> nodes_;  // node p_ + i is nodes_[i]
  std::vector<NodeId> children_;
  std::vector<NodeId> current_;  // per rank: its value's node after the last step
  std::vector<Provenance> provenance_;
};

}  // namespace

std::optional<std::string> replay_unit(const Schedule& schedule, int32_t world_size, uint64_t unit,
                                       int32_t focus_rank, const std::string& focus_range) {
  return ExactReplay(schedule, world_size, unit).explain(focus_rank, focus_range);
}

}  // namespace flexplan::ir::detail
