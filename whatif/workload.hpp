// Training-step workloads: per-layer gradient sizes and compute times (or a total gradient size
// and a step compute time), and the step time predicted with the backward pass overlapped with
// bucketed all-reduces, one at a time in bucket order, as data-parallel frameworks run them
// (docs/whatif.md, "Workloads").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace flexplan::whatif {

struct Layer {
  std::string name;
  double gradient_bytes = 0;
  double backward_seconds = 0;
};

struct Workload {
  std::string name;
  std::string source;                // the paper or assumption the figures come from
  double samples_per_learner = 1;    // per step
  double forward_seconds = 0;        // the whole forward pass of one step
  std::vector<Layer> layers;         // in forward order; gradients appear in reverse
  double bucket_bytes = 25.0 * (1 << 20);  // a bucket is sent once it holds this much
  double other_seconds = 0;          // optimizer and the rest, after communication ends
  double compute_seconds() const;    // forward + backward + other
  double gradient_bytes() const;
};

// Bundled: "resnet50", "bert-large", "gpt2-xl" (workload.cpp states their sources and
// assumptions). Throws std::invalid_argument listing them for another name.
Workload builtin_workload(const std::string& name);
std::vector<std::string> builtin_workload_names();

// A workload from a JSON file (format in docs/whatif.md); the name of a bundled one also
// works. Throws std::invalid_argument naming the file and the field.
Workload load_workload(const std::string& path_or_name);

struct Bucket {
  double bytes = 0;
  double ready = 0;  // seconds after the step begins when its last gradient is computed
  double start = 0, end = 0;
};

struct StepPrediction {
  double compute = 0;      // forward + backward + other: one learner's step
  double step = 0;         // with communication
  double exposed = 0;      // communication not hidden behind the backward pass
  double communication = 0;  // sum of the all-reduce times
  double efficiency = 0;   // compute / step: against one learner, which does not communicate
  double samples_per_second = 0;
  std::vector<Bucket> buckets;
};

// `allreduce` gives the all-reduce time of a message; `learners` scales samples/s.
StepPrediction predict_step(const Workload&, int learners,
                            const std::function<double(double bytes)>& allreduce);

}  // namespace flexplan::whatif

namespace flexplan::whatif {
// The workload in the file format (layers with gradient_bytes), to edit its assumptions.
std::string workload_to_json(const Workload&);
}  // namespace flexplan::whatif
