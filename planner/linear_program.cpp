// Solving a LinearProgram with CLP (linear_program.hpp).
#include "planner/linear_program.hpp"

#include <stdexcept>

#include <ClpSimplex.hpp>
#include <ClpSolve.hpp>
#include <CoinPackedMatrix.hpp>
#include <fmt/core.h>

namespace flexplan {

LinearProgram::Solution LinearProgram::minimise() const {
  CoinPackedMatrix matrix(false, rows_.data(), cols_.data(), values_.data(),
                          static_cast<CoinBigIndex>(values_.size()));
  matrix.setDimensions(static_cast<int>(row_lower_.size()), static_cast<int>(lower_.size()));
  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(matrix, lower_.data(), upper_.data(), objective_.data(), row_lower_.data(),
                    row_upper_.data());
  // Dual simplex without presolve or scaling: on these LPs CLP's presolve took most of the time
  // (a 16k-learner tree: 0.09 s against 0.38 s), and its scaling about half of the rest (the
  // coefficients are near 1 already: bandwidths relative to the slowest, shares of 1; a 128k
  // tree's two solves 2.5 s against 0.97 s, the 16k trees' 0.038-0.057 s against 0.030-0.037 s,
  // with plans as good; docs/results/planning-speed-log.md). CLP's default path is the fallback.
  ClpSolve dual_only;
  dual_only.setSolveType(ClpSolve::useDual);
  dual_only.setPresolveType(ClpSolve::presolveOff);
  model.scaling(0);
  model.initialSolve(dual_only);
  if (!model.isProvenOptimal()) {  // afresh, not from the basis the dual simplex left
    model.loadProblem(matrix, lower_.data(), upper_.data(), objective_.data(), row_lower_.data(),
                      row_upper_.data());
    model.scaling(3);  // CLP's own default
    model.initialSolve();
  }
  if (!model.isProvenOptimal())
    throw std::logic_error(fmt::format(
        "flexreduce-bw: the share LP ({} columns, {} rows) ended with CLP status {}",
        lower_.size(), row_lower_.size(), model.status()));
  Solution solution;
  solution.columns.assign(model.primalColumnSolution(), model.primalColumnSolution() + lower_.size());
  solution.row_duals.assign(model.dualRowSolution(), model.dualRowSolution() + row_lower_.size());
  solution.objective = model.objectiveValue();
  return solution;
}

}  // namespace flexplan
