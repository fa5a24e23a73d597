// Variations of a topology and the grid they span (docs/whatif.md, "Variations").
//
// One variation is one axis of the grid, written TARGET=VALUE,VALUE,...:
//   CLASS.bandwidth=V,...   CLASS.latency=V,...     set the links of a class
//   CLASS.bandwidth*=F,...  CLASS.latency*=F,...    scale them by factors
//     CLASS: machines (every machine's uplink), learners (every learner's uplink), all,
//            under:NODE (every link below NODE), link:NODE (the link above NODE),
//            name:GLOB (the links above every node whose full name matches GLOB)
//   count:NODE=N,...      N machines shaped like NODE under NODE's parent (copies added, or
//                         same-shaped siblings removed from the end)
//   gpus:GLOB=G,...       G learners in every machine whose full name matches GLOB
//   replace:NODE=FILE,... NODE's subtree replaced by the tree of a topology file (NODE keeps
//                         its name and uplink)
// Every point of the grid takes one value per axis. Shape changes (count, gpus, replace) apply
// before link changes, each group in the order given.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "whatif/editable_tree.hpp"

namespace flexplan::whatif {

// A bad variation: the message names the variation as written.
class VariationError : public std::invalid_argument {
 public:
  VariationError(const std::string& variation, const std::string& what)
      : std::invalid_argument("variation '" + variation + "': " + what) {}
};

enum class VariationKind { SetBandwidth, ScaleBandwidth, SetLatency, ScaleLatency, Count, Gpus, Replace };

enum class LinkClass { Machines, Learners, All, Under, Link, Name };

struct Variation {
  std::string text;  // as written, for messages and output
  std::string axis;  // the part before '=' ("machines.bandwidth", "all.latency*"), the column name
  VariationKind kind = VariationKind::SetBandwidth;
  LinkClass links = LinkClass::All;  // for link variations
  std::string node;                  // NODE or GLOB, where the kind or class has one
  std::vector<std::string> labels;   // the values as written
  std::vector<double> values;        // bytes/s, seconds, factors or counts
  std::vector<EditableTree> replacements;  // Replace: the trees read from the files
  bool changes_shape() const {
    return kind == VariationKind::Count || kind == VariationKind::Gpus ||
           kind == VariationKind::Replace;
  }
};

// Throws VariationError naming the text. Replace reads its files here.
Variation parse_variation(const std::string& text);

// Applies value `index` of the variation; throws VariationError naming it and the value when
// it does not fit the tree (no such node, no link in the class, a machine left empty).
void apply_variation(const Variation&, size_t index, EditableTree&);

// The grid: one index per variation, the first varying slowest.
struct GridPoint {
  std::vector<size_t> index;
};
size_t grid_size(const std::vector<Variation>&);  // throws when over 1e7 points
GridPoint grid_point(const std::vector<Variation>&, size_t point);
// The topology of a point: shape variations first, then link variations.
EditableTree vary(const EditableTree& base, const std::vector<Variation>&, const GridPoint&);

}  // namespace flexplan::whatif
