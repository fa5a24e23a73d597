// Parsing variations and applying them to a tree (variation.hpp).
#include "whatif/variation.hpp"

#include <fnmatch.h>

#include <charconv>
#include <cmath>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "topology/topology.hpp"

namespace flexplan::whatif {
namespace {

std::vector<std::string> split_values(const std::string& text) {
  std::vector<std::string> values;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string value = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!value.empty() && value.front() == ' ') value.erase(value.begin());
    while (!value.empty() && value.back() == ' ') value.pop_back();
    values.push_back(value);
    if (comma == std::string::npos) return values;
    start = comma + 1;
  }
}

// "node:" prefixes: returns the rest after `prefix` or empty when the text does not start so.
bool take_prefix(std::string_view text, std::string_view prefix, std::string& rest) {
  if (!text.starts_with(prefix)) return false;
  rest = std::string(text.substr(prefix.size()));
  return true;
}

void parse_link_class(const std::string& text, const std::string& name, Variation& v) {
  if (name == "machines") v.links = LinkClass::Machines;
  else if (name == "learners") v.links = LinkClass::Learners;
  else if (name == "all") v.links = LinkClass::All;
  else if (take_prefix(name, "under:", v.node)) v.links = LinkClass::Under;
  else if (take_prefix(name, "link:", v.node)) v.links = LinkClass::Link;
  else if (take_prefix(name, "name:", v.node)) v.links = LinkClass::Name;
  else
    throw VariationError(text, fmt::format("unknown link class '{}' (machines, learners, all, "
                                           "under:NODE, link:NODE, name:GLOB)", name));
  if ((v.links == LinkClass::Under || v.links == LinkClass::Link || v.links == LinkClass::Name) &&
      v.node.empty())
    throw VariationError(text, fmt::format("'{}' needs a node name after the colon", name));
}

double parse_count(const std::string& text, const std::string& value, int min) {
  int count = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), count);
  if (error != std::errc() || end != value.data() + value.size() || count < min || count > 100000)
    throw VariationError(text, fmt::format("'{}' is not a whole number from {} to 100000", value, min));
  return count;
}

double parse_factor(const std::string& text, const std::string& value) {
  double factor = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), factor);
  if (error != std::errc() || end != value.data() + value.size() || !(factor > 0) ||
      !std::isfinite(factor))
    throw VariationError(text, fmt::format("'{}' is not a positive factor", value));
  return factor;
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

// A machine: a node whose children are all learners.
bool is_machine(const TreeNode& node) {
  if (node.children.empty()) return false;
  for (const auto& child : node.children)
    if (!child.is_learner()) return false;
  return true;
}

// Calls f(link, full name, is the node a machine, is it a learner) for every non-root node.
void for_each_link(TreeNode& node, const std::string& full_name,
                   const std::function<void(TreeNode&, const std::string&)>& f) {
  for (auto& child : node.children) {
    const std::string name = full_name + "/" + child.name;
    f(child, name);
    for_each_link(child, name, f);
  }
}

TreeNode& need_node(const Variation& v, const std::string& value, EditableTree& tree,
                    const std::string& full_name) {
  TreeNode* node = find_node(tree.root, full_name);
  if (!node)
    throw VariationError(v.text, fmt::format("value '{}': no node named '{}' (full names start "
                                             "at the root, as '{}/...')",
                                             value, full_name, tree.root.name));
  return *node;
}

size_t subtree_nodes(const TreeNode& node) {
  size_t nodes = 1;
  for (const auto& child : node.children) nodes += subtree_nodes(child);
  return nodes;
}

// The bytes of the names and full names (paths from the root) of `node`'s subtree, the node's
// full name being `path` long; what the topology's name limit counts (kMaxTopologyNameBytes).
double name_bytes(const TreeNode& node, double path) {
  double bytes = static_cast<double>(node.name.size()) + path;
  for (const auto& child : node.children)
    bytes += name_bytes(child, path + 1 + static_cast<double>(child.name.size()));
  return bytes;
}

// Edits that add nodes check the tree they would make before making it: a few values can ask
// for billions of nodes (100,000 machines of 100,000 GPUs), or for gigabytes of full names
// (100,000 GPUs under a machine with a long name).
struct Growth {
  double nodes = 0;       // added less removed
  double name_bytes = 0;  // the same, in names and full names
};
void check_growth(const Variation& v, const std::string& value, const EditableTree& tree,
                  const Growth& growth) {
  const double nodes = static_cast<double>(subtree_nodes(tree.root)) + growth.nodes;
  if (nodes > kMaxTopologyNodes)
    throw VariationError(v.text, fmt::format("value '{}' would grow the tree to {:.0f} nodes, more "
                                             "than the limit of {} a topology may have",
                                             value, nodes, kMaxTopologyNodes));
  const double bytes =
      name_bytes(tree.root, static_cast<double>(tree.root.name.size())) + growth.name_bytes;
  if (bytes > kMaxTopologyNameBytes)
    throw VariationError(v.text, fmt::format("value '{}' would grow the tree's names and full names "
                                             "to {:.0f} bytes, more than the limit of {:.0f}",
                                             value, bytes, kMaxTopologyNameBytes));
}

// `base` with the first suffix from `from` on that no name in `taken` has, and records it.
std::string fresh_name(std::unordered_set<std::string>& taken, const std::string& base,
                       size_t from) {
  for (size_t suffix = from;; ++suffix) {
    std::string name = fmt::format("{}{}", base, suffix);
    if (taken.insert(name).second) return name;
  }
}

bool same_shape(const TreeNode& a, const TreeNode& b) {
  if (a.link.bandwidth != b.link.bandwidth || a.link.latency != b.link.latency ||
      a.children.size() != b.children.size())
    return false;
  for (size_t i = 0; i < a.children.size(); ++i)
    if (!same_shape(a.children[i], b.children[i])) return false;
  return true;
}

// The count of nodes shaped like the one named `node` under its parent becomes the value.
void apply_count_at(const Variation& v, size_t index, EditableTree& tree, const std::string& node) {
  const std::string& value = v.labels[index];
  const size_t slash = node.rfind('/');
  if (slash == std::string::npos)
    throw VariationError(v.text, "count: the root cannot be copied; name a node below it");
  TreeNode& parent = need_node(v, value, tree, node.substr(0, slash));
  const TreeNode model = need_node(v, value, tree, node);
  const auto want = static_cast<size_t>(v.values[index]);
  std::vector<size_t> alike;
  for (size_t i = 0; i < parent.children.size(); ++i)
    if (same_shape(parent.children[i], model)) alike.push_back(i);
  if (want < alike.size()) {
    for (size_t k = alike.size(); k-- > want;)
      parent.children.erase(parent.children.begin() + static_cast<std::ptrdiff_t>(alike[k]));
    if (parent.children.empty())
      throw VariationError(v.text, fmt::format("value '{}' leaves '{}' without children", value,
                                               node.substr(0, slash)));
  }
  if (want > alike.size()) {
    // Each copy's name is the model's and a suffix ("+12"): every full name below grows by it.
    const double copies = static_cast<double>(want - alike.size());
    const double suffix = 1 + std::floor(std::log10(static_cast<double>(want))) + 1;
    const double nodes = static_cast<double>(subtree_nodes(model));
    const double path = static_cast<double>(node.size());
    check_growth(v, value, tree,
                 {copies * nodes, copies * (name_bytes(model, path) + (nodes + 1) * suffix)});
  }
  // Each copy gets a name no sibling has: the model's name with a suffix.
  std::unordered_set<std::string> taken;
  for (const auto& sibling : parent.children) taken.insert(sibling.name);
  for (size_t copy = 1; alike.size() + copy - 1 < want; ++copy) {
    TreeNode added = model;
    added.name = fresh_name(taken, model.name + "+", copy);
    parent.children.push_back(std::move(added));
  }
  tree.shape_changed = true;
}

// `count:NODE` names one node; `count:GLOB` every node whose full name matches (as `gpus:`), the
// topmost matches only, one per shape under each parent: each parent's same-shaped group then
// holds the value's count.
void apply_count(const Variation& v, size_t index, EditableTree& tree) {
  if (v.node.find_first_of("*?[") == std::string::npos) {
    apply_count_at(v, index, tree, v.node);
    return;
  }
  std::vector<std::pair<std::string, const TreeNode*>> models;  // (full name, node), tree order
  std::vector<std::string> matched;  // every topmost match, a model or one of its group
  for_each_link(tree.root, tree.root.name, [&](TreeNode& node, const std::string& name) {
    if (!glob_match(v.node, name)) return;
    for (const std::string& above : matched)
      if (name.size() > above.size() && name.starts_with(above) && name[above.size()] == '/') return;
    matched.push_back(name);
    for (const auto& taken : models) {
      const std::string& other = taken.first;
      const bool sibling = name.substr(0, name.rfind('/')) == other.substr(0, other.rfind('/'));
      if (sibling && same_shape(node, *taken.second)) return;
    }
    models.emplace_back(name, &node);
  });
  if (models.empty())
    throw VariationError(v.text, fmt::format("no node below the root has a full name matching '{}'", v.node));
  std::vector<std::string> names;
  for (const auto& model : models) names.push_back(model.first);
  for (const std::string& name : names) apply_count_at(v, index, tree, name);
}

void apply_gpus(const Variation& v, size_t index, EditableTree& tree) {
  const auto gpus = static_cast<size_t>(v.values[index]);
  size_t matched = 0;
  Growth growth;
  // An added GPU is named "gpuN", N at most the GPU count.
  const double gpu_name = 3 + std::floor(std::log10(static_cast<double>(gpus))) + 1;
  for_each_link(tree.root, tree.root.name, [&](TreeNode& node, const std::string& name) {
    if (!is_machine(node) || !glob_match(v.node, name)) return;
    ++matched;
    if (gpus <= node.children.size()) return;
    const double added = static_cast<double>(gpus - node.children.size());
    growth.nodes += added;
    growth.name_bytes += added * (static_cast<double>(name.size()) + 1 + 2 * gpu_name);
  });
  if (matched == 0)
    throw VariationError(v.text, fmt::format("no machine (a node whose children are all "
                                             "learners) has a full name matching '{}'", v.node));
  check_growth(v, v.labels[index], tree, growth);
  for_each_link(tree.root, tree.root.name, [&](TreeNode& node, const std::string& name) {
    if (!is_machine(node) || !glob_match(v.node, name)) return;
    const TreeNode learner = node.children.front();
    node.children.resize(std::min(gpus, node.children.size()));
    std::unordered_set<std::string> taken;
    for (const auto& sibling : node.children) taken.insert(sibling.name);
    for (size_t i = node.children.size(); i < gpus; ++i) {
      TreeNode gpu = learner;
      gpu.name = fresh_name(taken, "gpu", i);
      node.children.push_back(std::move(gpu));
    }
  });
  tree.shape_changed = true;
}

void apply_replace(const Variation& v, size_t index, EditableTree& tree) {
  TreeNode& node = need_node(v, v.labels[index], tree, v.node);
  if (&node == &tree.root)
    throw VariationError(v.text, "replace: the root cannot be replaced; load the other file instead");
  const TreeNode& replacement = v.replacements[index].root;
  // The node keeps its name; its children and everything below them change.
  const double path = static_cast<double>(v.node.size());
  const auto below = [path](const TreeNode& top) {
    double bytes = 0;
    for (const auto& child : top.children)
      bytes += name_bytes(child, path + 1 + static_cast<double>(child.name.size()));
    return bytes;
  };
  const double instead = below(replacement) - below(node);
  check_growth(v, v.labels[index], tree,
               {static_cast<double>(subtree_nodes(replacement)) - static_cast<double>(subtree_nodes(node)),
                instead});
  node.children = replacement.children;
  if (node.children.empty())
    throw VariationError(v.text, fmt::format("value '{}': its tree has no children", v.labels[index]));
  tree.shape_changed = true;
}

void apply_links(const Variation& v, size_t index, EditableTree& tree) {
  const double value = v.values[index];
  size_t changed = 0;
  const auto change = [&](TreeNode& node) {
    ++changed;
    switch (v.kind) {
      case VariationKind::SetBandwidth: node.link.bandwidth = value; break;
      case VariationKind::ScaleBandwidth: node.link.bandwidth *= value; break;
      case VariationKind::SetLatency: node.link.latency = value; break;
      case VariationKind::ScaleLatency: node.link.latency *= value; break;
      default: break;
    }
  };
  if (v.links == LinkClass::Link) {
    TreeNode& node = need_node(v, v.labels[index], tree, v.node);
    if (&node == &tree.root) throw VariationError(v.text, "the root has no uplink");
    change(node);
  } else {
    std::string base = tree.root.name;
    TreeNode* top = &tree.root;
    if (v.links == LinkClass::Under) {
      top = &need_node(v, v.labels[index], tree, v.node);
      base = v.node;
    }
    for_each_link(*top, base, [&](TreeNode& node, const std::string& name) {
      const bool in_class = v.links == LinkClass::All || v.links == LinkClass::Under ||
                            (v.links == LinkClass::Machines && is_machine(node)) ||
                            (v.links == LinkClass::Learners && node.is_learner()) ||
                            (v.links == LinkClass::Name && glob_match(v.node, name));
      if (in_class) change(node);
    });
  }
  if (changed == 0)
    throw VariationError(v.text, "no link of the tree is in this class");
}

}  // namespace

Variation parse_variation(const std::string& text) {
  Variation v;
  v.text = text;
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw VariationError(text, "expected TARGET=VALUE,VALUE,... (as machines.bandwidth=25Gbit/s,100Gbit/s)");
  // Shape targets never scale: a '*' before their '=' ends a glob ("gpus:*=4").
  const bool shape_target = text.starts_with("count:") || text.starts_with("gpus:") ||
                            text.starts_with("replace:");
  const bool scale = !shape_target && text[eq - 1] == '*';
  // The axis keeps the '*' of a scaling, so "axis=value" reads back as written.
  v.axis = text.substr(0, eq);
  const std::string target = text.substr(0, scale ? eq - 1 : eq);
  v.labels = split_values(text.substr(eq + 1));
  for (const auto& label : v.labels)
    if (label.empty()) throw VariationError(text, "an empty value (two commas, or a trailing one)");

  if (take_prefix(target, "count:", v.node) || take_prefix(target, "gpus:", v.node) ||
      take_prefix(target, "replace:", v.node)) {
    if (v.node.empty()) throw VariationError(text, "a node name is needed after the colon");
    if (target.starts_with("count:")) {
      v.kind = VariationKind::Count;
      for (const auto& label : v.labels) v.values.push_back(parse_count(text, label, 0));
    } else if (target.starts_with("gpus:")) {
      v.kind = VariationKind::Gpus;
      for (const auto& label : v.labels) v.values.push_back(parse_count(text, label, 1));
    } else {
      v.kind = VariationKind::Replace;
      for (const auto& label : v.labels) {
        try {
          v.replacements.push_back(editable_copy(load_topology(label)));
        } catch (const std::exception& e) {
          throw VariationError(text, fmt::format("value '{}': {}", label, e.what()));
        }
        v.values.push_back(static_cast<double>(v.values.size()));
      }
    }
    return v;
  }

  const size_t dot = target.rfind('.');
  if (dot == std::string::npos)
    throw VariationError(text, fmt::format("unknown target '{}' (CLASS.bandwidth, CLASS.latency, "
                                           "count:NODE, gpus:GLOB, replace:NODE)", target));
  const std::string property = target.substr(dot + 1);
  parse_link_class(text, target.substr(0, dot), v);
  if (property == "bandwidth")
    v.kind = scale ? VariationKind::ScaleBandwidth : VariationKind::SetBandwidth;
  else if (property == "latency")
    v.kind = scale ? VariationKind::ScaleLatency : VariationKind::SetLatency;
  else
    throw VariationError(text, fmt::format("unknown link property '{}' (bandwidth or latency)", property));
  for (const auto& label : v.labels) {
    try {
      if (scale) v.values.push_back(parse_factor(text, label));
      else if (property == "bandwidth") v.values.push_back(parse_bandwidth(label));
      else v.values.push_back(parse_latency(label));
    } catch (const std::invalid_argument& e) {
      throw VariationError(text, e.what());
    }
  }
  return v;
}

void apply_variation(const Variation& v, size_t index, EditableTree& tree) {
  switch (v.kind) {
    case VariationKind::Count: apply_count(v, index, tree); break;
    case VariationKind::Gpus: apply_gpus(v, index, tree); break;
    case VariationKind::Replace: apply_replace(v, index, tree); break;
    default: apply_links(v, index, tree); break;
  }
}

size_t grid_size(const std::vector<Variation>& variations) {
  size_t size = 1;
  for (const auto& v : variations) {
    size *= v.labels.size();
    if (size > 10'000'000)
      throw VariationError(v.text, "the grid would have more than 10,000,000 points");
  }
  return size;
}

GridPoint grid_point(const std::vector<Variation>& variations, size_t point) {
  GridPoint grid{std::vector<size_t>(variations.size())};
  for (size_t i = variations.size(); i-- > 0;) {
    grid.index[i] = point % variations[i].labels.size();
    point /= variations[i].labels.size();
  }
  return grid;
}

EditableTree vary(const EditableTree& base, const std::vector<Variation>& variations,
                  const GridPoint& point) {
  EditableTree tree = base;
  for (size_t i = 0; i < variations.size(); ++i)
    if (variations[i].changes_shape()) apply_variation(variations[i], point.index[i], tree);
  for (size_t i = 0; i < variations.size(); ++i)
    if (!variations[i].changes_shape()) apply_variation(variations[i], point.index[i], tree);
  return tree;
}

}  // namespace flexplan::whatif
