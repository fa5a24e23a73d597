// A sparse linear program, built row by row and solved with COIN-OR CLP in one piece (dual
// simplex without presolve first). The share LP of bandwidth_shares.cpp is its user.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include <CoinFinite.hpp>

namespace flexplan {

class LinearProgram {
 public:
  struct Solution {
    std::vector<double> columns;
    std::vector<double> row_duals;
    double objective = 0;
  };

  int column(double lower = 0, double upper = COIN_DBL_MAX, double objective = 0) {
    lower_.push_back(lower);
    upper_.push_back(upper);
    objective_.push_back(objective);
    return static_cast<int>(lower_.size()) - 1;
  }
  void add_to_objective(int col, double coefficient) { objective_[static_cast<size_t>(col)] += coefficient; }
  // A new objective (all coefficients zero first) and a column's upper bound, for solving the
  // same program again under another aim.
  void clear_objective() { std::fill(objective_.begin(), objective_.end(), 0.0); }
  void set_upper(int col, double upper) { upper_[static_cast<size_t>(col)] = upper; }
  // lower <= sum of coefficient x column <= upper; returns the row's index.
  int row(std::vector<std::pair<int, double>> terms, double lower, double upper) {
    // Columns shared by an orbit appear once per member: add their coefficients up.
    std::sort(terms.begin(), terms.end());
    size_t kept = 0;
    for (size_t i = 0; i < terms.size(); ++i) {
      if (kept > 0 && terms[kept - 1].first == terms[i].first)
        terms[kept - 1].second += terms[i].second;
      else
        terms[kept++] = terms[i];
    }
    terms.resize(kept);
    const int r = static_cast<int>(row_lower_.size());
    for (const auto& [col, coefficient] : terms) {
      rows_.push_back(r);
      cols_.push_back(col);
      values_.push_back(coefficient);
    }
    row_lower_.push_back(lower);
    row_upper_.push_back(upper);
    return r;
  }
  // Throws std::logic_error when CLP does not prove an optimum.
  Solution minimise() const;


 private:
  std::vector<double> lower_, upper_, objective_, row_lower_, row_upper_;
  std::vector<int> rows_, cols_;
  std::vector<double> values_;
};

}  // namespace flexplan
