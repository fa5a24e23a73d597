// flexplan::gpu::DeviceCommunicator: all-reduce, reduce-scatter, all-gather, broadcast and reduce
// on device buffers by replaying a plan's schedules with NCCL
// reduce/broadcast calls on sub-communicators (codegen/nccl_lowering.hpp), with stream
// semantics: a call enqueues its work behind what the caller's stream already holds and
// returns; later work on that stream sees the result; the host never waits unless it asks (a
// request's wait, or the stream's synchronization). docs/runtime.md, "Device buffers".
//
//   flexplan::gpu::DeviceCommunicator comm("plan.bin", MPI_COMM_WORLD);
//   comm.allreduce(d_grads, d_grads, n, flexplan::DataType::Float32, flexplan::ReduceOp::Avg, stream);
//
// Every operation runs on one internal stream in issue order, so operations complete in the
// order they were issued, the same on every rank. Drive a communicator from one thread.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codegen/nccl_lowering.hpp"
#include "ir/plan.hpp"
#include "runtime/datatype.hpp"
#include "runtime/errors.hpp"
#include "runtime/gpu/device_api.hpp"

namespace flexplan::gpu {

struct DeviceOptions {
  // The CUDA device of this process; -1: its local rank on the host modulo the device count.
  // FLEXPLAN_DEVICE.
  int device = -1;
  // The cluster's topology hash (`flexplan topo show` prints it); when set, a plan made for
  // another topology is refused. FLEXPLAN_TOPOLOGY_HASH.
  std::string topology_hash;
  int min_nccl_version = 21800;
  // Prove at load that every rank issues its NCCL calls in one global order
  // (codegen::check_nccl_issue_order); it lowers every rank's program, so only up to this
  // world size. FLEXPLAN_CHECK_ORDER_UP_TO.
  int check_order_up_to = 64;
  // Malformed FLEXPLAN_* values, each naming its variable and value: creation fails on every
  // rank when any rank has one (a throw here, on one rank, would leave the others waiting).
  std::vector<std::string> errors;
  static DeviceOptions from_env();  // never throws: malformed values go to `errors`
};

// The device this process uses by the rule of DeviceOptions::device: `requested` when >= 0,
// else its local rank on the host modulo `devices` (at least 1). Collective over `comm`.
int default_device(MPI_Comm comm, int devices, int requested);

struct DeviceOperation;

// An enqueued collective. test() and wait() throw RuntimeError if it failed (naming the NCCL or
// CUDA error and, under the emulation, the calls that deadlocked).
class DeviceRequest {
 public:
  DeviceRequest() = default;
  bool test();      // done? never blocks
  void wait();      // blocks the host until done
  cudaEvent_t event() const;  // recorded after the operation, for cudaStreamWaitEvent
  uint64_t sequence() const;  // 0, 1, 2, ... in issue order, the same on every rank

 private:
  friend class DeviceCommunicator;
  explicit DeviceRequest(std::shared_ptr<DeviceOperation> operation) : operation_(std::move(operation)) {}
  std::shared_ptr<DeviceOperation> operation_;
};

class DeviceCommunicator {
 public:
  // Collective over `comm` (plan rank = rank in `comm`): loads and verifies the plan, picks the
  // device, checks NCCL version, world size, topology and placement on every rank
  // (load_checks.hpp; any mismatch throws the same InputError everywhere), creates the parent
  // NCCL communicator and splits the plan's sub-communicators once.
  DeviceCommunicator(const std::string& plan_path, MPI_Comm comm, DeviceOptions options = DeviceOptions::from_env());
  DeviceCommunicator(ir::Plan plan, MPI_Comm comm, DeviceOptions options = DeviceOptions::from_env());
  // Waits for the outstanding operations, then destroys the communicators.
  ~DeviceCommunicator();
  DeviceCommunicator(const DeviceCommunicator&) = delete;
  DeviceCommunicator& operator=(const DeviceCommunicator&) = delete;

  // recv = op over all ranks' send; in place when send == recv or send is null. Enqueued on
  // `stream` (0: the default stream); returns at once.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, cudaStream_t stream);
  DeviceRequest iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                           cudaStream_t stream);

  // The other collectives, as NCCL's calls and flexplan::Communicator's (runtime/communicator.hpp):
  // each runs the plan's schedule of that collective (and root) for the whole buffer's size and
  // throws InputError, before enqueuing anything, where the plan has none or an argument is bad.
  // Reduce-scatter: `send` holds size() blocks of recv_count; recv gets op over block rank().
  // All-gather: recv gets size() blocks of send_count, rank r's send at block r (in place:
  // send == recv + rank() * send_count). Broadcast: recv gets the root's send (read at the root
  // only; null there: in place). Reduce: the root's recv gets op over every send; recv is not
  // touched off the root. The v forms take one count per rank, blocks packed in rank order.
  DeviceRequest ireduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                                cudaStream_t stream);
  DeviceRequest ireduce_scatter_v(const void* send, void* recv, std::span<const uint64_t> recv_counts,
                                  DataType type, ReduceOp op, cudaStream_t stream);
  DeviceRequest iallgather(const void* send, void* recv, size_t send_count, DataType type, cudaStream_t stream);
  DeviceRequest iallgather_v(const void* send, void* recv, std::span<const uint64_t> counts, DataType type,
                             cudaStream_t stream);
  DeviceRequest ibroadcast(const void* send, void* recv, size_t count, DataType type, int root,
                           cudaStream_t stream);
  DeviceRequest ireduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
                        cudaStream_t stream);

  // Later operations use the plan's schedule of this algorithm ("" restores the plan's choice).
  // Alike on every rank. Throws RuntimeError if the plan has none.
  void force_algorithm(const std::string& algorithm);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  const ir::Plan& plan() const { return plan_; }
  // The plan's sub-communicators, the split calls that made them, those this rank belongs to
  // (plus the parent), and the seconds ncclCommInitRank + the splits took here.
  size_t plan_communicators() const { return table_.groups.size(); }
  uint32_t split_calls() const { return table_.splits; }
  size_t local_communicators() const;
  double init_seconds() const { return init_seconds_; }
  int nccl_version() const { return nccl_version_; }

 private:
  void create(MPI_Comm comm, std::string load_error);
  const codegen::NcclRankProgram& program_for(size_t schedule_index);
  struct Call {
    ir::Collective collective = ir::Collective::AllReduce;
    const void* send = nullptr;
    void* recv = nullptr;
    uint64_t count = 0;                  // per rank, as Communicator's CollectiveCall
    std::span<const uint64_t> counts;    // the v forms
    DataType type = DataType::Float32;
    ReduceOp op = ReduceOp::Sum;
    int32_t root = 0;
  };
  std::shared_ptr<DeviceOperation> enqueue(const Call& call, cudaStream_t stream);

  ir::Plan plan_;
  DeviceOptions options_;
  int rank_ = 0, size_ = 0, device_ = -1, nccl_version_ = 0;
  codegen::NcclCommTable table_;
  ncclComm_t parent_ = nullptr;
  std::vector<ncclComm_t> comms_;  // by table group; null where this rank is not a member
  std::vector<std::unique_ptr<codegen::NcclRankProgram>> programs_;  // by schedule, lowered on first use
  cudaStream_t stream_ = nullptr;  // every operation runs here, in issue order
  std::string forced_algorithm_;
  uint64_t next_sequence_ = 0;
  double init_seconds_ = 0;
};

}  // namespace flexplan::gpu
