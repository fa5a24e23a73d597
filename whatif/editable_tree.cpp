// Editable copies of topologies (editable_tree.hpp).
#include "whatif/editable_tree.hpp"

#include <functional>
#include <stdexcept>

namespace flexplan::whatif {
namespace {

TreeNode copy_subtree(const Topology& topo, NodeId n) {
  TreeNode node;
  node.name = topo.node(n).name;
  if (n != topo.root()) node.link = topo.uplink(n);
  node.rank = topo.node(n).rank;
  for (NodeId child : topo.children(n)) node.children.push_back(copy_subtree(topo, child));
  return node;
}

}  // namespace

EditableTree editable_copy(const Topology& topo) {
  return EditableTree{topo.name(), copy_subtree(topo, topo.root()), false, topo.reduce_bandwidth(),
                      topo.hop_overhead()};
}

Topology to_topology(const EditableTree& tree) {
  TopoGraph graph;
  int next_rank = 0;
  const std::function<int(const TreeNode&, int)> add = [&](const TreeNode& node, int parent) {
    TopoNodeProps props;
    props.name = node.name;
    props.link = node.link;
    if (node.is_learner()) props.rank = tree.shape_changed ? next_rank++ : node.rank;
    // add_vertex then assign: the property-taking overload trips a false GCC warning under
    // the sanitizers.
    const int id = static_cast<int>(boost::add_vertex(graph));
    graph[id] = std::move(props);
    if (parent >= 0) boost::add_edge(parent, id, node.link, graph);
    for (const auto& child : node.children) add(child, id);
    return id;
  };
  add(tree.root, -1);
  Topology topology(tree.name, std::move(graph));
  topology.set_reduce_bandwidth(tree.reduce_bandwidth);
  topology.set_hop_overhead(tree.hop_overhead);
  return topology;
}

void copy_links(const EditableTree& tree, Topology& topo) {
  // Node ids follow the tree in depth-first preorder, as to_topology numbers them.
  std::vector<Topology::UplinkChange> changes;
  NodeId next = 0;
  const std::function<void(const TreeNode&)> walk = [&](const TreeNode& node) {
    const NodeId id = next++;
    if (id >= topo.num_nodes() || topo.node(id).name != node.name ||
        static_cast<size_t>(topo.degree(id)) != node.children.size() ||
        (node.is_learner() && topo.rank_of(id) != node.rank))
      throw std::logic_error("copy_links: the tree and the topology differ in shape at '" +
                             node.name + "'");
    if (id != topo.root() && (node.link.bandwidth != topo.uplink(id).bandwidth ||
                              node.link.latency != topo.uplink(id).latency))
      changes.push_back({id, node.link});
    for (const auto& child : node.children) walk(child);
  };
  walk(tree.root);
  if (next != topo.num_nodes())
    throw std::logic_error("copy_links: the tree and the topology differ in size");
  topo.set_uplinks(changes);
}

TreeNode* find_node(TreeNode& root, std::string_view full_name) {
  if (full_name == root.name) return &root;
  if (full_name.size() <= root.name.size() || !full_name.starts_with(root.name) ||
      full_name[root.name.size()] != '/')
    return nullptr;
  const std::string_view rest = full_name.substr(root.name.size() + 1);
  for (auto& child : root.children)
    if (TreeNode* found = find_node(child, rest)) return found;
  return nullptr;
}

std::string shape_key(const Topology& topo) {
  std::string key;
  key.reserve(static_cast<size_t>(topo.num_nodes()) * 4);
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    key += std::to_string(topo.parent(n));
    key += topo.is_learner(n) ? ':' + std::to_string(topo.rank_of(n)) + ',' : std::string(",");
  }
  return key;
}

}  // namespace flexplan::whatif
