// The geometric mean and the worst of a set of ratios, with the tree that gave the worst: what
// the plan-quality benchmarks print per family.
#pragma once

#include <cmath>
#include <string>

namespace flexplan::bench {

struct RatioStats {
  double log_sum = 0, worst = 0;
  int n = 0;
  std::string worst_tree;
  void add(double ratio, const std::string& tree) {
    log_sum += std::log(ratio);
    ++n;
    if (ratio > worst) {
      worst = ratio;
      worst_tree = tree;
    }
  }
  double geomean() const { return n ? std::exp(log_sum / n) : 0; }
};

}  // namespace flexplan::bench
