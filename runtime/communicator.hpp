// flexplan::Communicator: all-reduce, reduce-scatter, all-gather, broadcast and reduce by
// replaying a plan's schedules over UCX, in a job launched by
// mpirun (or by another launcher, given a bootstrap::Group). MPI serves only at creation
// (worker addresses, agreement on the plan) and shutdown; data moves over UCX. docs/runtime.md describes launching, progress, tags, pipelining and errors.
//
//   flexplan::Communicator comm("plan.bin", MPI_COMM_WORLD);
//   comm.allreduce(grads, grads, n, flexplan::DataType::Float32, flexplan::ReduceOp::Avg);
//
// Progress happens inside the calls, wait and test (no thread): drive a communicator from
// one thread at a time. All ranks must issue the same operations (count, type, op, root) in the
// same order; they may overlap freely. Each collective runs the plan's schedule of that
// collective for the call's size (planned with `flexplan TOPO --collectives ...`); a call the
// plan has no schedule for throws InputError on every rank, the communicator staying usable.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "ir/plan.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/call_signature.hpp"
#include "runtime/call_stats.hpp"
#include "runtime/datatype.hpp"
#include "runtime/errors.hpp"
#include "runtime/options.hpp"
#include "runtime/sparse_allreduce.hpp"

namespace flexplan {

class Engine;
class Operation;
struct CollectiveCall;

// A non-blocking collective. Move-only; must be completed (wait, or test until true) before
// its communicator is destroyed. The buffers must stay untouched until then.
class Request {
 public:
  Request() = default;
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  ~Request();

  // Blocks until complete. Throws RuntimeError if the operation failed.
  void wait();
  // Advances every outstanding operation once; true once this one is complete. Throws
  // RuntimeError if it failed.
  bool test();

 private:
  friend class Communicator;
  Request(Engine* engine, std::shared_ptr<Operation> operation);
  Engine* engine_ = nullptr;
  std::shared_ptr<Operation> operation_;
};

class Communicator {
 public:
  // Collective over `comm`: agrees on the settings (a malformed FLEXPLAN_* value on any rank,
  // Options::errors, fails every rank), loads and verifies the plan, checks that every rank
  // holds the same plan and that its world size is the communicator's, maps ranks, connects
  // UCX. Throws the same RuntimeError on every rank when anything is wrong on any rank.
  Communicator(const std::string& plan_path, MPI_Comm comm, Options options = Options::from_env());
  // Same from a plan built in process (verified here).
  Communicator(ir::Plan plan, MPI_Comm comm, Options options = Options::from_env());
  // The same over another out-of-band channel than MPI (the PyTorch backend's store): the
  // group's ranks take the place of the MPI ranks.
  Communicator(const std::string& plan_path, std::unique_ptr<bootstrap::Group> group, Options options);
  Communicator(ir::Plan plan, std::unique_ptr<bootstrap::Group> group, Options options);
  // Collective: completes outstanding operations, then disconnects once every rank is done.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;  // plan rank
  int size() const;
  const ir::Plan& plan() const;
  const std::string& learner_name() const;  // plan.rank_names[rank()], or "" if unnamed
  const Options& options() const;
  // Whether long chunks to some peer on this host go by single copy (docs/runtime.md).
  bool single_copy() const;

  // recv = op over all ranks' send, element-wise. In place when send == recv or send is null.
  // Uses the plan's schedule for count * size_of(type) bytes. Every message carries the call's
  // signature (collective, root, type, op, count, call number; docs/runtime.md, Call checks):
  // ranks that issue different calls fail, naming both. `call` says which collective the caller
  // carries out with this all-reduce (a broadcast, an all-gather), so that it is compared too.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                 const CallInfo& call = {});
  Request iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                     const CallInfo& call = {});

  // Reduce-scatter (NCCL's and MPI_Reduce_scatter_block's): `send` holds size() blocks of
  // `recv_count` elements in rank order; `recv` gets op over every rank's block rank(). In place
  // as NCCL's: recv == send + rank() * recv_count.
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  Request ireduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  // With per-rank counts (MPI_Reduce_scatter): rank r's block has recv_counts[r] elements, the
  // blocks packed in rank order in `send`. The plan's shards may differ: each rank's shard of
  // units maps onto its block. Every rank passes the same counts.
  void reduce_scatter_v(const void* send, void* recv, std::span<const uint64_t> recv_counts, DataType type,
                        ReduceOp op);
  Request ireduce_scatter_v(const void* send, void* recv, std::span<const uint64_t> recv_counts,
                            DataType type, ReduceOp op);

  // All-gather (NCCL's and MPI_Allgather's): `recv` gets size() blocks of `send_count` elements,
  // rank r's `send` at block r. In place: send == recv + rank() * send_count, or null.
  void allgather(const void* send, void* recv, size_t send_count, DataType type);
  Request iallgather(const void* send, void* recv, size_t send_count, DataType type);
  // With per-rank counts (MPI_Allgatherv with packed displacements): rank r sends counts[r].
  void allgather_v(const void* send, void* recv, std::span<const uint64_t> counts, DataType type);
  Request iallgather_v(const void* send, void* recv, std::span<const uint64_t> counts, DataType type);

  // Broadcast (NCCL's): every rank's `recv` gets the root's `send`, count elements. `send` is
  // read at the root only; null there means in place (MPI_Bcast's one buffer).
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  Request ibroadcast(const void* send, void* recv, size_t count, DataType type, int root);

  // Reduce (NCCL's and MPI_Reduce's): the root's `recv` gets op over every rank's `send`; `recv`
  // is not touched off the root. A null `send` means in place (the input is `recv`).
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  Request ireduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);

  // Run every later operation with the plan's schedule of this algorithm (the one serving the
  // message size if several do, else its first); "" restores the plan's own choice. Must be
  // called alike on every rank. Throws RuntimeError if the plan has no such schedule.
  void force_algorithm(const std::string& algorithm);

  // Sparse all-reduce of a float32/float64 buffer in place (docs/sparse.md): reduce-scatter
  // within each machine, MSTopK keeping ceil(density * slice) elements of each learner's
  // slice, (index, value) pairs between machines, all-gather within each machine. Blocking;
  // completes outstanding operations first. With `residual`, error feedback: what a slice did
  // not send is added to it on the next call with that residual. Collective: every rank calls
  // it alike (count, type, density, iterations, residual or not).
  void sparse_allreduce(void* buffer, size_t count, DataType type, double density,
                        SparseResidual* residual = nullptr, int mstopk_iterations = 30);
  // The sparse all-reduce's steps within the machines alone (its reduce-scatter and all-gather,
  // the same transfers and sums), nothing selected or exchanged: each rank ends with the sum of
  // its machine's buffers. For timing what those steps cost when every machine runs them at
  // once, which calibrates the learner links of the sparse cost model (docs/sparse.md).
  // Collective, as sparse_allreduce.
  void sparse_machine_steps(void* buffer, size_t count, DataType type);

  // What the calls cost on this rank so far, per schedule: measured against the plan's
  // prediction (with FLEXPLAN_TOPOLOGY), per step and tree level, and the drift reports and
  // re-plans (docs/runtime.md, Following the network). format_stats() prints it. Local.
  CommStats stats() const;
  // Collective, between calls (completes outstanding operations first): every rank combines
  // its measured per-link figures with the others', plans for them in process, verifies, and
  // switches from the next call if all made the same plan; otherwise keeps the old plan and
  // says why. Needs FLEXPLAN_TOPOLOGY.
  ReplanResult replan();

  // For a process that cannot go on: fails this communicator now (outstanding operations fail,
  // later calls throw) and tells every peer, whose communicators then fail within about a
  // second naming this rank and `reason`. Not collective. The destructor does the same when it
  // runs while an exception propagates.
  void abort(const std::string& reason);

 private:
  Request start(const CollectiveCall& call);
  std::unique_ptr<Engine> engine_;
};

}  // namespace flexplan
