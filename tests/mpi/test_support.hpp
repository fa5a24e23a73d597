// Shared pieces of the multi-process runtime tests: the MPI-aware GoogleTest main, plans
// (hand-built, bundled and random asymmetric topologies), deterministic inputs and their
// reference results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "topology/topology.hpp"
#include "runtime/communicator.hpp"

namespace flexplan::mpitest {

int world_rank();
int world_size();
// Sum over all ranks of MPI_COMM_WORLD (so every rank sees a failure anywhere).
uint64_t sum_over_ranks(uint64_t value);

// Runs all registered tests under MPI; only rank 0 prints the full report, the others print
// their failures prefixed with their rank. Every rank exits with the worst rank's result.
int run_all_tests(int argc, char** argv, void (*register_tests)());

// --- plans ------------------------------------------------------------------------------------

// A ring all-reduce over `world` ranks built by hand (no planner): units = world, world - 1
// reduce-scatter steps then world - 1 all-gather steps of two-member ops.
ir::Plan hand_ring_plan(int world);

// A random asymmetric tree with `learners` learners: 2 to 5 machines of unequal size under
// one switch (sometimes grouped into two racks), mixed link speeds, ranks shuffled.
Topology random_tree(int learners, uint32_t seed);

// The plan build_plan makes from `topology` with only `algorithm`.
ir::Plan plan_for(const Topology& topology, const std::string& algorithm);

// A plan of the tree holding one schedule: `algorithm` of `collective` (planner/collective_planner.hpp)
// for `root`, serving every size.
ir::Plan single_schedule_plan(const Topology& topology, ir::Collective collective, const std::string& algorithm,
                              int32_t root);

// Bundled topologies (topologies/*.json) with exactly `learners` learners.
std::vector<std::string> bundled_topologies_with(int learners);

// --- data -------------------------------------------------------------------------------------

// Fills `count` elements with rank `rank`'s input, a function of (rank, index, salt) chosen per
// (type, op) so that integer results are exact and floating results well conditioned.
void fill_input(void* buffer, size_t count, DataType type, ReduceOp op, int rank, uint64_t salt);

struct Check {
  uint64_t mismatches = 0;
  std::string first;  // describes the first mismatch
};
// Compares elements first, first + stride, ... of an all-reduce result with the reference
// computed from every rank's input.
Check check_result(const void* result, size_t count, DataType type, ReduceOp op, int world,
                   uint64_t salt, size_t first = 0, size_t stride = 1);

// Collective: checks this rank's result and returns the mismatches summed over all ranks.
// Large integer results are checked jointly, to keep the cost O(count * world) rather than
// O(count * world^2): every rank's result must hash the same as every other's (integer
// results are exact, so equal bit for bit), and rank r checks the elements r, r + world, ...
uint64_t verify_everywhere(const void* result, size_t count, DataType type, ReduceOp op,
                           uint64_t salt, std::string* detail);

// Runs one allreduce of (count, type, op) with fresh inputs and checks it. In place or not.
// Returns the mismatches summed over all ranks (so every rank agrees); `detail` gets the
// local first mismatch.
uint64_t allreduce_and_check(Communicator& comm, size_t count, DataType type, ReduceOp op,
                             bool in_place, uint64_t salt, std::string* detail);

}  // namespace flexplan::mpitest
