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

int size_of(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return size;
}

int rank_of(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

}  // namespace

// Each rank verifies its slice of the plan (ir/job_plan.hpp); the engine then fails every rank
// if any slice failed, and refuses ranks that hold different plans or a plan for another size.
Communicator::Communicator(const std::string& plan_path, MPI_Comm comm, Options options)
    : engine_(std::make_unique<Engine>(
          [&] { return ir::load_job_plan(plan_path, size_of(comm), rank_of(comm)); }, plan_path,
          comm, std::move(options))) {}

Communicator::Communicator(ir::Plan plan, MPI_Comm comm, Options options)
    : engine_(std::make_unique<Engine>(
          [&] {
            ir::check_job_plan(plan, size_of(comm), rank_of(comm));
            return std::move(plan);
          },
          "(in memory)", comm, std::move(options))) {}

Communicator::~Communicator() = default;

int Communicator::rank() const { return engine_->rank(); }
int Communicator::size() const { return engine_->plan().world_size; }
const ir::Plan& Communicator::plan() const { return engine_->plan(); }
const std::string& Communicator::learner_name() const { return engine_->learner_name(); }
const Options& Communicator::options() const { return engine_->options(); }

void Communicator::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  iallreduce(send, recv, count, type, op).wait();
}

Request Communicator::iallreduce(const void* send, void* recv, size_t count, DataType type,
                                 ReduceOp op) {
  return Request(engine_.get(), engine_->start({send, recv, count, type, op}));
}

void Communicator::force_algorithm(const std::string& algorithm) {
  engine_->force_algorithm(algorithm);
}

void Communicator::abort(const std::string& reason) { engine_->abort(reason); }

}  // namespace flexplan
