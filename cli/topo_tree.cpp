// The folded tree of `flexplan topo show`: consecutive siblings with identical subtrees and
// numbered names print as one line, so a 10,000-learner tree fits a screen.
#include "cli/topo_tree.hpp"

#include <cctype>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace flexplan::cli {

std::string plural(size_t n, std::string_view word) {
  if (n == 1) return fmt::format("1 {}", word);
  return fmt::format("{} {}", n, word == "child" ? "children" : std::string(word) + "s");
}

std::string link_text(const Link& link) {
  return fmt::format("{}, {}", format_bandwidth(link.bandwidth), format_latency(link.latency));
}

namespace {

// Numbers subtrees so that two nodes get the same number exactly when their subtrees match:
// same uplink, and children with the same names and subtrees in the same order.
std::vector<int> subtree_shapes(const Topology& topo) {
  std::vector<NodeId> postorder;
  std::vector<std::pair<NodeId, bool>> stack{{topo.root(), false}};
  while (!stack.empty()) {
    auto [v, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      postorder.push_back(v);
      continue;
    }
    stack.push_back({v, true});
    for (NodeId c : topo.children(v)) stack.push_back({c, false});
  }
  using Key = std::tuple<double, double, std::vector<std::pair<std::string, int>>>;
  std::map<Key, int> ids;
  std::vector<int> shape(topo.num_nodes(), -1);
  for (NodeId v : postorder) {
    Key key;
    if (v != topo.root()) std::get<0>(key) = topo.uplink(v).bandwidth, std::get<1>(key) = topo.uplink(v).latency;
    for (NodeId c : topo.children(v)) std::get<2>(key).emplace_back(topo.node(c).name, shape[c]);
    shape[v] = ids.try_emplace(std::move(key), static_cast<int>(ids.size())).first->second;
  }
  return shape;
}

// "gpu12" -> {"gpu", 12}; no trailing number (or a leading zero) -> index -1.
std::pair<std::string, long> split_index(const std::string& name) {
  size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  const size_t length = name.size() - digits;
  if (length == 0 || length > 9 || (length > 1 && name[digits] == '0')) return {name, -1};
  return {name.substr(0, digits), std::stol(name.substr(digits))};
}

class TreePrinter {
 public:
  TreePrinter(const Topology& topo, int max_lines)
      : topo_(topo), shape_(subtree_shapes(topo)), max_lines_(max_lines) {}

  void print() {
    emit(topo_.full_name(topo_.root()) +
         fmt::format("  ({})", plural(topo_.learners_under(topo_.root()).size(), "learner")));
    print_children(topo_.root(), "", true);
    for (const std::string& line : lines_) fmt::print("{}\n", line);
    if (dropped_ > 0)
      fmt::print("... {} (--max-lines 0 prints all)\n", plural(dropped_, "more line"));
  }

 private:
  // `exact` is false below a folded group, where ranks would belong to the first copy only.
  void print_children(NodeId v, const std::string& indent, bool exact) {
    const auto children = topo_.children(v);
    for (size_t i = 0; i < children.size();) {
      const size_t run = run_length(children, i);
      const bool last = i + run == children.size();
      const NodeId first = children[i];
      std::string label = topo_.node(first).name;
      if (run > 1) {
        const auto [prefix, index] = split_index(label);
        label = fmt::format("{}[{}..{}] x{}", prefix, index, index + static_cast<long>(run) - 1, run);
      }
      std::string line = indent + (last ? "`-- " : "|-- ") + label + "  " + link_text(topo_.uplink(first));
      if (topo_.is_learner(first)) {
        if (exact) line += "  " + rank_text(children.subspan(i, run));
      } else {
        line += fmt::format("  ({}{})", plural(topo_.learners_under(first).size(), "learner"),
                            run > 1 ? " each" : "");
      }
      emit(std::move(line));
      if (!topo_.is_learner(first))
        print_children(first, indent + (last ? "    " : "|   "), exact && run == 1);
      i += run;
    }
  }

  // How many siblings from `i` on fold into one line: same subtree, names prefix0, prefix1...
  size_t run_length(std::span<const NodeId> siblings, size_t i) const {
    const auto [prefix, index] = split_index(topo_.node(siblings[i]).name);
    if (index < 0) return 1;
    size_t run = 1;
    while (i + run < siblings.size()) {
      const NodeId next = siblings[i + run];
      const auto [next_prefix, next_index] = split_index(topo_.node(next).name);
      if (shape_[next] != shape_[siblings[i]] || next_prefix != prefix ||
          next_index != index + static_cast<long>(run))
        break;
      ++run;
    }
    return run;
  }

  std::string rank_text(std::span<const NodeId> learners) const {
    const int first = topo_.rank_of(learners.front());
    bool consecutive = true;
    for (size_t k = 0; k < learners.size(); ++k)
      consecutive = consecutive && topo_.rank_of(learners[k]) == first + static_cast<int>(k);
    if (learners.size() == 1) return fmt::format("rank {}", first);
    if (consecutive) return fmt::format("ranks {}..{}", first, first + learners.size() - 1);
    std::string list;
    for (size_t k = 0; k < learners.size() && k < 8; ++k)
      list += (k ? "," : "") + std::to_string(topo_.rank_of(learners[k]));
    return "ranks " + list + (learners.size() > 8 ? ",..." : "");
  }

  void emit(std::string line) {
    if (max_lines_ > 0 && static_cast<int>(lines_.size()) >= max_lines_)
      ++dropped_;
    else
      lines_.push_back(std::move(line));
  }

  const Topology& topo_;
  std::vector<int> shape_;
  int max_lines_;
  std::vector<std::string> lines_;
  size_t dropped_ = 0;
};

}  // namespace

void print_folded_tree(const Topology& topo, int max_lines) {
  TreePrinter(topo, max_lines).print();
}

}  // namespace flexplan::cli
