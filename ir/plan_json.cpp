// The JSON form. Reading is strict: every field is required (max_bytes and topology.hash may
// be null), unknown fields are errors, and errors name the JSON location.
#include "ir/plan_json.hpp"

#include <fmt/format.h>

#include <limits>
#include <optional>
#include <set>

#include "ir/pipeline_form.hpp"

namespace flexplan::ir {

namespace {

constexpr int kJsonFormatVersion = 2;  // 2: ops carry their shape
constexpr const char* kFormatName = "flexplan-plan";
constexpr uint64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

using nlohmann::json;

json op_to_json(const Op& op) {
  return json{{"op", to_string(op.kind)},
              {"begin", op.begin},
              {"end", op.end},
              {"root", op.root},
              {"group", op.group},
              {"shape", to_string(op.shape)}};
}

// A JSON value and where it sits in the document, for error messages.
class Node {
 public:
  Node(const json& value, std::string path) : value_(value), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw PlanFormatError(
        fmt::format("JSON plan: {}: {}", path_.empty() ? "top level" : path_, what));
  }

  // An object with exactly these keys, and perhaps some of `optional`.
  void expect_object(std::initializer_list<const char*> keys,
                     std::initializer_list<const char*> optional = {}) const {
    if (!value_.is_object()) fail(fmt::format("expected an object, found {}", value_.type_name()));
    std::set<std::string> known(keys.begin(), keys.end());
    known.insert(optional.begin(), optional.end());
    for (const auto& [key, unused] : value_.items()) {
      if (!known.count(key)) fail(fmt::format("unknown field '{}'", key));
    }
    for (const char* key : keys) {
      if (!value_.contains(key)) fail(fmt::format("missing field '{}'", key));
    }
  }
  Node field(const char* key) const {
    return Node(value_.at(key), path_.empty() ? key : path_ + "." + key);
  }
  std::vector<Node> elements() const {
    if (!value_.is_array()) fail(fmt::format("expected an array, found {}", value_.type_name()));
    std::vector<Node> nodes;
    nodes.reserve(value_.size());
    for (size_t i = 0; i < value_.size(); ++i)
      nodes.emplace_back(value_[i], fmt::format("{}[{}]", path_, i));
    return nodes;
  }
  bool is_null() const { return value_.is_null(); }
  bool has(const char* key) const { return value_.contains(key); }

  std::string string() const {
    if (!value_.is_string()) fail(fmt::format("expected a string, found {}", value_.type_name()));
    return value_.get<std::string>();
  }
  uint64_t unsigned_at_most(uint64_t limit) const {
    const bool non_negative =
        value_.is_number_unsigned() || (value_.is_number_integer() && value_.get<int64_t>() >= 0);
    if (!non_negative || value_.get<uint64_t>() > limit) {
      fail(fmt::format("expected an integer in [0, {}], found {}", limit, value_.dump()));
    }
    return value_.get<uint64_t>();
  }
  int32_t int32() const {
    const bool fits = value_.is_number_unsigned() ? value_.get<uint64_t>() <= kMaxInt32
                      : value_.is_number_integer()
                          ? value_.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                                value_.get<int64_t>() <= std::numeric_limits<int32_t>::max()
                          : false;
    if (!fits) fail(fmt::format("expected a 32-bit integer, found {}", value_.dump()));
    return static_cast<int32_t>(value_.get<int64_t>());
  }
  template <typename Enum>
  Enum name(Enum (*from_string)(std::string_view)) const {
    const std::string text = string();
    try {
      return from_string(text);
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
  }

 private:
  const json& value_;
  std::string path_;
};

Op op_from_json(const Node& node) {
  node.expect_object({"op", "begin", "end", "root", "group", "shape"});
  Op op;
  op.kind = node.field("op").name(op_kind_from_string);
  op.begin = node.field("begin").unsigned_at_most(std::numeric_limits<uint64_t>::max());
  op.end = node.field("end").unsigned_at_most(std::numeric_limits<uint64_t>::max());
  // As in every form (plan.bin codes a begin and a length): an empty range is the verifier's
  // to refuse, one that ends before it begins is not a range.
  if (op.end < op.begin)
    node.field("end").fail(fmt::format("the range ends at {}, before its begin {}", op.end, op.begin));
  op.root = static_cast<int32_t>(node.field("root").unsigned_at_most(kMaxInt32));
  for (const Node& member : node.field("group").elements()) {
    op.group.push_back(static_cast<int32_t>(member.unsigned_at_most(kMaxInt32)));
  }
  op.shape = node.field("shape").name(op_shape_from_string);
  return op;
}

Step step_from_json(const Node& node) {
  node.expect_object({"phase", "level", "ops"});
  Step step;
  step.phase = node.field("phase").name(phase_from_string);
  step.level = node.field("level").int32();
  for (const Node& op : node.field("ops").elements()) step.ops.push_back(op_from_json(op));
  return step;
}

Schedule schedule_from_json(const Node& node) {
  node.expect_object({"algorithm", "collective", "min_bytes", "max_bytes", "units", "steps"},
                     {"root", "shards"});
  Schedule schedule;
  schedule.algorithm = node.field("algorithm").string();
  schedule.collective = node.field("collective").name(collective_from_string);
  // The contract's fields: a root exactly for broadcast and reduce, shards (optional) only for
  // reduce-scatter and all-gather (collective_contract.hpp).
  const std::string_view collective = to_string(schedule.collective);
  if (has_root(schedule.collective) && !node.has("root"))
    node.fail(fmt::format("missing field 'root' (a {} schedule names its root)", collective));
  if (!has_root(schedule.collective) && node.has("root"))
    node.field("root").fail(fmt::format("a {} schedule has no root", collective));
  if (node.has("root"))
    schedule.root = static_cast<int32_t>(node.field("root").unsigned_at_most(kMaxInt32));
  if (node.has("shards")) {
    if (!has_shards(schedule.collective))
      node.field("shards").fail(fmt::format("a {} schedule has no shards", collective));
    for (const Node& pair : node.field("shards").elements()) {
      const std::vector<Node> ends = pair.elements();
      if (ends.size() != 2) pair.fail("expected [begin, end]");
      const UnitRange shard{ends[0].unsigned_at_most(std::numeric_limits<uint64_t>::max()),
                            ends[1].unsigned_at_most(std::numeric_limits<uint64_t>::max())};
      if (shard.end < shard.begin)
        ends[1].fail(fmt::format("the shard ends at {}, before its begin {}", shard.end, shard.begin));
      schedule.shards.push_back(shard);
    }
  }
  schedule.min_bytes =
      node.field("min_bytes").unsigned_at_most(std::numeric_limits<uint64_t>::max());
  const Node max = node.field("max_bytes");
  if (!max.is_null())
    schedule.max_bytes = max.unsigned_at_most(std::numeric_limits<uint64_t>::max());
  schedule.units = node.field("units").unsigned_at_most(std::numeric_limits<uint64_t>::max());
  for (const Node& step : node.field("steps").elements())
    schedule.steps.push_back(step_from_json(step));
  return schedule;
}

}  // namespace

json plan_to_json(const Plan& plan) {
  json ranks = json::array();
  for (size_t rank = 0; rank < plan.rank_names.size(); ++rank) {
    ranks.push_back({{"rank", rank}, {"name", plan.rank_names[rank]}});
  }
  json schedules = json::array();
  for (const Schedule& held : plan.schedules) {
    // Written whole: the text forms have no compact pipeline (pipeline_form.hpp).
    std::optional<Schedule> whole;
    const Schedule& schedule = held.slices == 1 ? held : whole.emplace(materialize(held));
    json steps = json::array();
    for (const Step& step : schedule.steps) {
      json ops = json::array();
      for (const Op& op : step.ops) ops.push_back(op_to_json(op));
      steps.push_back(
          {{"phase", to_string(step.phase)}, {"level", step.level}, {"ops", std::move(ops)}});
    }
    json entry{{"algorithm", schedule.algorithm},
               {"collective", to_string(schedule.collective)},
               {"min_bytes", schedule.min_bytes},
               {"max_bytes", schedule.max_bytes ? json(*schedule.max_bytes) : json(nullptr)},
               {"units", schedule.units},
               {"steps", std::move(steps)}};
    if (has_root(schedule.collective)) entry["root"] = schedule.root;
    if (!schedule.shards.empty()) {
      json shards = json::array();
      for (const UnitRange& shard : schedule.shards) shards.push_back({shard.begin, shard.end});
      entry["shards"] = std::move(shards);
    }
    schedules.push_back(std::move(entry));
  }
  return json{{"format", kFormatName},
              {"version", kJsonFormatVersion},
              {"world_size", plan.world_size},
              {"topology",
               {{"name", plan.topology_name},
                {"hash", plan.topology_hash.empty() ? json(nullptr) : json(plan.topology_hash)}}},
              {"ranks", std::move(ranks)},
              {"schedules", std::move(schedules)}};
}

Plan plan_from_json(const json& document) {
  const Node root(document, "");
  root.expect_object({"format", "version", "world_size", "topology", "ranks", "schedules"});
  if (root.field("format").string() != kFormatName)
    root.field("format").fail(fmt::format("expected \"{}\"", kFormatName));
  const uint64_t version =
      root.field("version").unsigned_at_most(std::numeric_limits<uint32_t>::max());
  if (version != kJsonFormatVersion) {
    root.field("version").fail(
        fmt::format("plan JSON version {} is not supported (this flexplan reads version {})",
                    version, kJsonFormatVersion));
  }
  Plan plan;
  plan.world_size = static_cast<int32_t>(root.field("world_size").unsigned_at_most(kMaxInt32));
  const Node topology = root.field("topology");
  topology.expect_object({"name", "hash"});
  plan.topology_name = topology.field("name").string();
  if (!topology.field("hash").is_null()) plan.topology_hash = topology.field("hash").string();
  const auto ranks = root.field("ranks").elements();
  for (size_t i = 0; i < ranks.size(); ++i) {
    ranks[i].expect_object({"rank", "name"});
    if (ranks[i].field("rank").unsigned_at_most(kMaxInt32) != i) {
      ranks[i].field("rank").fail(fmt::format("expected {} (ranks are listed in order)", i));
    }
    plan.rank_names.push_back(ranks[i].field("name").string());
  }
  for (const Node& schedule : root.field("schedules").elements())
    plan.schedules.push_back(schedule_from_json(schedule));
  return plan;
}

}  // namespace flexplan::ir
