// The executor of one collective call over the transport seam (operation.hpp says how).
#include "runtime/operation.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "codegen/chunking.hpp"
#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "runtime/tag.hpp"

namespace flexplan {

Operation::Operation(const ExecContext& context, uint64_t sequence, const ir::Schedule& schedule,
                     const codegen::RankProgram& program, const OperationArgs& args)
    : context_(context) {
  ack_receive_.owner = this;
  ack_receive_.notify = &Operation::on_completion;
  restart(sequence, schedule, program, args);
}

bool Operation::reusable() const {
  return done_ && error_.empty() && ready_.empty() && ack_receive_.request == nullptr &&
         acks_awaited_ == 0 && ack_sends_in_flight_ == 0 && sends_in_flight_ == 0 &&
         sends_on_host_in_flight_ == 0;
}

void Operation::restart(uint64_t sequence, const ir::Schedule& schedule, const codegen::RankProgram& program,
                        const OperationArgs& args) {
  sequence_ = sequence;
  schedule_ = &schedule;
  program_ = &program;
  if (context_.time_steps) {
    started_ = step_began_ = std::chrono::steady_clock::now();
    step_seconds_.assign(program.steps.size(), 0.0);
    if (context_.time_transfers) peer_waits_.reset(static_cast<size_t>(context_.plan->world_size));
  }
  args_ = args;
  args_.shard_counts = {};  // (the caller's storage: read here only)
  args_.result_end = std::min<uint64_t>(args_.result_end, args_.count);
  args_.result_begin = std::min(args_.result_begin, args_.result_end);
  signature_ = make_signature(args.call, args.count, args.type, args.op, sequence);
  element_size_ = size_of(args.type);
  // A zero-count operation runs the one-element operation's tasks with empty messages, so that
  // it too completes only once every rank has issued it (tag.hpp: the sequence argument).
  const uint64_t units = ir::expanded_units(schedule);  // the program's ranges are the whole schedule's
  if (args.count == 0 || args.shard_counts.empty()) {
    map_.set_uniform(units, std::max<uint64_t>(args.count, 1));
  } else if (const std::string why = map_.set_sharded(schedule, context_.plan->world_size, args.shard_counts);
             !why.empty()) {
    throw std::invalid_argument(why);  // (the engine checked the same before using a sequence number)
  }
  if (work_) context_.pool->release(std::move(work_));
  if (args.recv == nullptr && args.count > 0) work_ = context_.pool->acquire(args.count * element_size_);
  input_ = static_cast<const std::byte*>(args.send);
  buffer_ = args.recv == nullptr ? work_.get() : static_cast<std::byte*>(args.recv);
  if (input_ == nullptr) input_ = buffer_;
  runs_ahead_ = 0;
  window_.resize(std::max(1u, context_.steps_in_flight));
  for (StepRuns& step : window_) retire_runs(step.runs);
  step_lo_ = step_hi_ = 0;
  startable_.clear();
  completed_.clear();
  startable_head_ = completed_head_ = 0;
  ready_.clear();
  sends_in_flight_ = 0;
  sends_on_host_in_flight_ = 0;
  awaiting_ack_.clear();  // every cookie was free (nothing awaited)
  free_cookies_.clear();
  acks_awaited_ = 0;
  ack_sends_in_flight_ = 0;  // every ack transfer is on free_ack_sends_ then
  steps_done_ = false;
  done_ = false;
  error_.clear();
  // Out of place, the result forms in the receive buffer while the input is read where it
  // is: the send buffer is never written, and never copied whole.
  try {
    pump();
  } catch (const std::exception& e) {  // out of memory: no request may outlive its transfer
    set_error(fmt::format("{}: starting failed: {}", describe(), e.what()));
    release_requests();
    throw;
  }
}

void PeerWaits::reset(size_t world) {
  send_seconds.assign(world, 0.0);
  recv_seconds.assign(world, 0.0);
  send_bytes.assign(world, 0);
  recv_bytes.assign(world, 0);
  sends.assign(world, 0);
  recvs.assign(world, 0);
}

void Operation::note_wait(bool send, int32_t peer, size_t bytes, double seconds) {
  const auto p = static_cast<size_t>(peer);
  if (p >= peer_waits_.sends.size()) return;
  if (send) {
    peer_waits_.send_seconds[p] += seconds;
    peer_waits_.send_bytes[p] += bytes;
    ++peer_waits_.sends[p];
  } else {
    peer_waits_.recv_seconds[p] += seconds;
    peer_waits_.recv_bytes[p] += bytes;
    ++peer_waits_.recvs[p];
  }
}

void Operation::copy_input(const std::vector<codegen::UnitRange>& ranges, uint64_t lo, uint64_t hi) {
  if (input_ == buffer_ || args_.count == 0) return;
  for (const codegen::UnitRange& range : ranges) {
    const uint64_t begin = std::max(map_(range.begin), lo);
    const uint64_t end = std::min(map_(range.end), hi);
    if (begin >= end) continue;
    std::memcpy(buffer_ + begin * element_size_, input_ + begin * element_size_,
                (end - begin) * element_size_);
  }
}

Operation::~Operation() { release_requests(); }

std::string Operation::describe() const {
  // "reduce (root 2) #7 (chain, 1000 x float32 sum)"; a collective carried out by a schedule of
  // another says so: "broadcast (root 0) #7 as allreduce (...)".
  std::string called(to_string(args_.call.collective));
  if (args_.call.root >= 0) called += fmt::format(" (root {})", args_.call.root);
  called += fmt::format(" #{}", sequence_);
  if (ir::to_string(schedule_->collective) != to_string(args_.call.collective))
    called += fmt::format(" as {}", ir::to_string(schedule_->collective));
  const bool reduces = ir::combines(schedule_->collective);
  return fmt::format("{} ({}, {} x {}{}{})", called, schedule_->algorithm, args_.count, to_string(args_.type),
                     reduces ? " " : "", reduces ? to_string(args_.op) : std::string_view{});
}

std::string Operation::peer(int32_t rank) const {
  const auto& names = context_.plan->rank_names;
  if (rank >= 0 && static_cast<size_t>(rank) < names.size()) {
    return fmt::format("rank {} ({})", rank, names[static_cast<size_t>(rank)]);
  }
  return fmt::format("rank {}", rank);
}

std::string Operation::where(const TaskRun& run) const {
  // Program steps and op indices are the whole schedule's; a compact one finds them in its base.
  const auto& step = schedule_->steps[ir::expanded_step_label(*schedule_, run.step)];
  const auto [op, offset] = ir::expanded_op(*schedule_, run.step, run.task->op_index);
  return fmt::format("step {} ({}, level {}), op {} ({} of units [{}, {}) to root {})", run.step,
                     ir::to_string(step.phase), step.level, run.task->op_index,
                     ir::to_string(op->kind), op->begin + offset, op->end + offset, op->root);
}

size_t Operation::chunk_bytes(const TaskRun& run, size_t chunk) const {
  const size_t first = chunk * run.chunk_elements;
  return std::min(run.chunk_elements, run.elements - first) * element_size_;
}

uint64_t Operation::tag_of(const codegen::Task& task, const codegen::Link& link, size_t chunk) const {
  // A star reduce's sources take the chunk field's high bits: each has max_chunks chunks.
  return tag::make(sequence_, link.message, link.source * task.max_chunks + chunk);
}

void Operation::set_error(const std::string& message) {
  if (error_.empty()) error_ = message;
}

// --- steps -----------------------------------------------------------------------------------

bool Operation::pump() {
  bool moved = false;
  while (!failed()) {
    if (completed_head_ == completed_.size()) {
      completed_.clear();
      completed_head_ = 0;
    }
    if (startable_head_ == startable_.size()) {
      startable_.clear();
      startable_head_ = 0;
    }
    if (completed_head_ < completed_.size()) {
      run_complete(*completed_[completed_head_++]);
    } else if (startable_head_ < startable_.size()) {
      start_run(*startable_[startable_head_++]);
    } else if (step_lo_ < step_hi_ && window_at(step_lo_).incomplete == 0) {
      retire_step();
    } else if (step_hi_ < program_->steps.size() && step_hi_ - step_lo_ < window_.size()) {
      enter_step(step_hi_++);
    } else {
      break;
    }
    moved = true;
  }
  if (!failed() && !steps_done_ && step_lo_ == program_->steps.size()) {
    finish_steps();
    moved = true;
  }
  return moved;
}

void Operation::enter_step(size_t step) {
  const codegen::StepProgram& program = program_->steps[step];
  // The parts of this step's reads that no earlier step wrote hold the input: no task in
  // flight writes them, and one that reads them reads the same values.
  copy_input(program.copy_in, 0, args_.count);
  StepRuns& entry = window_at(step);
  entry.step = step;
  entry.incomplete = 0;
  entry.tasks = false;
  // Every run of the step exists before any starts: transfers point into this vector.
  entry.runs.reserve(program.tasks.size());
  for (const codegen::Task& task : program.tasks) {
    // A spare run keeps its slots' storage; every field is set anew.
    TaskRun& run = entry.runs.emplace_back();
    if (!spare_runs_.empty()) {
      run = std::move(spare_runs_.back());
      spare_runs_.pop_back();
    }
    run.task = &task;
    run.step = step;
    run.stage = {};
    run.lo = run.hi = run.chunks = 0;
    const uint64_t begin = map_(task.unit_begin);
    const uint64_t end = map_(task.unit_end);
    if (begin == end) {  // fewer elements than units: every rank skips it alike
      run.state = RunState::Finished;
      continue;
    }
    run.first_element = begin;
    run.elements = args_.count == 0 ? 0 : end - begin;
    run.state = RunState::Waiting;
    run.waiting = 0;
    for (const codegen::TaskRef& before : task.after) {
      if (before.step >= step_lo_ && window_at(before.step).runs[before.task].state != RunState::Finished)
        ++run.waiting;
    }
    ++entry.incomplete;
    entry.tasks = true;
    if (run.waiting == 0) startable_.push_back(&run);
  }
}

void Operation::start_run(TaskRun& run) {
  const codegen::Task& task = *run.task;
  run.state = RunState::Running;
  if (run.step > step_lo_) ++runs_ahead_;
  if (run.elements == 0) {  // one empty message
    run.chunk_elements = 0;
    run.chunks = 1;
  } else {
    // The one chunking rule, which the cost model prices too.
    const auto chunking = codegen::chunk_range(run.elements, element_size_, context_.chunk_bytes, task.max_chunks);
    run.chunk_elements = chunking.chunk_elements;
    run.chunks = chunking.chunks;
  }
  run.own = (task.own_from_send ? input_ : buffer_) + run.first_element * element_size_;
  if (task.stage_writes) {
    run.stage = context_.pool->acquire(run.elements * element_size_);
    run.dest = run.stage.get();
  } else {
    run.dest = buffer_ + run.first_element * element_size_;
  }
  run.lo = run.hi = 0;
  run.slots.resize(std::min<size_t>(context_.window, run.chunks));
  const size_t transfers = task.sources.size() + task.destinations.size();
  for (uint32_t s = 0; s < run.slots.size(); ++s) {
    Slot& slot = run.slots[s];
    slot.chunk = 0;
    slot.state = ChunkState::Idle;
    slot.pending = 0;
    slot.transfers.resize(transfers);
    // Only where a chunk (the first is the longest) is long enough to go by single copy.
    if (context_.transport->single_copy_on() && run.chunks > 0 &&
        chunk_bytes(run, 0) >= context_.transport->single_copy_min_bytes())
      slot.descriptors = context_.pool->acquire(transfers * sizeof(single_copy::Descriptor));
    if (context_.check_calls && slot.frames.capacity < transfers * sizeof(Frame)) {
      if (slot.frames) context_.pool->release(std::move(slot.frames));
      slot.frames = context_.pool->acquire(transfers * sizeof(Frame));
    }
    slot.scratch.clear();  // (its buffers were released with the slot's last chunk)
    if (task.reduce) slot.scratch.resize(task.sources.size());
    slot.deferred.assign(task.reduce ? task.sources.size() : 0, 0);
    for (uint32_t t = 0; t < transfers; ++t) {
      Transfer& transfer = slot.transfers[t];
      transfer.request = nullptr;
      transfer.status = {};
      transfer.length = 0;
      transfer.tag = 0;
      transfer.awaiting_ack = false;
      transfer.owner = this;
      transfer.run = &run;
      transfer.ack_send = false;
      transfer.slot = s;
      transfer.index = t;
      transfer.notify = &Operation::on_completion;
    }
  }
  // Sends that complete at once may complete the run: pump() takes it from completed_.
  slide_window(run);
}

void Operation::run_complete(TaskRun& run) {
  for (Slot& slot : run.slots)
    if (slot.descriptors) context_.pool->release(std::move(slot.descriptors));
  run.state = RunState::Complete;
  StepRuns& step = window_at(run.step);
  if (!run.task->stage_writes) finish_run(run);
  if (--step.incomplete == 0) step_complete(step);
}

void Operation::step_complete(StepRuns& step) {
  // Every op of the step has read its ranges: staged results may land.
  for (TaskRun& run : step.runs) {
    if (run.state != RunState::Complete) continue;
    if (run.stage) {
      if (run.elements > 0) {
        std::memcpy(buffer_ + run.first_element * element_size_, run.stage.get(), run.elements * element_size_);
      }
      context_.pool->release(std::move(run.stage));
    }
    finish_run(run);
  }
}

void Operation::finish_run(TaskRun& run) {
  run.state = RunState::Finished;
  for (const codegen::TaskRef& later : run.task->wakes) {
    if (later.step >= step_hi_) continue;  // not entered yet: it counts what is finished then
    TaskRun& waiter = window_at(later.step).runs[later.task];
    if (waiter.state == RunState::Waiting && --waiter.waiting == 0) startable_.push_back(&waiter);
  }
}

void Operation::retire_step() {
  StepRuns& step = window_at(step_lo_);
  if (context_.time_steps && step.tasks) {
    // One clock read a step: a step begins where the one before ended on this rank (with steps
    // overlapping, where the one before was retired: the times still add up to the call's).
    const auto now = std::chrono::steady_clock::now();
    step_seconds_[step_lo_] = std::chrono::duration<double>(now - step_began_).count();
    step_began_ = now;
  }
  retire_runs(step.runs);
  ++step_lo_;
}

void Operation::finish_steps() {
  // All steps done: ranges of the result no step wrote hold this rank's input (one rank
  // alone), and avg is the sum over the world.
  copy_input(program_->copy_at_end, args_.result_begin, args_.result_end);
  const uint64_t result = args_.result_end - args_.result_begin;
  std::byte* const result_data = buffer_ + args_.result_begin * element_size_;
  if (args_.op == ReduceOp::Avg && result > 0 && ir::combines(schedule_->collective)) {
    const std::string why = context_.arithmetic->divide(result_data, result, args_.type,
                                                        static_cast<uint64_t>(context_.plan->world_size));
    if (!why.empty()) {
      set_error(fmt::format("{}: dividing the sum for avg failed: {}", describe(), why));
      return;
    }
  }
  if (args_.deliver != nullptr && result > 0) std::memcpy(args_.deliver, result_data, result * element_size_);
  // Every task finished, sends included: no peer reads the working memory any more.
  if (work_) context_.pool->release(std::move(work_));
  steps_done_ = true;
  done_ = ack_sends_in_flight_ == 0;
}

void Operation::retire_runs(std::vector<TaskRun>& runs) {
  // In reverse, so that the next step's first task takes the first run back. A step of more
  // tasks than that is large anyway: its storage is not kept for the communicator's lifetime.
  constexpr size_t kMaxSpareRuns = 1024;
  for (auto it = runs.rbegin(); it != runs.rend() && spare_runs_.size() < kMaxSpareRuns; ++it)
    spare_runs_.push_back(std::move(*it));
  runs.clear();
}

bool Operation::advance() {
  if (done_ || failed()) return false;
  bool moved = false;
  while (true) {
    // Handling a completion can queue more (a receive whose message was already there).
    for (size_t i = 0; i < ready_.size() && !failed(); ++i) {
      handle_completion(*ready_[i]);
      moved = true;
    }
    ready_.clear();
    if (failed()) {
      release_requests();
      return true;
    }
    if (steps_done_) return moved;  // acks still leaving; done_ is set when the last has
    // Runs that completed, runs that may start now, steps to retire and enter; their
    // transfers may have completed at once (queued on ready_): go round again.
    if (!pump()) return moved;
    moved = true;
    if (done_ || failed()) {
      if (failed()) release_requests();
      return true;
    }
  }
}

// --- chunks ----------------------------------------------------------------------------------

void Operation::on_completion(Transport::Completion* completion, TransportStatus status, size_t length,
                              uint64_t tag) {
  auto* transfer = static_cast<Transfer*>(completion);
  transfer->status = status;
  transfer->length = length;
  transfer->tag = tag;
  transfer->owner->ready_.push_back(transfer);
}

void Operation::handle_completion(Transfer& transfer) {
  if (transfer.request == nullptr) return;  // released meanwhile (a failure)
  if (&transfer == &ack_receive_) {
    on_ack();
    return;
  }
  if (transfer.ack_send) {
    on_ack_sent(transfer);
    return;
  }
  TaskRun& run = *transfer.run;
  Slot& slot = run.slots[transfer.slot];
  context_.transport->release(transfer.request);
  transfer.request = nullptr;
  const size_t sources = run.task->sources.size();
  if (context_.time_transfers && transfer.status.ok()) {
    const bool send = transfer.index >= sources;
    const int32_t peer_rank =
        send ? run.task->destinations[transfer.index - sources].rank : run.task->sources[transfer.index].rank;
    note_wait(send, peer_rank, chunk_bytes(run, slot.chunk),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - transfer.posted).count());
  }
  if (transfer.index >= sources) {
    const int32_t to = run.task->destinations[transfer.index - sources].rank;
    --sends_in_flight_;
    if (on_host(to)) --sends_on_host_in_flight_;
    if (!transfer.status.ok()) {
      set_error(fmt::format("{}: {}: sending chunk {} to {} failed: {}", describe(), where(run), slot.chunk,
                            peer(to), transfer.status.text));
      return;
    }
    if (--slot.pending == 0) finish_chunk(slot);
  } else {
    complete_receive(run, slot, transfer.index, transfer.status, transfer.length);
  }
  if (!failed()) slide_window(run);
}

void Operation::slide_window(TaskRun& run) {
  const size_t window = run.slots.size();
  const bool was_complete = run.complete();
  bool slid = true;
  while (slid && !failed()) {
    slid = false;
    while (run.lo < run.hi && run.slots[run.lo % window].state == ChunkState::Done) {
      run.slots[run.lo % window].state = ChunkState::Idle;
      ++run.lo;
      slid = true;
    }
    while (!failed() && run.hi < run.chunks && run.hi - run.lo < window) {
      start_chunk(run, run.hi++);
      slid = true;
    }
  }
  if (!was_complete && run.complete()) completed_.push_back(&run);
}

void Operation::start_chunk(TaskRun& run, size_t chunk) {
  const codegen::Task& task = *run.task;
  Slot& slot = run.slots[chunk % run.slots.size()];
  slot.chunk = chunk;
  const size_t offset = chunk * run.chunk_elements * element_size_;
  if (!task.receives()) {
    post_sends(run, slot, run.own + offset);
    return;
  }
  slot.state = ChunkState::Receiving;
  slot.pending = task.sources.size();
  const size_t bytes = chunk_bytes(run, chunk);
  const auto posted = context_.time_transfers ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (uint32_t i = 0; i < task.sources.size() && !failed(); ++i) {
    // This chunk's bytes, not a full chunk's: a step of many one-element ops would otherwise
    // hold a full chunk per op and source in flight, more than the pool keeps idle, and
    // allocate and free them op after op (70,000 MiB for Limits.PlansBeyondTheOldTagFieldsRun).
    // (None where the data is read in parts at the fold, unless it holds the running result.)
    if (task.reduce && (!fused_read(task, task.sources[i].rank, bytes) || (i == 0 && needs_partial(task))))
      slot.scratch[i] = context_.pool->acquire(bytes);
    void* target = receive_target(run, slot, i);
    size_t length = bytes;
    if (single_copy(task.sources[i].rank, bytes)) {  // the descriptor comes; the data is read
      target = descriptor_at(slot, i);
      length = sizeof(single_copy::Descriptor);
    }
    Transfer& transfer = slot.transfers[i];
    transfer.posted = posted;
    Transport::Request request = nullptr;
    TransportStatus status;
    if (context_.check_calls) {
      // The signature first, then the data where it belongs, then the sink for whatever a
      // peer of another count sends beyond it.
      Frame& frame = frame_at(slot, i);
      size_t pieces = 0;
      frame.iov[pieces++] = {&frame.signature, sizeof(CallSignature)};
      if (length > 0) frame.iov[pieces++] = {target, length};
      frame.iov[pieces++] = {context_.sink, context_.sink_bytes};
      status = context_.transport->recv(frame.iov, pieces, tag_of(task, task.sources[i], chunk), ~uint64_t{0},
                                        &transfer, &request);
    } else {
      status = context_.transport->recv(target, length, tag_of(task, task.sources[i], chunk), &transfer, &request);
    }
    if (!status.ok()) {
      complete_receive(run, slot, i, status, 0);
      continue;
    }
    transfer.request = request;  // its completion may already be queued on ready_
  }
}

void Operation::post_sends(TaskRun& run, Slot& slot, const std::byte* data) {
  const codegen::Task& task = *run.task;
  const size_t bytes = chunk_bytes(run, slot.chunk);
  slot.state = ChunkState::Sending;
  slot.pending = task.destinations.size();
  const auto posted = context_.time_transfers ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (size_t j = 0; j < task.destinations.size() && !failed(); ++j) {
    const codegen::Link& to = task.destinations[j];
    if (single_copy(to.rank, bytes)) {
      send_descriptor(run, slot, j, data, bytes);
      continue;
    }
    Transfer& transfer = slot.transfers[task.sources.size() + j];
    transfer.posted = posted;
    Transport::Request request = nullptr;
    const TransportStatus status =
        context_.check_calls
            ? send_framed(slot, task.sources.size() + j, to.rank, data, bytes, tag_of(task, to, slot.chunk), &transfer,
                          &request)
            : context_.transport->send(to.rank, data, bytes, tag_of(task, to, slot.chunk), &transfer, &request);
    if (!status.ok()) {
      set_error(fmt::format("{}: {}: sending chunk {} to {} failed: {}", describe(), where(run), slot.chunk,
                            peer(to.rank), status.text));
      return;
    }
    if (request == nullptr) {  // completed at once
      if (context_.time_transfers) note_wait(true, to.rank, bytes, 0.0);
      --slot.pending;
      continue;
    }
    transfer.request = request;
    ++sends_in_flight_;
    if (on_host(to.rank)) ++sends_on_host_in_flight_;
  }
  if (slot.pending == 0) finish_chunk(slot);
}

void Operation::finish_chunk(Slot& slot) {
  for (ScratchPool::Buffer& buffer : slot.scratch)
    if (buffer) context_.pool->release(std::move(buffer));
  slot.state = ChunkState::Done;
}

bool Operation::on_host(int32_t rank) const {
  return (*context_.same_host)[static_cast<size_t>(rank)];
}

void Operation::complete_receive(TaskRun& run, Slot& slot, uint32_t source, TransportStatus status,
                                 size_t length) {
  const size_t expected = chunk_bytes(run, slot.chunk);
  const int32_t from = run.task->sources[source].rank;
  if (!status.ok()) {
    set_error(fmt::format("{}: {}: receiving chunk {} ({} bytes) from {} failed: {}{}", describe(),
                          where(run), slot.chunk, expected, peer(from), status.text,
                          status.code == TransportStatus::Truncated
                              ? " (the peer sent more: do all ranks pass the same count, type "
                                "and chunk size?)"
                              : ""));
    return;
  }
  if (context_.check_calls && !check_signature(run, slot, source, &length)) return;
  const bool by_descriptor = single_copy(from, expected);
  uint64_t single_copy_cookie = 0;
  if (by_descriptor) {
    // The seam checks the descriptor and reads the chunk straight out of the sender, or, where
    // a reduce folds it in parts, leaves the reads to the fold (combine_fused).
    const bool fused = fused_read(*run.task, from, expected);
    const Transport::SingleCopyRead read =
        fused ? context_.transport->single_copy_check(descriptor_at(slot, source), length, expected)
              : context_.transport->single_copy_read(from, descriptor_at(slot, source), length, expected,
                                                     receive_target(run, slot, source));
    if (fused && read.code == Transport::SingleCopyRead::Ok) {
      slot.deferred[source] = 1;  // acknowledged once read
      if (--slot.pending == 0) on_received(run, slot);
      return;
    }
    if (read.code == Transport::SingleCopyRead::NotDescriptor) {
      set_error(fmt::format("{}: {}: chunk {} from {} is not the single-copy descriptor expected ({} "
                            "bytes; do all ranks pass the same count and type?)",
                            describe(), where(run), slot.chunk, peer(from), length));
      return;
    }
    if (read.code == Transport::SingleCopyRead::ReadFailed) {
      set_error(fmt::format("{}: {}: reading chunk {} ({} bytes) by single copy from {} failed: {}",
                            describe(), where(run), slot.chunk, read.got.bytes, peer(from), read.why));
      return;
    }
    length = read.got.bytes;  // WrongLength: named below, as any other length
    single_copy_cookie = read.got.cookie;
  } else if (context_.transport->looks_like_descriptor(from, receive_target(run, slot, source), length, expected,
                                                       tag::kMaxCookie)) {
    // (32 bytes of data that begin with the magic word and read as a plausible descriptor: a
    // peer that sent a long chunk where this rank expects a short one.)
    set_error(fmt::format("{}: {}: chunk {} from {} is a single-copy descriptor where {} bytes of "
                          "data were expected (do all ranks pass the same count and type?)",
                          describe(), where(run), slot.chunk, peer(from), expected));
    return;
  }
  if (length != expected) {
    set_error(fmt::format("{}: {}: chunk {} from {} has {} bytes, expected {} (do all ranks pass "
                          "the same count and type?)",
                          describe(), where(run), slot.chunk, peer(from), length, expected));
    return;
  }
  if (by_descriptor && !acknowledge(run, slot, from, single_copy_cookie)) return;
  if (--slot.pending == 0) on_received(run, slot);
}

void Operation::combine_chunk(const TaskRun& run, Slot& slot, std::byte* out) {
  const codegen::Task& task = *run.task;
  const size_t offset = slot.chunk * run.chunk_elements * element_size_;
  const size_t elements = chunk_bytes(run, slot.chunk) / element_size_;
  // The contributions in order: the sources', with own at its place when added.
  const size_t count = task.sources.size() + (task.add_own ? 1 : 0);
  const auto part = [&](size_t k) -> const std::byte* {
    if (task.add_own && k == task.own_position) return run.own + offset;
    return slot.scratch[task.add_own && k > task.own_position ? k - 1 : k].get();
  };
  std::byte* partial = slot.scratch[0].get();
  if (elements == 0) return;  // an empty message of a zero-count operation
  if (std::find(slot.deferred.begin(), slot.deferred.end(), 1) != slot.deferred.end()) {
    combine_fused(run, slot, out, elements);
    return;
  }
  if (count == 1) {
    if (out != part(0)) std::memcpy(out, part(0), elements * element_size_);
    return;
  }
  // Left to right; the running result stays in the first source's slot, whose own data is
  // always consumed by then (own is the only thing that may precede it), and only the last
  // combine writes `out`, which may be the buffer own is read from.
  // (The slot keeps the list, so that steady-state chunks allocate nothing.)
  slot.parts.resize(count);
  for (size_t k = 0; k < count; ++k) slot.parts[k] = part(k);
  const std::string why =
      context_.arithmetic->fold(out, partial, slot.parts.data(), count, elements, args_.type, args_.op);
  if (!why.empty()) set_error(fmt::format("{}: {}: combining chunk {} failed: {}", describe(), where(run), slot.chunk, why));
}

bool Operation::fused_read(const codegen::Task& task, int32_t peer, size_t bytes) const {
  return task.reduce && bytes > 0 && context_.fused_part_bytes > 0 && single_copy(peer, bytes);
}

void Operation::combine_fused(const TaskRun& run, Slot& slot, std::byte* out, size_t elements) {
  const codegen::Task& task = *run.task;
  const size_t offset = slot.chunk * run.chunk_elements * element_size_;
  const size_t sources = task.sources.size();
  const size_t count = sources + (task.add_own ? 1 : 0);
  const size_t part_elements = std::max<size_t>(1, context_.fused_part_bytes / element_size_);
  const size_t part_bytes = part_elements * element_size_;
  size_t deferred = 0;
  for (const uint8_t d : slot.deferred) deferred += d;
  if (count > 1 && bounce_.capacity < deferred * part_bytes) {
    if (bounce_) context_.pool->release(std::move(bounce_));
    bounce_ = context_.pool->acquire(deferred * part_bytes);
  }
  const auto descriptor = [&](size_t source) {
    single_copy::Descriptor got;
    std::memcpy(&got, descriptor_at(slot, source), sizeof got);  // (checked on arrival)
    return got;
  };
  const auto read = [&](size_t source, size_t at, size_t bytes, std::byte* into) {
    const std::string why =
        context_.transport->single_copy_read_part(task.sources[source].rank, descriptor(source), at, bytes, into);
    if (!why.empty()) {
      set_error(fmt::format("{}: {}: reading chunk {} ({} bytes) by single copy from {} failed: {}", describe(),
                            where(run), slot.chunk, chunk_bytes(run, slot.chunk), peer(task.sources[source].rank),
                            why));
    }
    return why.empty();
  };
  if (count == 1) {  // one contribution, no arithmetic: straight into the output
    if (!read(0, 0, elements * element_size_, out)) return;
  } else {
    slot.parts.resize(count);
    std::byte* partial = slot.scratch[0].get();  // null where count == 2: fold never writes it
    for (size_t first = 0; first < elements && !failed(); first += part_elements) {
      const size_t n = std::min(part_elements, elements - first);
      const size_t at = first * element_size_;
      size_t next_bounce = 0;
      for (size_t k = 0; k < count; ++k) {
        if (task.add_own && k == task.own_position) {
          slot.parts[k] = run.own + offset + at;
          continue;
        }
        const size_t source = task.add_own && k > task.own_position ? k - 1 : k;
        if (!slot.deferred[source]) {
          slot.parts[k] = slot.scratch[source].get() + at;
          continue;
        }
        std::byte* into = bounce_.get() + next_bounce++ * part_bytes;
        if (!read(source, at, n * element_size_, into)) return;
        slot.parts[k] = into;
      }
      const std::string why = context_.arithmetic->fold(out + at, partial == nullptr ? nullptr : partial + at,
                                                        slot.parts.data(), count, n, args_.type, args_.op);
      if (!why.empty()) {
        set_error(fmt::format("{}: {}: combining chunk {} failed: {}", describe(), where(run), slot.chunk, why));
        return;
      }
    }
  }
  // Every part read: the senders may reuse their memory.
  for (size_t source = 0; source < sources && !failed(); ++source) {
    if (!slot.deferred[source]) continue;
    slot.deferred[source] = 0;
    if (!acknowledge(run, slot, task.sources[source].rank, descriptor(source).cookie)) return;
  }
}

void Operation::on_received(TaskRun& run, Slot& slot) {
  const codegen::Task& task = *run.task;
  const size_t offset = slot.chunk * run.chunk_elements * element_size_;
  if (!task.reduce) {
    if (task.sends()) {
      post_sends(run, slot, run.dest + offset);
    } else {
      finish_chunk(slot);
    }
    return;
  }
  if (task.sends()) {
    combine_chunk(run, slot, slot.scratch[0].get());
    if (!failed()) post_sends(run, slot, slot.scratch[0].get());
    return;
  }
  // The root writes the total.
  combine_chunk(run, slot, run.dest + offset);
  if (!failed()) finish_chunk(slot);
}

// --- call signatures -------------------------------------------------------------------------

Operation::Frame& Operation::frame_at(Slot& slot, size_t transfer) {
  static_assert(offsetof(Frame, packed) == sizeof(CallSignature),
                "a packed message is the signature and the data behind it, contiguous");
  return reinterpret_cast<Frame*>(slot.frames.get())[transfer];
}

TransportStatus Operation::send_framed(Slot& slot, size_t transfer, int32_t to, const std::byte* data,
                                       size_t bytes, uint64_t tag, Transfer* completion,
                                       Transport::Request* request) {
  Frame& frame = frame_at(slot, transfer);
  frame.signature = signature_;
  if (bytes <= sizeof frame.packed) {
    if (bytes > 0) std::memcpy(frame.packed, data, bytes);
    return context_.transport->send(to, &frame.signature, sizeof(CallSignature) + bytes, tag, completion, request);
  }
  frame.iov[0] = {&frame.signature, sizeof(CallSignature)};
  frame.iov[1] = {const_cast<std::byte*>(data), bytes};
  return context_.transport->send(to, frame.iov, 2, tag, completion, request);
}

bool Operation::check_signature(const TaskRun& run, Slot& slot, uint32_t source, size_t* length) {
  const int32_t from = run.task->sources[source].rank;
  CallSignature theirs;
  if (!read_signature(&frame_at(slot, source).signature, *length, &theirs)) {
    set_error(fmt::format("{}: {}: chunk {} from {} carries no call signature ({} bytes; is "
                          "FLEXPLAN_CHECK_CALLS alike on every rank, and every rank the same build?)",
                          describe(), where(run), slot.chunk, peer(from), *length));
    return false;
  }
  if (theirs != signature_) {
    set_error(fmt::format("{}: {}: chunk {} from {} belongs to another call: {}", describe(), where(run),
                          slot.chunk, peer(from),
                          describe_mismatch(theirs, peer(from), signature_, peer(context_.rank))));
    return false;
  }
  *length -= sizeof(CallSignature);
  return true;
}

// --- single copy -----------------------------------------------------------------------------

std::byte* Operation::receive_target(const TaskRun& run, Slot& slot, uint32_t source) const {
  if (run.task->reduce) return slot.scratch[source].get();
  return run.dest + slot.chunk * run.chunk_elements * element_size_;  // a broadcast's one source
}

std::byte* Operation::descriptor_at(Slot& slot, size_t transfer) {
  return slot.descriptors.get() + transfer * sizeof(single_copy::Descriptor);
}

bool Operation::single_copy(int32_t peer, size_t bytes) const {
  return context_.transport->single_copy_to(peer, bytes);
}

void Operation::send_descriptor(TaskRun& run, Slot& slot, size_t j, const std::byte* data, size_t bytes) {
  const codegen::Link& to = run.task->destinations[j];
  const size_t index = run.task->sources.size() + j;
  Transfer& transfer = slot.transfers[index];
  uint64_t cookie = awaiting_ack_.size();
  if (!free_cookies_.empty()) {
    cookie = free_cookies_.back();
    free_cookies_.pop_back();
  } else {
    awaiting_ack_.push_back(nullptr);
  }
  awaiting_ack_[cookie] = &transfer;
  // The slot keeps the descriptor until the ack, which comes only after it was delivered (or,
  // if the operation fails first, in quarantine: UCX may still be sending it).
  const single_copy::Descriptor descriptor = Transport::single_copy_descriptor(data, bytes, cookie);
  std::byte* message = descriptor_at(slot, index);
  std::memcpy(message, &descriptor, sizeof descriptor);
  Transport::Request request = nullptr;
  const TransportStatus status =
      context_.check_calls
          ? send_framed(slot, index, to.rank, message, sizeof descriptor, tag_of(*run.task, to, slot.chunk), nullptr,
                        &request)
          : context_.transport->send(to.rank, message, sizeof descriptor, tag_of(*run.task, to, slot.chunk), nullptr,
                                     &request);
  if (!status.ok()) {
    awaiting_ack_[cookie] = nullptr;
    free_cookies_.push_back(cookie);
    set_error(fmt::format("{}: {}: sending chunk {} to {} failed: {}", describe(), where(run), slot.chunk,
                          peer(to.rank), status.text));
    return;
  }
  // The transport finishes the send by itself; what tells the transfer's end is the ack.
  if (request != nullptr) context_.transport->release(request);
  // Counted as a send in flight to this host, so that blocking mode yields the core while the
  // peer reads: on shared cores the reader is the one that needs it (measured in
  // docs/flexbench.md against sleeping until the ack wakes this rank). Not counted among the
  // sends that cap blocking sleeps at 1 ms: the ack itself wakes a sleeping rank.
  transfer.awaiting_ack = true;
  ++acks_awaited_;
  ++sends_on_host_in_flight_;
  post_ack_receive();
}

bool Operation::acknowledge(const TaskRun& run, const Slot& slot, int32_t from, uint64_t cookie) {
  // The sender may reuse the memory now. An empty message: nothing to keep alive for UCX, but
  // the operation is not done before it left: the sender waits for it, and this process may
  // leave the runtime once the operation is done.
  static const char nothing = 0;
  Transfer* ack = nullptr;
  if (!free_ack_sends_.empty()) {
    ack = free_ack_sends_.back();
    free_ack_sends_.pop_back();
  } else {
    ack = ack_sends_.emplace_back(std::make_unique<Transfer>()).get();
    ack->owner = this;
    ack->notify = &Operation::on_completion;
    ack->ack_send = true;
  }
  ack->index = static_cast<uint32_t>(from);
  Transport::Request request = nullptr;
  const TransportStatus status =
      context_.transport->send(from, &nothing, 0, tag::ack(sequence_, cookie), ack, &request);
  if (!status.ok()) {
    free_ack_sends_.push_back(ack);
    set_error(fmt::format("{}: {}: acknowledging chunk {} to {} failed: {}", describe(), where(run),
                          slot.chunk, peer(from), status.text));
    return false;
  }
  if (request == nullptr) {  // sent at once
    free_ack_sends_.push_back(ack);
    return true;
  }
  ack->request = request;
  ++ack_sends_in_flight_;
  ++sends_in_flight_;
  ++sends_on_host_in_flight_;
  return true;
}

void Operation::on_ack_sent(Transfer& ack) {
  context_.transport->release(ack.request);
  ack.request = nullptr;
  free_ack_sends_.push_back(&ack);
  --ack_sends_in_flight_;
  --sends_in_flight_;
  --sends_on_host_in_flight_;
  if (!ack.status.ok()) {
    set_error(fmt::format("{}: acknowledging a single-copy chunk to {} failed: {}", describe(),
                          peer(static_cast<int32_t>(ack.index)), ack.status.text));
    return;
  }
  if (steps_done_ && ack_sends_in_flight_ == 0) done_ = true;
}

void Operation::post_ack_receive() {
  if (ack_receive_.request != nullptr || acks_awaited_ == 0 || failed()) return;
  Transport::Request request = nullptr;
  const TransportStatus status =
      context_.transport->recv(nullptr, 0, tag::ack(sequence_, 0), &ack_receive_, &request, tag::kAckMask);
  if (!status.ok()) {
    set_error(fmt::format("{}: posting the receive for single-copy acknowledgements failed: {}",
                          describe(), status.text));
    return;
  }
  ack_receive_.request = request;  // its completion may already be queued on ready_
}

void Operation::on_ack() {
  context_.transport->release(ack_receive_.request);
  ack_receive_.request = nullptr;
  if (!ack_receive_.status.ok()) {
    set_error(fmt::format("{}: receiving a single-copy acknowledgement failed: {}", describe(),
                          ack_receive_.status.text));
    return;
  }
  const uint64_t cookie = tag::cookie_of(ack_receive_.tag);
  if (cookie >= awaiting_ack_.size() || awaiting_ack_[cookie] == nullptr) {
    set_error(fmt::format("{}: a single-copy acknowledgement names cookie {}, which no send awaits",
                          describe(), cookie));
    return;
  }
  Transfer& sent = *awaiting_ack_[cookie];
  awaiting_ack_[cookie] = nullptr;
  free_cookies_.push_back(cookie);
  sent.awaiting_ack = false;
  --acks_awaited_;
  --sends_on_host_in_flight_;
  post_ack_receive();
  TaskRun& run = *sent.run;
  Slot& slot = run.slots[sent.slot];
  if (--slot.pending == 0) finish_chunk(slot);
  if (!failed()) slide_window(run);
}

// --- failure ---------------------------------------------------------------------------------

std::string Operation::waiting_for() const {
  for (size_t step = step_lo_; step < step_hi_; ++step) {
   for (const TaskRun& run : window_[step % window_.size()].runs) {
    if (run.state != RunState::Running) continue;
    const codegen::Task& task = *run.task;
    for (size_t chunk = run.lo; chunk < run.hi; ++chunk) {
      const Slot& slot = run.slots[chunk % run.slots.size()];
      if (slot.state != ChunkState::Receiving && slot.state != ChunkState::Sending) continue;
      for (size_t t = 0; t < slot.transfers.size(); ++t) {
        if (!slot.transfers[t].in_flight()) continue;
        if (t < task.sources.size()) {
          return fmt::format("{}: waiting to receive chunk {} of {} ({} bytes, tag {:#018x}) from {}",
                             where(run), chunk, run.chunks, chunk_bytes(run, chunk),
                             tag_of(task, task.sources[t], chunk), peer(task.sources[t].rank));
        }
        const codegen::Link& to = task.destinations[t - task.sources.size()];
        return fmt::format("{}: waiting for {} to take chunk {} of {} ({} bytes, tag {:#018x})",
                           where(run), peer(to.rank), chunk, run.chunks, chunk_bytes(run, chunk),
                           tag_of(task, to, chunk));
      }
    }
   }
  }
  if (ack_sends_in_flight_ > 0)
    return fmt::format("step {}: {} single-copy acknowledgements still leaving", step_lo_, ack_sends_in_flight_);
  return fmt::format("step {}", step_lo_);
}

void Operation::fail(const std::string& why) {
  if (done_ || failed()) return;
  set_error(fmt::format("{}: {}: {}", describe(), waiting_for(), why));
  release_requests();
}

void Operation::release_requests() {
  for (size_t step = step_lo_; step < step_hi_; ++step) {
   for (TaskRun& run : window_[step % window_.size()].runs) {
    if (run.state == RunState::Waiting) continue;  // (its slots are a former run's, idle)
    for (Slot& slot : run.slots) {
      bool in_flight = false;
      for (size_t t = 0; t < slot.transfers.size(); ++t) {
        Transfer& transfer = slot.transfers[t];
        if (!transfer.in_flight()) continue;
        in_flight = true;
        transfer.awaiting_ack = false;  // a receiver may still read the data: quarantined below
        if (transfer.request == nullptr) continue;
        // Cancelling tells the completion (queued on ready_, dropped below); freeing stops
        // any later notification.
        if (t < run.task->sources.size()) context_.transport->cancel(transfer.request);
        context_.transport->release(transfer.request);
        transfer.request = nullptr;
      }
      // A transfer may still touch the slot's scratch and descriptors (a descriptor's send is
      // not tracked: its ack tells it arrived) until the transport closes.
      if (in_flight) {
        for (ScratchPool::Buffer& buffer : slot.scratch)
          if (buffer) context_.quarantine->push_back(std::move(buffer));
        if (slot.descriptors) context_.quarantine->push_back(std::move(slot.descriptors));
        if (slot.frames) context_.quarantine->push_back(std::move(slot.frames));
      }
      slot.state = ChunkState::Idle;
    }
    if (run.stage) context_.quarantine->push_back(std::move(run.stage));
   }
  }
  // A peer may still read it (single copy) or UCX write it until the transport closes.
  if (work_) context_.quarantine->push_back(std::move(work_));
  if (ack_receive_.request != nullptr) {
    context_.transport->cancel(ack_receive_.request);
    context_.transport->release(ack_receive_.request);
    ack_receive_.request = nullptr;
  }
  awaiting_ack_.clear();
  free_cookies_.clear();
  acks_awaited_ = 0;
  for (const auto& ack : ack_sends_) {
    if (ack->request != nullptr) context_.transport->release(ack->request);  // the message is static
    ack->request = nullptr;
  }
  ack_sends_.clear();
  free_ack_sends_.clear();
  ack_sends_in_flight_ = 0;
  for (StepRuns& step : window_) step.runs.clear();
  step_lo_ = step_hi_ = 0;
  startable_.clear();
  completed_.clear();
  startable_head_ = completed_head_ = 0;
  ready_.clear();
  sends_in_flight_ = 0;
  sends_on_host_in_flight_ = 0;
}

}  // namespace flexplan
