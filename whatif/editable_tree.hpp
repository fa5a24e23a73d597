// A cluster tree that variations can edit freely (change links, add or drop subtrees), and its
// conversion from and back to a Topology.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan::whatif {

struct TreeNode {
  std::string name;
  Link link;       // to the parent; unused on the root
  int rank = -1;   // learners only; renumbered depth-first after a change of shape
  std::vector<TreeNode> children;
  bool is_learner() const { return children.empty(); }
};

struct EditableTree {
  std::string name;  // the topology's name
  TreeNode root;
  bool shape_changed = false;  // set by edits that add or remove nodes
  double reduce_bandwidth = 0;  // the topology's reduction rate (0: none given)
  std::optional<double> hop_overhead;  // the topology's "hop_overhead", where it gives one
};

EditableTree editable_copy(const Topology&);
// Builds the Topology; learners are renumbered in depth-first order when the shape changed,
// else keep their ranks. Throws TopologyError where the tree is not a valid topology.
Topology to_topology(const EditableTree&);

// Gives `topo` the link figures of `tree` in place, where the tree has topo's shape, names and
// ranks (a tree whose edits changed only links, from the base that topo was built from):
// afterwards topo equals to_topology(tree), without building it. Throws TopologyError where a
// figure is not valid (as to_topology would) and std::logic_error where the shapes differ.
void copy_links(const EditableTree& tree, Topology& topo);

// The node with this full name ("core/rack1/m0"), or null.
TreeNode* find_node(TreeNode& root, std::string_view full_name);

// A string equal for two trees exactly when they have the same shape (fan-out everywhere, in
// order) and the same ranks: the schedules of algorithms that ignore link figures are equal.
std::string shape_key(const Topology&);

}  // namespace flexplan::whatif
