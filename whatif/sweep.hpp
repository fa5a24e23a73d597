// Runs a what-if sweep: every point of the variation grid built from the base topology and
// analysed, with progress told along the way.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "whatif/analysis.hpp"
#include "whatif/variation.hpp"

namespace flexplan::whatif {

struct SweepPoint {
  std::vector<std::string> values;  // one label per variation
  PointResult result;
};

struct Sweep {
  std::string topology_name;
  std::string topology_file;
  std::vector<Variation> variations;
  AnalysisOptions options;
  std::vector<std::string> left_out;  // algorithms too big to build somewhere in the sweep
  std::vector<SweepPoint> points;
};

// progress(done, total) after every point. Throws VariationError for a value that does not fit
// the tree, TopologyError where a varied tree is not a valid topology (naming the point).
Sweep run_sweep(const Topology& base, const std::string& file, std::vector<Variation> variations,
                const AnalysisOptions& options, Pricer& pricer,
                const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace flexplan::whatif
