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
  std::vector<std::string> left_out;  // algorithms too big to build or price somewhere in the sweep
  size_t schedules_built = 0;         // for link traffic, over all workers: the reuse shows here
  size_t plans_priced = 0;            // races run (points, upgrade candidates, steps)
  std::vector<SweepPoint> points;
};

struct SweepOptions {
  std::vector<std::string> algorithms;  // for the Pricer: empty is the plan command's default race
  CostParams cost;
  unsigned jobs = 1;  // worker threads, each with its own Pricer (and schedule cache)
  // Rows the default race leaves out (PlanOptions::leave_out), for comparisons with and without.
  std::vector<std::string> leave_out{};
};

// Whether a sweep's point is planned from the given tree's plan (KeptSchedule): it has the same
// learners, by full name in rank order, and is not the given tree itself.
bool replans_from(const Topology& given, const Topology& point);

// Points are shared among the workers; progress(done, total) is called from the calling thread
// about ten times a second and once at the end. Throws VariationError for a value that does not
// fit the tree, TopologyError where a varied tree is not a valid topology (naming the point):
// the error of the lowest failing point.
Sweep run_sweep(const Topology& base, const std::string& file, std::vector<Variation> variations,
                const AnalysisOptions& options, const SweepOptions& sweep_options,
                const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace flexplan::whatif
