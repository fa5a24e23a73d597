// The sparse all-reduce's transfers as an all-reduce schedule the verifier checks
// (docs/sparse.md): a reduce-scatter within each machine, then the machines' slice owners
// combining their selections level by level up the machine tree and handing the sums back
// down, then an all-gather within each machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/plan.hpp"
#include "ir/sparse_layout.hpp"

namespace flexplan::ir {

struct SparseExchange {
  // An all-reduce over `cells` units. Unit c is the part of the vector between two consecutive
  // slice boundaries of any machines (j/n for a machine of n learners), so that every slice is
  // a whole number of units; units are therefore not of equal length (see `element`).
  Schedule schedule;
  // Steps [first_sparse, end_sparse) move (index, value) pairs between slice owners of different
  // machines, and only they; the steps before them sum within machines, those after copy within
  // machines. In those steps every op's members own the op's whole range on their machine.
  size_t first_sparse = 0, end_sparse = 0;
  // Boundary u (0 <= u <= units) as the fraction num/den of the vector, ascending.
  struct Fraction {
    uint64_t num = 0, den = 1;
  };
  std::vector<Fraction> bounds;

  // Element where unit u begins in a count-element vector: floor(num * count / den), where
  // SparseLayout::slice puts the same boundary.
  uint64_t element(uint64_t unit, uint64_t count) const {
    const Fraction& f = bounds.at(unit);
    return unit_to_element(f.num, f.den, count);
  }
};

// The exchange for a layout. Machines are grouped by their names' '/' components: machines
// whose names share a prefix are below the same tree node. Going up, a node's children combine
// through one owner each (the child's first machine's), into the first child's owner; at the
// top node every child's owner gets the sum; going down, each node's first owner hands it to
// the others. No op can be left out (tests/unit/ir_sparse_exchange_test.cpp). Throws
// std::invalid_argument for a layout without learners.
SparseExchange sparse_exchange(const SparseLayout& layout);

}  // namespace flexplan::ir
