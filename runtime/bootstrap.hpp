// Creation of a communicator, the part done over MPI: which plan rank each process is, and the
// agreement that every rank loaded the same plan for this world size. Every function here is
// collective over `comm`, and a failure on any rank throws the same RuntimeError on every rank
// (never a hang on the ranks that were fine).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "runtime/options.hpp"

namespace flexplan::bootstrap {

// This process's host name and its rank among the processes on that host.
struct HostIdentity {
  std::string host;
  int local_rank = 0;
};
HostIdentity host_identity(MPI_Comm comm);

// The plan rank this process plays (local; throws RuntimeError naming the unmatched name).
int32_t plan_rank_for(const ir::Plan& plan, const Options& options, int mpi_rank,
                      const HostIdentity& host);

// Local: refuses plans whose receives overflow the tag's receive index (tag.hpp; no plan that
// fits in memory does).
void check_tag_limits(const ir::Plan& plan);

// Throws the same error on every rank if any rank's `local_error` is not empty: an InputError
// if `bad_input`, else a RuntimeError. The message lists each failing rank's error under `what`
// ("loading the plan").
void raise_if_any_failed(MPI_Comm comm, const std::string& local_error, const std::string& what,
                         bool bad_input = false);

// What each rank loaded; compared across ranks.
struct PlanIdentity {
  int32_t world_size = 0;
  std::string topology_hash;
  uint64_t fingerprint = 0;
  uint64_t chunk_bytes = 0;
  int32_t plan_rank = 0;
};
// Checks that all ranks hold the same plan, that its world size is the job's, that the chunk
// size agrees and that the plan ranks form a permutation (InputError if not). Returns plan_rank
// by MPI rank.
std::vector<int32_t> agree_on_plan(MPI_Comm comm, const PlanIdentity& mine);

// Gathers every rank's bytes (worker addresses), re-indexed by plan rank.
std::vector<std::vector<uint8_t>> exchange_by_plan_rank(MPI_Comm comm,
                                                        const std::vector<uint8_t>& mine,
                                                        const std::vector<int32_t>& plan_rank_of);

}  // namespace flexplan::bootstrap
