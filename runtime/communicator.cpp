#include "runtime/communicator.hpp"

#include "ir/job_plan.hpp"
#include "runtime/engine.hpp"

namespace flexplan {

Request::Request(Engine* engine, std::shared_ptr<Operation> operation)
    : engine_(engine), operation_(std::move(operation)) {}
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() = default;

void Request::wait() {
  if (operation_) engine_->wait(*operation_);
}

bool Request::test() { return !operation_ || engine_->test(*operation_); }

namespace {

CollectiveCall collective_call(ir::Collective collective, const void* send, void* recv, uint64_t count,
                               std::span<const uint64_t> counts, DataType type, ReduceOp op = ReduceOp::Sum,
                               int32_t root = 0) {
  CollectiveCall call;
  call.collective = collective;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.counts = counts;
  call.type = type;
  call.op = op;
  call.root = root;
  return call;
}

// Each rank verifies its slice of the plan (ir/job_plan.hpp), as the group's member of its
// size; the engine then fails every rank if any slice failed, and refuses ranks that hold
// different plans or a plan for another size. The settings are agreed first, before anything
// that could fail on one rank alone (bootstrap::agree_on_settings).
std::unique_ptr<Engine> engine_for(const std::string& plan_path, std::unique_ptr<bootstrap::Group> group,
                                   Options options) {
  bootstrap::agree_on_settings(*group, options);
  const int size = group->size();
  const int rank = group->rank();
  return std::make_unique<Engine>([&] { return ir::load_job_plan(plan_path, size, rank); },
                                  plan_path, std::move(group), std::move(options));
}

std::unique_ptr<Engine> engine_for(ir::Plan& plan, std::unique_ptr<bootstrap::Group> group,
                                   Options options) {
  bootstrap::agree_on_settings(*group, options);
  const int size = group->size();
  const int rank = group->rank();
  return std::make_unique<Engine>(
      [&] {
        ir::check_job_plan(plan, size, rank);
        const uint64_t fingerprint = ir::plan_fingerprint(plan);
        return ir::FingerprintedPlan{std::move(plan), fingerprint};
      },
      "(in memory)", std::move(group), std::move(options));
}

}  // namespace

Communicator::Communicator(const std::string& plan_path, MPI_Comm comm, Options options)
    : Communicator(plan_path, std::make_unique<bootstrap::MpiGroup>(comm), std::move(options)) {}

Communicator::Communicator(ir::Plan plan, MPI_Comm comm, Options options)
    : Communicator(std::move(plan), std::make_unique<bootstrap::MpiGroup>(comm), std::move(options)) {}

Communicator::Communicator(const std::string& plan_path, std::unique_ptr<bootstrap::Group> group,
                           Options options)
    : engine_(engine_for(plan_path, std::move(group), std::move(options))) {}

Communicator::Communicator(ir::Plan plan, std::unique_ptr<bootstrap::Group> group, Options options)
    : engine_(engine_for(plan, std::move(group), std::move(options))) {}

Communicator::~Communicator() = default;

int Communicator::rank() const { return engine_->rank(); }
int Communicator::size() const { return engine_->plan().world_size; }
const ir::Plan& Communicator::plan() const { return engine_->plan(); }
const std::string& Communicator::learner_name() const { return engine_->learner_name(); }
const Options& Communicator::options() const { return engine_->options(); }
bool Communicator::single_copy() const { return engine_->single_copy(); }

void Communicator::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                             const CallInfo& call) {
  iallreduce(send, recv, count, type, op, call).wait();
}

Request Communicator::iallreduce(const void* send, void* recv, size_t count, DataType type,
                                 ReduceOp op, const CallInfo& call) {
  CollectiveCall all = collective_call(ir::Collective::AllReduce, send, recv, count, {}, type, op);
  all.call = call;
  return start(all);
}

Request Communicator::start(const CollectiveCall& call) {
  return Request(engine_.get(), engine_->start(call));
}

void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) {
  ireduce_scatter(send, recv, recv_count, type, op).wait();
}
Request Communicator::ireduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                                      ReduceOp op) {
  return start(collective_call(ir::Collective::ReduceScatter, send, recv, recv_count, {}, type, op));
}
void Communicator::reduce_scatter_v(const void* send, void* recv, std::span<const uint64_t> recv_counts,
                                    DataType type, ReduceOp op) {
  ireduce_scatter_v(send, recv, recv_counts, type, op).wait();
}
Request Communicator::ireduce_scatter_v(const void* send, void* recv, std::span<const uint64_t> recv_counts,
                                        DataType type, ReduceOp op) {
  if (recv_counts.empty()) throw InputError("flexplan reduce_scatter_v: no per-rank counts");
  return start(collective_call(ir::Collective::ReduceScatter, send, recv, 0, recv_counts, type, op));
}

void Communicator::allgather(const void* send, void* recv, size_t send_count, DataType type) {
  iallgather(send, recv, send_count, type).wait();
}
Request Communicator::iallgather(const void* send, void* recv, size_t send_count, DataType type) {
  return start(collective_call(ir::Collective::AllGather, send, recv, send_count, {}, type));
}
void Communicator::allgather_v(const void* send, void* recv, std::span<const uint64_t> counts, DataType type) {
  iallgather_v(send, recv, counts, type).wait();
}
Request Communicator::iallgather_v(const void* send, void* recv, std::span<const uint64_t> counts,
                                   DataType type) {
  if (counts.empty()) throw InputError("flexplan allgather_v: no per-rank counts");
  return start(collective_call(ir::Collective::AllGather, send, recv, 0, counts, type));
}

void Communicator::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  ibroadcast(send, recv, count, type, root).wait();
}
Request Communicator::ibroadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  return start(collective_call(ir::Collective::Broadcast, send, recv, count, {}, type, ReduceOp::Sum, root));
}

void Communicator::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) {
  ireduce(send, recv, count, type, op, root).wait();
}
Request Communicator::ireduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                              int root) {
  return start(collective_call(ir::Collective::Reduce, send, recv, count, {}, type, op, root));
}

void Communicator::sparse_allreduce(void* buffer, size_t count, DataType type, double density,
                                    SparseResidual* residual, int mstopk_iterations) {
  engine_->sparse_allreduce(SparseArgs{buffer, count, type, density, residual, mstopk_iterations});
}

void Communicator::sparse_machine_steps(void* buffer, size_t count, DataType type) {
  SparseArgs args{buffer, count, type, 1.0};
  args.machine_steps_only = true;
  engine_->sparse_allreduce(args);
}

void Communicator::force_algorithm(const std::string& algorithm) {
  engine_->force_algorithm(algorithm);
}

CommStats Communicator::stats() const { return engine_->stats(); }
ReplanResult Communicator::replan() { return engine_->replan(); }

void Communicator::abort(const std::string& reason) { engine_->abort(reason); }

}  // namespace flexplan
