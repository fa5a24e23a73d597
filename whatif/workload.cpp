// Workloads: the bundled layer tables, the JSON format, and the overlapped step model
// (workload.hpp).
#include "whatif/workload.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/size_format.hpp"

namespace flexplan::whatif {
namespace {

constexpr double kFp32 = 4;  // bytes per gradient element: fp32 gradients

// Layers of one table: parameters, and the share of the backward time each takes.
struct TableRow {
  std::string name;
  double parameters;
  double backward_share;
};

Workload from_table(std::string name, std::string source, double samples, double forward,
                    double backward, const std::vector<TableRow>& rows) {
  Workload w;
  w.name = std::move(name);
  w.source = std::move(source);
  w.samples_per_learner = samples;
  w.forward_seconds = forward;
  double shares = 0;
  for (const auto& row : rows) shares += row.backward_share;
  for (const auto& row : rows)
    w.layers.push_back({row.name, row.parameters * kFp32, backward * row.backward_share / shares});
  return w;
}

// ResNet-50 (He et al., "Deep Residual Learning for Image Recognition", 2016: 3.8 GFLOPs per
// image). Parameters per residual block, counted from the architecture (conv and batch-norm
// weights; 25,557,032 in all, the 25.6 M usually quoted); a stage's parameters split evenly over
// its blocks. Backward time shared by each stage's multiply-adds (about 118 M conv1, 680 M,
// 1030 M, 1470 M, 810 M for the four stages, 2 M fc), split evenly over its blocks.
Workload resnet50() {
  std::vector<TableRow> rows{{"conv1", 9536, 118}};
  const struct { const char* name; int blocks; double parameters, macs; } stages[] = {
      {"layer1", 3, 215808, 680}, {"layer2", 4, 1219584, 1030},
      {"layer3", 6, 7098368, 1470}, {"layer4", 3, 14964736, 810}};
  for (const auto& stage : stages)
    for (int b = 0; b < stage.blocks; ++b)
      rows.push_back({fmt::format("{}.{}", stage.name, b), stage.parameters / stage.blocks,
                      stage.macs / stage.blocks});
  rows.push_back({"fc", 2049000, 2});
  return from_table("resnet50",
                    "He et al. 2016 (ResNet-50, 25.6 M parameters); assumed: 32 images per "
                    "learner, forward 33 ms, backward 66 ms (a V100-class GPU in fp32)",
                    32, 0.033, 0.066, rows);
}

// BERT-large (Devlin et al., "BERT", 2018: 340 M parameters, 24 layers, hidden 1024, 16 heads,
// feed-forward 4096). Counted from the architecture: embeddings 31,782,912 (30,522-word
// vocabulary, 512 positions, 2 segments, layer norm), 12,596,224 per encoder layer, pooler
// 1,049,600: 335,141,888 in all. Backward time: 97% over the encoder layers evenly, 2% the
// embeddings, 1% the pooler.
Workload bert_large() {
  std::vector<TableRow> rows{{"embeddings", 31782912, 2}};
  for (int i = 0; i < 24; ++i) rows.push_back({fmt::format("encoder.{}", i), 12596224, 97.0 / 24});
  rows.push_back({"pooler", 1049600, 1});
  return from_table("bert-large",
                    "Devlin et al. 2018 (BERT-large, 340 M parameters); assumed: 8 sequences of "
                    "512 tokens per learner, forward 100 ms, backward 200 ms",
                    8, 0.100, 0.200, rows);
}

// GPT-2 XL (Radford et al., "Language Models are Unsupervised Multitask Learners", 2019: 1542 M
// parameters, 48 layers, d_model 1600, 50,257-token vocabulary, 1024 positions). Counted from
// the architecture: token and position embeddings 82,049,600 (tied with the output layer, so
// their gradient is complete only at the end of the backward pass), 30,740,800 per layer
// (12 d^2 + 13 d), final layer norm 3,200: 1,557,611,200 in all. Backward time: 98% over the
// layers evenly, 2% the embeddings and output projection.
Workload gpt2_xl() {
  std::vector<TableRow> rows{{"embeddings", 82049600, 2}};
  for (int i = 0; i < 48; ++i) rows.push_back({fmt::format("layer.{}", i), 30740800, 98.0 / 48});
  rows.push_back({"final-norm", 3200, 0.01});
  return from_table("gpt2-xl",
                    "Radford et al. 2019 (GPT-2, 1542 M parameters); assumed: 4 sequences of "
                    "1024 tokens per learner, forward 500 ms, backward 1000 ms",
                    4, 0.500, 1.000, rows);
}

[[noreturn]] void bad_field(const std::string& file, const std::string& field, const std::string& what) {
  throw std::invalid_argument(fmt::format("workload {}: {}: {}", file, field, what));
}

// `field` is the key looked up in `j`; errors name it after `where` ("layers[2]"), the
// position of `j` in the file (empty at the top level).
std::string field_label(const std::string& where, const std::string& field) {
  return where.empty() ? field : where + "." + field;
}

double number_field(const nlohmann::json& j, const std::string& file, const std::string& field,
                    double fallback, bool required = false, const std::string& where = "") {
  const auto it = j.find(field);
  if (it == j.end()) {
    if (required) bad_field(file, field_label(where, field), "missing");
    return fallback;
  }
  if (!it->is_number() || !(it->get<double>() >= 0) || !std::isfinite(it->get<double>()))
    bad_field(file, field_label(where, field), "must be a number >= 0");
  return it->get<double>();
}

// A size as a number of bytes or a string ("25M").
double size_field(const nlohmann::json& j, const std::string& file, const std::string& field,
                  double fallback, bool required = false, const std::string& where = "") {
  const auto it = j.find(field);
  if (it != j.end() && it->is_string()) {
    try {
      return static_cast<double>(parse_size(it->get<std::string>()));
    } catch (const std::invalid_argument& e) {
      bad_field(file, field_label(where, field), e.what());
    }
  }
  return number_field(j, file, field, fallback, required, where);
}

Workload parse_workload(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) bad_field(file, "(top level)", "must be an object");
  Workload w;
  w.name = j.value("name", file);
  w.source = j.value("source", std::string());
  w.samples_per_learner = number_field(j, file, "samples_per_learner", 1);
  w.bucket_bytes = size_field(j, file, "bucket_bytes", w.bucket_bytes);
  if (w.bucket_bytes < 1) bad_field(file, "bucket_bytes", "must be at least 1 byte");
  w.other_seconds = number_field(j, file, "other_seconds", 0);
  const double bytes_per_parameter = number_field(j, file, "bytes_per_parameter", kFp32);
  if (const auto layers = j.find("layers"); layers != j.end()) {
    if (!layers->is_array() || layers->empty()) bad_field(file, "layers", "must be a non-empty array");
    w.forward_seconds = number_field(j, file, "forward_seconds", 0, true);
    for (size_t i = 0; i < layers->size(); ++i) {
      const auto& l = (*layers)[i];
      const std::string where = fmt::format("layers[{}]", i);
      if (!l.is_object()) bad_field(file, where, "must be an object");
      Layer layer;
      layer.name = l.value("name", where);
      if (l.contains("parameters"))
        layer.gradient_bytes = number_field(l, file, "parameters", 0, true, where) * bytes_per_parameter;
      else
        layer.gradient_bytes = size_field(l, file, "gradient_bytes", 0, true, where);
      layer.backward_seconds = number_field(l, file, "backward_seconds", 0, true, where);
      w.layers.push_back(layer);
    }
    return w;
  }
  // The short form: a total size and a step compute time; the backward pass takes
  // backward_fraction of it, its gradients appearing evenly (in 100 equal layers).
  const double total = size_field(j, file, "gradient_bytes", 0, true);
  const double compute = number_field(j, file, "compute_seconds", 0, true);
  const double backward_fraction = number_field(j, file, "backward_fraction", 2.0 / 3);
  if (backward_fraction > 1) bad_field(file, "backward_fraction", "must be at most 1");
  w.forward_seconds = compute * (1 - backward_fraction);
  constexpr int kSlices = 100;
  for (int i = 0; i < kSlices; ++i)
    w.layers.push_back({fmt::format("part{}", i), total / kSlices, compute * backward_fraction / kSlices});
  return w;
}

}  // namespace

double Workload::compute_seconds() const {
  double total = forward_seconds + other_seconds;
  for (const auto& layer : layers) total += layer.backward_seconds;
  return total;
}

double Workload::gradient_bytes() const {
  double total = 0;
  for (const auto& layer : layers) total += layer.gradient_bytes;
  return total;
}

std::vector<std::string> builtin_workload_names() { return {"resnet50", "bert-large", "gpt2-xl"}; }

Workload builtin_workload(const std::string& name) {
  if (name == "resnet50") return resnet50();
  if (name == "bert-large") return bert_large();
  if (name == "gpt2-xl") return gpt2_xl();
  throw std::invalid_argument(fmt::format("no bundled workload '{}' (bundled: {})", name,
                                          fmt::join(builtin_workload_names(), ", ")));
}

Workload load_workload(const std::string& path_or_name) {
  const auto names = builtin_workload_names();
  if (std::find(names.begin(), names.end(), path_or_name) != names.end())
    return builtin_workload(path_or_name);
  std::ifstream in(path_or_name);
  if (!in)
    throw std::invalid_argument(fmt::format(
        "workload '{}': no such file, and not a bundled workload ({})", path_or_name,
        fmt::join(names, ", ")));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(fmt::format("workload {}: not JSON: {}", path_or_name, e.what()));
  }
  return parse_workload(j, path_or_name);
}

StepPrediction predict_step(const Workload& w, int learners,
                            const std::function<double(double bytes)>& allreduce) {
  StepPrediction p;
  p.compute = w.compute_seconds();
  // Gradients appear in reverse layer order as the backward pass runs; a bucket is sent when
  // it holds bucket_bytes or the last layer is done. One all-reduce at a time, in order.
  double clock = w.forward_seconds, comm_free = 0;
  Bucket bucket;
  const auto send = [&] {
    bucket.start = std::max(bucket.ready, comm_free);
    const double t = learners > 1 ? allreduce(bucket.bytes) : 0;
    bucket.end = bucket.start + t;
    comm_free = bucket.end;
    p.communication += t;
    p.buckets.push_back(bucket);
    bucket = Bucket{};
  };
  for (size_t i = w.layers.size(); i-- > 0;) {
    clock += w.layers[i].backward_seconds;
    bucket.bytes += w.layers[i].gradient_bytes;
    bucket.ready = clock;
    if (bucket.bytes >= w.bucket_bytes || i == 0) send();
  }
  p.step = std::max(clock, comm_free) + w.other_seconds;
  p.exposed = p.step - p.compute;
  p.efficiency = p.step > 0 ? p.compute / p.step : 1;
  p.samples_per_second = p.step > 0 ? learners * w.samples_per_learner / p.step : 0;
  return p;
}

}  // namespace flexplan::whatif

namespace flexplan::whatif {

std::string workload_to_json(const Workload& w) {
  nlohmann::ordered_json j;
  j["name"] = w.name;
  j["source"] = w.source;
  j["samples_per_learner"] = w.samples_per_learner;
  j["forward_seconds"] = w.forward_seconds;
  j["other_seconds"] = w.other_seconds;
  j["bucket_bytes"] = w.bucket_bytes;
  auto& layers = j["layers"] = nlohmann::ordered_json::array();
  for (const auto& layer : w.layers)
    layers.push_back({{"name", layer.name},
                      {"gradient_bytes", layer.gradient_bytes},
                      {"backward_seconds", layer.backward_seconds}});
  return j.dump(1) + "\n";
}

}  // namespace flexplan::whatif
