// Creation of a communicator, the part done out of band: which plan rank each process is, and
// the agreement that every rank loaded the same plan for this world size. The out-of-band
// channel is a Group: MPI (MpiGroup) or any other (the PyTorch backend's key-value store).
// Every function here is collective over the group, and a failure on any rank throws the same
// RuntimeError on every rank (never a hang on the ranks that were fine).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/plan.hpp"
#include "runtime/options.hpp"

namespace flexplan::bootstrap {

// This host's name (gethostname), as the runtime groups ranks into machines by it.
std::string this_host();

// This process's host name and its rank among the processes on that host.
struct HostIdentity {
  std::string host;
  int local_rank = 0;
};

// The processes of a job and the few collective exchanges creation and shutdown need. Calls
// are collective (every member, same order) except barrier_done. An implementation that
// cannot complete an exchange (a peer never comes) throws RuntimeError within its own timeout.
class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every member's bytes, indexed by group rank.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  // Default: this host's name, and the local rank counted among members with the same name.
  virtual HostIdentity host_identity();
  // A barrier in two halves, so that the caller can keep progressing UCX while it waits.
  // barrier_done is true once every member has called barrier_start (or the group failed).
  // Neither throws: they run in the communicator's destructor.
  virtual void barrier_start() = 0;
  virtual bool barrier_done() = 0;
  // The communicator ends with a peer possibly dead: release nothing that could wait on it.
  virtual void abandon() {}
  // How errors name a member ("MPI rank" 3) and how to launch a job of n members.
  virtual std::string member_noun() const { return "rank"; }
  virtual std::string launch_hint(int n) const { return fmt::format("start {} processes", n); }
};

// A group over a duplicate of an MPI communicator (freed at destruction unless abandoned).
class MpiGroup final : public Group {
 public:
  explicit MpiGroup(MPI_Comm comm);
  ~MpiGroup() override;
  int rank() const override;
  int size() const override;
  std::vector<std::string> allgather(const std::string& mine) override;
  HostIdentity host_identity() override;  // local rank from MPI_COMM_TYPE_SHARED
  void barrier_start() override;
  bool barrier_done() override;
  void abandon() override { abandoned_ = true; }
  std::string member_noun() const override { return "MPI rank"; }
  std::string launch_hint(int n) const override { return fmt::format("launch with mpirun -np {}", n); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request barrier_ = MPI_REQUEST_NULL;
  bool abandoned_ = false;
};

// The first exchange of creation, before anything can fail on one rank alone: every rank's
// Options::errors (malformed FLEXPLAN_* values, each naming its variable and value) and the
// settings that must agree but are compared nowhere later (FLEXPLAN_PEER_FAILURE: it picks
// the transports and UCX's error mode at both ends of a link). Throws the same InputError on
// every rank, naming each failing rank, if any rank has an error or the settings differ.
// (FLEXPLAN_CHUNK_BYTES and FLEXPLAN_SINGLE_COPY_MIN_BYTES are compared later: agree_on_plan,
// and single copy's setup, which alone knows whether the threshold matters.)
void agree_on_settings(Group& group, const Options& options);

// The plan rank this process plays (local; throws RuntimeError naming the unmatched name).
int32_t plan_rank_for(const ir::Plan& plan, const Options& options, int mpi_rank,
                      const HostIdentity& host);

// Local: refuses plans whose receives overflow the tag's receive index (tag.hpp; no plan that
// fits in memory does).
void check_tag_limits(const ir::Plan& plan);

// Throws the same error on every rank if any rank's `local_error` is not empty: an InputError
// if `bad_input`, else a RuntimeError. The message lists each failing rank's error under `what`
// ("loading the plan").
void raise_if_any_failed(Group& group, const std::string& local_error, const std::string& what,
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
std::vector<int32_t> agree_on_plan(Group& group, const PlanIdentity& mine);

// The plan's machines against the job's hosts (runtime/host_check.hpp), after agree_on_plan:
// gathers each rank's host and allow_host_mismatch. Returns "" when they match (or the plan
// names no learners), the comparison when they differ and every rank allows it (the caller
// warns), and otherwise throws the same InputError on every rank listing both groupings.
std::string check_hosts(Group& group, const ir::Plan& plan, const std::vector<int32_t>& plan_rank_of,
                        const std::string& host, bool allow_mismatch);

// Gathers every rank's bytes (worker addresses), re-indexed by plan rank.
std::vector<std::vector<uint8_t>> exchange_by_plan_rank(Group& group,
                                                        const std::vector<uint8_t>& mine,
                                                        const std::vector<int32_t>& plan_rank_of);

}  // namespace flexplan::bootstrap
