#include "runtime/communicator.hpp"

#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"
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

Communicator::Communicator(const std::string& plan_path, MPI_Comm comm, Options options)
    : Communicator(plan_path, std::make_unique<bootstrap::MpiGroup>(comm), std::move(options)) {}

Communicator::Communicator(ir::Plan plan, MPI_Comm comm, Options options)
    : Communicator(std::move(plan), std::make_unique<bootstrap::MpiGroup>(comm), std::move(options)) {}

Communicator::Communicator(const std::string& plan_path, std::unique_ptr<bootstrap::Group> group,
                           Options options)
    : engine_(std::make_unique<Engine>([&] { return ir::read_plan_file(plan_path); }, plan_path,
                                       std::move(group), std::move(options))) {}

Communicator::Communicator(ir::Plan plan, std::unique_ptr<bootstrap::Group> group, Options options)
    : engine_(std::make_unique<Engine>(
          [&] {
            ir::verify_plan(plan);
            return std::move(plan);
          },
          "(in memory)", std::move(group), std::move(options))) {}

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
