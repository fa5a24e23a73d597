// Reads a topology from its JSON form (docs/topology.md). Three passes, so that every error
// can name its JSON location and nothing large is allocated before the input is known good:
//   1. parse the text, refusing duplicate keys;
//   2. check every node description and its fields (NodeSpec), still unexpanded;
//   3. count what `count` would expand to, check names and ranks, then build the graph.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "topology/topology.hpp"

namespace flexplan {
namespace {

using nlohmann::json;

// Trees beyond this many nodes are refused before they are built.
constexpr double kMaxNodes = 10'000'000;
// Real clusters are a handful of levels deep; this only stops runaway nesting.
constexpr int kMaxDepth = 64;

constexpr std::string_view kTopLevel = "top level";

std::string with_commas(double value) {
  if (!(value < 1e18)) return fmt::format("{:.3g}", value);
  const std::string digits = fmt::format("{:.0f}", value);
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

std::string child_location(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// ---- pass 1: JSON text -------------------------------------------------------------------

// Follows the parser through the document to name the location of a repeated key, which
// nlohmann::json would otherwise silently resolve to the last value. Frames stay small (the
// path is spelled out only for the error), so deep nesting costs linear memory.
class DuplicateKeyGuard {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        frames_.push_back({event == json::parse_event_t::array_start, 0, {}, {}});
        break;
      case json::parse_event_t::key: {
        Frame& top = frames_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second)
          throw TopologyError(child_location(location(), top.key),
                              fmt::format("the key \"{}\" appears twice", top.key));
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        value_done();
        break;
      case json::parse_event_t::value:
        value_done();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_array;
    size_t index;     // current element, in an array
    std::string key;  // current key, in an object
    std::unordered_set<std::string> keys;
  };

  // Location of the innermost open object or array ("root.children[1]").
  std::string location() const {
    std::string path;
    for (size_t i = 0; i + 1 < frames_.size(); ++i)
      path = frames_[i].is_array ? fmt::format("{}[{}]", path, frames_[i].index)
                                 : child_location(path, frames_[i].key);
    return path;
  }
  void value_done() {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
  }

  std::vector<Frame> frames_;
};

json parse_json_text(const std::string& text, const std::string& source) {
  try {
    DuplicateKeyGuard guard;
    return json::parse(text, std::ref(guard));
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the offending byte; report it as line:column.
    const size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n')
        ++line, column = 1;
      else
        ++column;
    }
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line L,
    // column C: "; keep what follows.
    std::string detail = e.what();
    const size_t column_at = detail.find("column ");
    const size_t colon = column_at == std::string::npos ? column_at : detail.find(": ", column_at);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
    throw TopologyError(fmt::format("{}:{}:{}", source.empty() ? "<input>" : source, line, column),
                        "invalid JSON: " + detail);
  }
}

// ---- pass 2: node descriptions -----------------------------------------------------------

struct NodeSpec {
  std::string location;  // JSON location, "root.children[1]"
  std::string name;      // as written; may hold {i}
  bool has_count = false;
  double written_count = 1;  // as written, for the size check
  uint64_t count = 1;        // the same, once the size check has passed
  Link link;
  std::optional<int64_t> rank;  // first copy's rank; copy i takes rank + i
  std::vector<NodeSpec> children;

  bool is_learner() const { return children.empty(); }
  // Name of copy `i`: {i} replaced by i, or i appended when the name has no {i}.
  std::string copy_name(uint64_t i) const {
    if (!has_count) return name;
    const std::string index = std::to_string(i);
    if (name.find("{i}") == std::string::npos) return name + index;
    std::string out;
    for (size_t pos = 0;;) {
      const size_t hit = name.find("{i}", pos);
      out.append(name, pos, hit == std::string::npos ? std::string::npos : hit - pos);
      if (hit == std::string::npos) return out;
      out += index;
      pos = hit + 3;
    }
  }
  std::string copy_location(uint64_t i) const {
    return has_count ? fmt::format("{} (copy {})", location, i) : location;
  }
};

// Levenshtein distance ignoring ASCII case, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (same(a[i - 1], b[j - 1]) ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

// Refuses keys outside `known`, suggesting the closest known one.
void check_fields(const json& object, const std::string& location,
                  std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string message = fmt::format("unknown field \"{}\"", key);
    std::string_view closest;
    size_t best = 3;  // suggest only within two edits
    for (std::string_view k : known) {
      const size_t d = edit_distance(key, k);
      if (d < best) best = d, closest = k;
    }
    if (!closest.empty()) message += fmt::format(" (did you mean \"{}\"?)", closest);
    std::string fields;
    for (std::string_view k : known) fields += (fields.empty() ? "" : ", ") + std::string(k);
    message += "; allowed here: " + fields;
    throw TopologyError(location.empty() ? std::string(kTopLevel) : location, message);
  }
}

const json& require(const json& object, const std::string& location, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end())
    throw TopologyError(location.empty() ? std::string(kTopLevel) : location,
                        fmt::format("missing field \"{}\"", key));
  return *it;
}

// "number 10", "string \"10\"", or just "array": containers are not printed (they may be
// large or deeply nested).
std::string shown(const json& value) {
  if (value.is_structured()) return value.type_name();
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return fmt::format("{} {}", value.type_name(), text);
}

void expect_type(const json& value, json::value_t type, const std::string& location,
                 std::string_view expected) {
  const bool ok = type == json::value_t::number_integer ? value.is_number() : value.type() == type;
  if (!ok) throw TopologyError(location, fmt::format("must be {}, got {}", expected, shown(value)));
}

// A whole JSON number (2 or 2.0) at least `minimum`. A double keeps any size the JSON can
// hold (exactly below 2^53), so that limits are checked against the value as written.
double whole_number(const json& value, const std::string& location, double minimum) {
  expect_type(value, json::value_t::number_integer, location, "a whole number");
  const double n = value.get<double>();
  if (!std::isfinite(n) || std::floor(n) != n)
    throw TopologyError(location, fmt::format("must be a whole number, got {}", value.dump()));
  if (n < minimum)
    throw TopologyError(location, fmt::format("must be at least {}, got {}", minimum, value.dump()));
  return n;
}

template <typename Parse>
double figure(const json& link, const std::string& location, std::string_view key, Parse parse) {
  const json& value = link.at(key);
  const std::string where = child_location(location, key);
  if (!value.is_string())
    throw TopologyError(where, fmt::format("must be a string with a unit such as {}, got {}",
                                           key == "bandwidth" ? "\"10 Gbit/s\"" : "\"5 us\"",
                                           shown(value)));
  try {
    return parse(value.get<std::string>());
  } catch (const std::invalid_argument& e) {
    throw TopologyError(where, e.what());
  }
}

Link parse_link(const json& value, const std::string& location) {
  expect_type(value, json::value_t::object, location, "an object with \"bandwidth\" and \"latency\"");
  check_fields(value, location, {"bandwidth", "latency"});
  require(value, location, "bandwidth");
  Link link;
  link.bandwidth = figure(value, location, "bandwidth", parse_bandwidth);
  if (value.contains("latency")) link.latency = figure(value, location, "latency", parse_latency);
  return link;
}

void check_name(const std::string& name, const std::string& location, bool has_count) {
  if (name.empty()) throw TopologyError(location, "a name cannot be empty");
  if (name.find('/') != std::string::npos)
    throw TopologyError(location, fmt::format("\"{}\" contains '/', which joins full names", name));
  const bool has_placeholder = name.find("{i}") != std::string::npos;
  if (has_placeholder && !has_count)
    throw TopologyError(location,
                        fmt::format("\"{}\" uses {{i}}, which needs \"count\" on the node", name));
  std::string rest = name;
  for (size_t hit; (hit = rest.find("{i}")) != std::string::npos;) rest.erase(hit, 3);
  if (rest.find_first_of("{}") != std::string::npos)
    throw TopologyError(location,
                        fmt::format("\"{}\" has braces other than the {{i}} placeholder", name));
}

NodeSpec parse_node(const json& value, const std::string& location, int depth) {
  const bool is_root = depth == 0;
  if (depth > kMaxDepth)
    throw TopologyError(location, fmt::format("the tree is nested more than {} levels deep", kMaxDepth));
  expect_type(value, json::value_t::object, location, "a node object");
  check_fields(value, location, {"name", "children", "link", "count", "rank"});

  NodeSpec spec;
  spec.location = location;
  const json& name = require(value, location, "name");
  expect_type(name, json::value_t::string, child_location(location, "name"), "a string");
  spec.name = name.get<std::string>();

  if (auto count = value.find("count"); count != value.end()) {
    const std::string where = child_location(location, "count");
    if (is_root) throw TopologyError(where, "the root is one node and cannot have a count");
    spec.has_count = true;
    spec.written_count = whole_number(*count, where, 1);
    // Past the limit measure() refuses the tree before any copy is made.
    spec.count = static_cast<uint64_t>(std::min(spec.written_count, kMaxNodes + 1));
  }
  check_name(spec.name, child_location(location, "name"), spec.has_count);

  if (auto link = value.find("link"); link != value.end()) {
    const std::string where = child_location(location, "link");
    if (is_root) throw TopologyError(where, "the root has no parent, so it has no link");
    spec.link = parse_link(*link, where);
  } else if (!is_root) {
    throw TopologyError(location, "missing field \"link\" (every node but the root has a link "
                                  "to its parent)");
  }

  if (auto children = value.find("children"); children != value.end()) {
    const std::string where = child_location(location, "children");
    expect_type(*children, json::value_t::array, where, "an array of nodes");
    if (children->empty())
      throw TopologyError(where, "is empty; leave \"children\" out for a learner");
    spec.children.reserve(children->size());
    for (size_t i = 0; i < children->size(); ++i)
      spec.children.push_back(
          parse_node((*children)[i], fmt::format("{}[{}]", where, i), depth + 1));
  }

  if (auto rank = value.find("rank"); rank != value.end()) {
    const std::string where = child_location(location, "rank");
    if (!spec.is_learner())
      throw TopologyError(where, "only learners (nodes without children) have a rank");
    // Any rank past the node limit is out of range; the clamp only keeps it representable.
    spec.rank = static_cast<int64_t>(std::min(whole_number(*rank, where, 0), 1e18));
  }
  return spec;
}

// ---- pass 3: sizes, names, ranks, graph --------------------------------------------------

struct Size {
  double nodes = 0;
  double learners = 0;
  double ranked = 0;  // learners with an explicit rank
  const NodeSpec* some_ranked = nullptr;
  const NodeSpec* some_unranked = nullptr;
};

// What the subtree of `spec` expands to, all copies included. Doubles: exact below 2^53, and
// past the limit only the order of magnitude matters for the message.
void measure(const NodeSpec& spec, Size& total, double multiplier) {
  const double copies = multiplier * spec.written_count;
  total.nodes += copies;
  if (spec.is_learner()) {
    total.learners += copies;
    if (spec.rank) {
      total.ranked += copies;
      if (!total.some_ranked) total.some_ranked = &spec;
    } else if (!total.some_unranked) {
      total.some_unranked = &spec;
    }
  }
  for (const NodeSpec& child : spec.children) measure(child, total, copies);
}

// Sibling names after expansion must differ: "a1" next to "a" with count 2 collides.
void check_sibling_names(const NodeSpec& spec) {
  if (spec.children.size() > 1 || (spec.children.size() == 1 && spec.children[0].has_count)) {
    std::unordered_map<std::string, std::pair<const NodeSpec*, uint64_t>> seen;
    for (const NodeSpec& child : spec.children) {
      for (uint64_t i = 0; i < child.count; ++i) {
        auto [it, fresh] = seen.try_emplace(child.copy_name(i), &child, i);
        if (fresh) continue;
        const auto& [first, first_copy] = it->second;
        throw TopologyError(child.copy_location(i),
                            fmt::format("the name \"{}\" is already used by a sibling at {}; "
                                        "names must be unique among siblings",
                                        it->first, first->copy_location(first_copy)));
      }
    }
  }
  for (const NodeSpec& child : spec.children) check_sibling_names(child);
}

// Fills a graph whose vertices are allocated already; node ids follow depth-first order.
class GraphBuilder {
 public:
  GraphBuilder(TopoGraph& graph, int learners, bool explicit_ranks)
      : graph_(graph), explicit_ranks_(explicit_ranks), rank_owner_(learners) {}

  void add(const NodeSpec& spec, NodeId parent, uint64_t copy) {
    const NodeId id = next_++;
    TopoNodeProps& props = graph_[id];
    props.name = spec.copy_name(copy);
    props.link = spec.link;
    if (parent >= 0) boost::add_edge(parent, id, spec.link, graph_);
    if (spec.is_learner()) {
      props.rank = explicit_ranks_ ? assign_explicit_rank(spec, copy) : next_rank_++;
      return;
    }
    for (const NodeSpec& child : spec.children)
      for (uint64_t i = 0; i < child.count; ++i) add(child, id, i);
  }

 private:
  int assign_explicit_rank(const NodeSpec& spec, uint64_t copy) {
    const int learners = static_cast<int>(rank_owner_.size());
    const std::string where = child_location(spec.location, "rank");
    const int64_t rank = *spec.rank + static_cast<int64_t>(copy);
    if (rank >= learners)
      throw TopologyError(where,
                          fmt::format("rank {}{} is outside 0..{}: ranks must be a permutation "
                                      "of 0..P-1 and there are {} learners",
                                      rank, spec.has_count ? fmt::format(" (copy {})", copy) : "",
                                      learners - 1, learners));
    auto& owner = rank_owner_[rank];
    if (owner.first)
      throw TopologyError(where,
                          fmt::format("rank {}{} is already taken by {}: ranks must be a "
                                      "permutation of 0..{}",
                                      rank, spec.has_count ? fmt::format(" (copy {})", copy) : "",
                                      owner.first->copy_location(owner.second), learners - 1));
    owner = {&spec, copy};
    return static_cast<int>(rank);
  }

  TopoGraph& graph_;
  bool explicit_ranks_;
  std::vector<std::pair<const NodeSpec*, uint64_t>> rank_owner_;
  NodeId next_ = 0;
  int next_rank_ = 0;
};

// Returned by value into Topology's parameter: the Boost graph has no move constructor, so
// this relies on the named return value being built in place rather than copied.
TopoGraph build_graph(const NodeSpec& root, const Size& size, bool explicit_ranks) {
  TopoGraph graph(static_cast<size_t>(size.nodes));
  GraphBuilder(graph, static_cast<int>(size.learners), explicit_ranks).add(root, -1, 0);
  return graph;
}

}  // namespace

Topology parse_topology(const std::string& json_text, const std::string& source) {
  const json document = parse_json_text(json_text, source);
  expect_type(document, json::value_t::object, std::string(kTopLevel),
              "an object with \"name\" and \"root\"");
  check_fields(document, "", {"name", "description", "root"});
  const json& name = require(document, "", "name");
  expect_type(name, json::value_t::string, "name", "a string");
  if (name.get<std::string>().empty()) throw TopologyError("name", "cannot be empty");
  if (auto description = document.find("description"); description != document.end())
    expect_type(*description, json::value_t::string, "description", "a string");
  const NodeSpec root = parse_node(require(document, "", "root"), "root", 0);

  Size size;
  measure(root, size, 1);
  if (size.nodes > kMaxNodes)
    throw TopologyError("root", fmt::format("the tree expands to {} nodes, more than the limit of "
                                            "{}; is a count too large?",
                                            with_commas(size.nodes), with_commas(kMaxNodes)));
  if (size.learners < 2)
    throw TopologyError("root", fmt::format("the tree has {} learner; an all-reduce needs at least 2",
                                            with_commas(size.learners)));
  const bool explicit_ranks = size.ranked > 0;
  if (explicit_ranks && size.ranked < size.learners)
    throw TopologyError(size.some_unranked->location,
                        fmt::format("this learner has no \"rank\" but {} has one; give every "
                                    "learner a rank or none",
                                    size.some_ranked->location));
  check_sibling_names(root);

  return Topology(name.get<std::string>(), build_graph(root, size, explicit_ranks));
}

Topology load_topology(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw TopologyError(path, "is a directory, not a topology file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TopologyError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw TopologyError(path, "cannot read the file");
  return parse_topology(text.str(), path);
}

}  // namespace flexplan
