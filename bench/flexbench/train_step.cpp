// flexplan_train_step: a synthetic data-parallel training step run for real, as `flexplan
// whatif`'s step model describes it (docs/whatif.md, "Workloads"), to set measured beside
// predicted (docs/whatif.md, "Fidelity").
//   mpirun -np N flexplan_train_step plan.bin --workload W [-n 10] [-w 2] [--blocking] [--json F]
//
// Compute is sleeping (so that the host's cores are not what is measured): the forward pass,
// then the backward pass layer by layer from the last. Gradients fill buckets exactly as the
// model fills them (whatif::predict_step's buckets: bytes and the time each is complete). A
// communication thread all-reduces the buckets one at a time in bucket order (the model's one
// communication stream) with Communicator::iallreduce, each as soon as it is complete and the
// previous one is done; the step ends when the backward pass and the last all-reduce are done,
// plus the workload's other time. Each bucket's all-reduce is also timed alone afterwards, and
// the step model is evaluated with those measured times, so that a difference between
// predicted and measured can be told apart: the all-reduce cost model, or the step model.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/flexbench/check_pattern.hpp"
#include "bench/flexbench/tool_main.hpp"
#include "runtime/communicator.hpp"
#include "whatif/workload.hpp"

namespace flexplan::bench {
namespace {

constexpr DataType kType = DataType::Float32;  // fp32 gradients
constexpr ReduceOp kOp = ReduceOp::Sum;        // exact on the check's small integers

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Args {
  std::string plan_path;
  std::string workload;
  std::string algorithm;
  int steps = 10;
  int warmup = 2;
  int alone = 5;  // timed all-reduces of each bucket size alone
  bool blocking = false;
  bool check = true;
  std::string json_path;
};

std::optional<Args> parse_args(int argc, char** argv, bool print, int& exit_code) {
  Args args;
  int check = 1;
  CLI::App app{"flexplan_train_step: a synthetic training step (compute sleeps, bucketed "
               "iallreduce) as whatif's step model describes it"};
  app.add_option("plan", args.plan_path, "plan.bin written by flexplan")->required();
  app.add_option("--workload", args.workload,
                 "workload JSON (flexplan whatif --print-workload format) or a bundled name")
      ->required();
  app.add_option("-n,--steps", args.steps, "timed steps")->check(CLI::Range(1, 1 << 20));
  app.add_option("-w,--warmup", args.warmup, "untimed steps first")->check(CLI::Range(0, 1 << 20));
  app.add_option("--alone", args.alone, "timed all-reduces of each bucket size alone, after the steps (0: none)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-a,--algorithm", args.algorithm, "run the plan's schedule of this algorithm for every bucket");
  app.add_flag("--blocking", args.blocking, "sleep in ucp_worker_wait instead of busy-polling");
  app.add_option("-c,--check", check, "check every step's results (1) or not (0)")->check(CLI::Range(0, 1));
  app.add_option("--json", args.json_path, "also write the results as JSON to FILE");
  try {
    app.parse(argc, argv);
    args.check = check == 1;
  } catch (const CLI::ParseError& e) {
    exit_code = e.get_exit_code() == 0 ? 0 : kExitBadInput;
    if (print) app.exit(e);
    return std::nullopt;
  }
  return args;
}

// A bucket as a slice of the gradient buffer, with the time (from the step's start) at which
// the backward pass has computed all of it.
struct Slice {
  size_t offset = 0, count = 0;  // elements
  double ready = 0;
  std::string algorithm;
};

std::vector<Slice> slices_of(const whatif::Workload& workload, int world) {
  // The model's own buckets: a zero all-reduce time leaves their sizes and ready times as the
  // model computes them.
  const auto model = whatif::predict_step(workload, std::max(world, 2), [](double) { return 0.0; });
  std::vector<Slice> slices;
  size_t offset = 0;
  for (const auto& bucket : model.buckets) {
    Slice s;
    s.offset = offset;
    s.count = std::max<size_t>(1, static_cast<size_t>(bucket.bytes / size_of(kType) + 0.5));
    s.ready = bucket.ready;
    offset += s.count;
    slices.push_back(s);
  }
  return slices;
}

// Per step and bucket, seconds from the step's start.
struct StepTimes {
  double step = 0;
  std::vector<double> start, end;
};

// The communication thread: all-reduces the buckets of each step one at a time, each once the
// compute thread has marked it complete. Only this thread drives the communicator while it runs.
class CommThread {
 public:
  CommThread(Communicator& comm, const std::vector<Slice>& slices, const float* send, float* recv)
      : comm_(comm), slices_(slices), send_(send), recv_(recv), thread_([this] { run(); }) {}
  ~CommThread() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  // Compute thread: a new step begins at `start`.
  void begin_step(Clock::time_point start) {
    std::lock_guard lock(mutex_);
    start_ = start;
    ready_ = 0;
    done_ = 0;
    starts_.assign(slices_.size(), 0);
    ends_.assign(slices_.size(), 0);
    ++step_;
  }
  // Compute thread: bucket `b` of this step is complete.
  void mark_ready(size_t b) {
    {
      std::lock_guard lock(mutex_);
      ready_ = b + 1;
    }
    changed_.notify_all();
  }
  // Compute thread: waits until every bucket of this step is all-reduced; rethrows the
  // communication thread's error.
  void wait_all(std::vector<double>& starts, std::vector<double>& ends) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return done_ == slices_.size() || error_; });
    if (error_) std::rethrow_exception(error_);
    starts = starts_;
    ends = ends_;
  }

 private:
  void run() {
    uint64_t seen_step = 0;
    size_t next = 0;
    for (;;) {
      Clock::time_point start;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return quit_ || (step_ != seen_step) || next < ready_; });
        if (quit_) return;
        if (step_ != seen_step) {
          seen_step = step_;
          next = 0;
          if (ready_ == 0) continue;
        }
        start = start_;
      }
      const Slice& s = slices_[next];
      try {
        const double begun = seconds(Clock::now() - start);
        Request request = comm_.iallreduce(send_ + s.offset, recv_ + s.offset, s.count, kType, kOp);
        request.wait();
        const double ended = seconds(Clock::now() - start);
        std::lock_guard lock(mutex_);
        starts_[next] = begun;
        ends_[next] = ended;
        done_ = ++next;
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
        changed_.notify_all();
        return;
      }
      changed_.notify_all();
    }
  }

  Communicator& comm_;
  const std::vector<Slice>& slices_;
  const float* send_;
  float* recv_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t step_ = 0;
  Clock::time_point start_;
  size_t ready_ = 0, done_ = 0;
  std::vector<double> starts_, ends_;
  std::exception_ptr error_;
  bool quit_ = false;
  std::thread thread_;  // last: starts once the rest is initialized
};

// One step on this rank: seconds from its start to its end, with every bucket's all-reduce.
StepTimes run_step(const whatif::Workload& workload, const std::vector<Slice>& slices, CommThread& comm) {
  StepTimes t;
  const auto start = Clock::now();
  const auto at = [&](double s) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  comm.begin_step(start);
  // forward, then backward: bucket b is complete at its ready time (absolute deadlines, so
  // the sleeps' overshoots do not add up)
  for (size_t b = 0; b < slices.size(); ++b) {
    std::this_thread::sleep_until(at(slices[b].ready));
    comm.mark_ready(b);
  }
  comm.wait_all(t.start, t.end);
  std::this_thread::sleep_for(std::chrono::duration<double>(workload.other_seconds));
  t.step = seconds(Clock::now() - start);
  return t;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The slowest rank's figure for every entry.
void max_over_ranks(std::vector<double>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

int run(const Args& args, int rank, int world) {
  const auto fail_input = [&](const std::string& what) {
    if (rank == 0) fmt::print(stderr, "flexplan_train_step: {}\n", what);
    return kExitBadInput;
  };
  whatif::Workload workload;
  try {
    workload = whatif::load_workload(args.workload);
  } catch (const std::exception& e) {
    return fail_input(e.what());
  }
  std::vector<Slice> slices = slices_of(workload, world);
  if (slices.empty()) return fail_input(fmt::format("workload {}: no gradients", workload.name));

  std::optional<Communicator> comm;
  if (const int status = open_communicator(comm, args.plan_path, args.blocking, rank, "flexplan_train_step"))
    return status;
  try {
    if (!args.algorithm.empty()) comm->force_algorithm(args.algorithm);
  } catch (const RuntimeError& e) {
    return fail_input(fmt::format("-a {}: {}", args.algorithm, e.what()));
  }
  for (Slice& s : slices) {
    s.algorithm = args.algorithm;
    if (s.algorithm.empty()) {
      try {
        s.algorithm = ir::select_schedule(comm->plan(), ir::Collective::AllReduce, s.count * size_of(kType)).algorithm;
      } catch (const std::out_of_range&) {
        return fail_input(fmt::format("the plan has no all-reduce schedule for {} bytes", s.count * size_of(kType)));
      }
    }
  }
  const size_t total = slices.back().offset + slices.back().count;
  std::vector<float> send(total), recv(total);
  fill_pattern(send.data(), total, kType, kOp, comm->rank());

  const size_t buckets = slices.size();
  std::vector<double> step_times;
  std::vector<std::vector<double>> starts(buckets), ends(buckets);  // per bucket, per timed step
  uint64_t wrong = 0;
  {
    CommThread thread(*comm, slices, send.data(), recv.data());
    for (int i = 0; i < args.warmup + args.steps; ++i) {
      if (args.check) std::memset(recv.data(), 0xff, total * sizeof(float));  // NaN: unwritten shows
      MPI_Barrier(MPI_COMM_WORLD);
      const StepTimes t = run_step(workload, slices, thread);
      // Every rank's step is over before any rank checks: ten learners share two cores on the
      // emulated cluster, and an early rank's check delayed a later rank's waking from its
      // last sleep by up to 30 ms (docs/whatif.md, "Fidelity").
      MPI_Barrier(MPI_COMM_WORLD);
      if (args.check) wrong += count_wrong(recv.data(), total, kType, kOp, world);
      if (i < args.warmup) continue;
      step_times.push_back(t.step);
      for (size_t b = 0; b < buckets; ++b) {
        starts[b].push_back(t.start[b]);
        ends[b].push_back(t.end[b]);
      }
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  max_over_ranks(step_times);
  for (size_t b = 0; b < buckets; ++b) {
    max_over_ranks(starts[b]);
    max_over_ranks(ends[b]);
  }

  // Each bucket size's all-reduce alone (one at a time, no compute): the measured counterpart
  // of the model's all-reduce prices.
  std::map<size_t, double> alone;  // count -> median seconds, slowest rank
  if (args.alone > 0) {
    for (const Slice& s : slices) {
      if (alone.count(s.count)) continue;
      std::vector<double> times;
      comm->allreduce(send.data(), recv.data(), s.count, kType, kOp);  // warm-up
      for (int i = 0; i < args.alone; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto start = Clock::now();
        comm->allreduce(send.data(), recv.data(), s.count, kType, kOp);
        times.push_back(seconds(Clock::now() - start));
      }
      max_over_ranks(times);
      alone[s.count] = median(times);
    }
  }

  if (rank == 0) {
    const double compute = workload.compute_seconds();
    std::vector<double> communication(step_times.size(), 0);
    for (size_t i = 0; i < step_times.size(); ++i)
      for (size_t b = 0; b < buckets; ++b) communication[i] += ends[b][i] - starts[b][i];
    const double step = median(step_times);
    std::optional<double> model_with_alone;
    if (!alone.empty()) {
      model_with_alone = whatif::predict_step(workload, world, [&](double bytes) {
        const size_t count = std::max<size_t>(1, static_cast<size_t>(bytes / size_of(kType) + 0.5));
        return alone.at(count);
      }).step;
    }
    fmt::print("# flexplan_train_step: plan '{}' ({} ranks), workload '{}': {:.2f} MiB of gradients in {} buckets, "
               "compute {:.4f} s (forward {:.4f} s, other {:.4f} s), {} steps after {} warm-up\n",
               comm->plan().topology_name, world, workload.name, total * 4.0 / (1 << 20), buckets,
               compute, workload.forward_seconds, workload.other_seconds, args.steps, args.warmup);
    fmt::print("# {:>6} {:>10} {:>14} {:>9} {:>9} {:>9} {:>12} {:>9}\n", "bucket", "bytes", "algorithm",
               "ready_s", "start_s", "end_s", "allreduce_s", "alone_s");
    nlohmann::ordered_json jbuckets = nlohmann::ordered_json::array();
    for (size_t b = 0; b < buckets; ++b) {
      const Slice& s = slices[b];
      std::vector<double> durations(starts[b].size());
      for (size_t i = 0; i < durations.size(); ++i) durations[i] = ends[b][i] - starts[b][i];
      const double a = alone.count(s.count) ? alone.at(s.count) : 0;
      fmt::print("  {:>6} {:>10} {:>14} {:>9.4f} {:>9.4f} {:>9.4f} {:>12.4f} {:>9}\n", b, s.count * 4,
                 s.algorithm, s.ready, median(starts[b]), median(ends[b]), median(durations),
                 alone.empty() ? std::string("n/a") : fmt::format("{:.4f}", a));
      nlohmann::ordered_json jb;
      jb["bytes"] = s.count * 4;
      jb["algorithm"] = s.algorithm;
      jb["ready_s"] = s.ready;
      jb["start_s"] = median(starts[b]);
      jb["end_s"] = median(ends[b]);
      jb["allreduce_s"] = median(durations);
      jb["alone_s"] = alone.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(a);
      jbuckets.push_back(jb);
    }
    const auto [lo, hi] = std::minmax_element(step_times.begin(), step_times.end());
    fmt::print("step {:.4f} s median (min {:.4f}, max {:.4f}); communication {:.4f} s; exposed {:.4f} s; "
               "model with the all-reduces timed alone {}; #wrong {}\n",
               step, *lo, *hi, median(communication), step - compute,
               model_with_alone ? fmt::format("{:.4f} s", *model_with_alone) : std::string("n/a"),
               args.check ? fmt::format("{}", wrong) : std::string("N/A"));
    if (!args.json_path.empty()) {
      nlohmann::ordered_json j;
      j["format"] = "flexplan-train-step";
      j["version"] = 1;
      j["topology"] = comm->plan().topology_name;
      j["world"] = world;
      j["workload"] = {{"name", workload.name},
                       {"gradient_bytes", total * 4},
                       {"compute_s", compute},
                       {"forward_s", workload.forward_seconds},
                       {"other_s", workload.other_seconds},
                       {"bucket_bytes", workload.bucket_bytes}};
      j["steps"] = args.steps;
      j["warmup"] = args.warmup;
      j["step_s"] = {{"median", step}, {"min", *lo}, {"max", *hi}};
      j["steps_s"] = step_times;
      j["communication_s"] = median(communication);
      j["exposed_s"] = step - compute;
      j["model_with_alone_s"] = model_with_alone ? nlohmann::ordered_json(*model_with_alone) : nullptr;
      j["wrong"] = args.check ? nlohmann::ordered_json(wrong) : nullptr;
      j["buckets"] = jbuckets;
      std::ofstream out(args.json_path);
      out << j.dump(1) << "\n";
      if (!out) fmt::print(stderr, "flexplan_train_step: cannot write {}\n", args.json_path);
    }
  }
  return wrong == 0 ? kExitSuccess : kExitWrongResults;
}

}  // namespace
}  // namespace flexplan::bench

int main(int argc, char** argv) {
  // Only the main thread calls MPI; the communication thread drives UCX alone.
  return flexplan::bench::tool_main(argc, argv, "flexplan_train_step", MPI_THREAD_FUNNELED,
                                    flexplan::bench::parse_args, flexplan::bench::run);
}
