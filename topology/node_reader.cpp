// Reads a topology's JSON text in one pass over the parser's events. Plain values (a link, a
// name, a count) are collected into small JSON objects, one per node; when a node object ends
// it is checked and turned into a NodeSpec, and its object is dropped. So memory is one
// NodeSpec per written node, the time is linear in the text however many siblings an array
// holds, and nesting costs no stack. Past kMaxNesting open containers the reader only counts
// brackets (the parser's own stack is a bit per level), so any nesting is refused in linear
// time and bounded memory.
#include "topology/node_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "topology/printable.hpp"

namespace flexplan::detail {

namespace {

using nlohmann::json;

// Real clusters are a handful of levels deep; this only stops runaway nesting.
constexpr int kMaxDepth = 64;
// JSON containers open at once that the reader keeps. A tree kMaxDepth + 1 nodes deep opens
// 2 + 2 * 65 of them, so runaway node nesting is still reported as such; deeper than this the
// reader keeps nothing and every path it could spell out stays short.
constexpr size_t kMaxNesting = 256;

constexpr std::string_view kTopLevel = "top level";

std::string child_location(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// "file:line:column" of byte `offset` of `text`.
std::string text_location(const std::string& text, const std::string& source, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n')
      ++line, column = 1;
    else
      ++column;
  }
  return fmt::format("{}:{}:{}", source.empty() ? "<input>" : source, line, column);
}

// Spells out the JSON location of an open value, for an error.
class PathSource {
 public:
  virtual std::string path(size_t frame) const = 0;

 protected:
  ~PathSource() = default;
};

// A JSON location ("root.children[1].link"), spelled out only for an error: a key under a
// parent Where, or an open value of the reader.
class Where {
 public:
  Where(const PathSource& source, size_t frame) : source_(&source), frame_(frame) {}
  Where field(std::string_view key) const { return Where(this, key); }
  std::string str() const {
    if (source_) return source_->path(frame_);
    return child_location(parent_->str(), key_);
  }
  std::string text() const {  // str(), with "top level" for the document itself
    std::string s = str();
    return s.empty() ? std::string(kTopLevel) : s;
  }

 private:
  Where(const Where* parent, std::string_view key) : parent_(parent), key_(key) {}
  const PathSource* source_ = nullptr;
  size_t frame_ = 0;
  const Where* parent_ = nullptr;
  std::string_view key_;
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
void check_fields(const json& object, const Where& where,
                  std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.get_ref<const json::object_t&>()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string message = fmt::format("unknown field \"{}\"", escaped(key));
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
    throw TopologyError(where.text(), message);
  }
}

const json& require(const json& object, const Where& where, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end())
    throw TopologyError(where.text(), fmt::format("missing field \"{}\"", key));
  return *it;
}

// "number 10", "string \"10\"", or just "array": containers are not printed (they may be
// large or deeply nested).
std::string shown(const json& value) {
  if (value.is_structured()) return value.type_name();
  std::string text = value.dump();
  if (text.size() > 40) {
    size_t cut = 37;  // not inside a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
    text = text.substr(0, cut) + "...";
  }
  text = escaped(text);  // dump() escapes control characters, not bidirectional controls
  return fmt::format("{} {}", value.type_name(), text);
}

void expect_type(const json& value, json::value_t type, const Where& where,
                 std::string_view expected) {
  const bool ok = type == json::value_t::number_integer ? value.is_number() : value.type() == type;
  if (!ok)
    throw TopologyError(where.text(), fmt::format("must be {}, got {}", expected, shown(value)));
}

// A whole JSON number (2 or 2.0) at least `minimum`. A double keeps any size the JSON can
// hold (exactly below 2^53), so that limits are checked against the value as written.
double whole_number(const json& value, const Where& where, double minimum) {
  expect_type(value, json::value_t::number_integer, where, "a whole number");
  const double n = value.get<double>();
  if (!std::isfinite(n) || std::floor(n) != n)
    throw TopologyError(where.str(), fmt::format("must be a whole number, got {}", value.dump()));
  if (n < minimum)
    throw TopologyError(where.str(), fmt::format("must be at least {}, got {}", minimum, value.dump()));
  return n;
}

// Link figures, parsed once per distinct text: a big tree repeats a handful of them.
class FigureCache {
 public:
  template <typename Parse>
  double get(const json& link, const Where& where, std::string_view key, Parse parse) {
    const json& value = link.at(key);
    if (!value.is_string())
      throw TopologyError(where.field(key).str(),
                          fmt::format("must be a string with a unit such as {}, got {}",
                                      key == "bandwidth" ? "\"10 Gbit/s\"" : "\"5 us\"",
                                      shown(value)));
    const std::string& text = value.get_ref<const std::string&>();
    auto& known = key == "bandwidth" ? bandwidths_ : latencies_;
    if (auto hit = known.find(text); hit != known.end()) return hit->second;
    try {
      return known.emplace(text, parse(text)).first->second;
    } catch (const std::invalid_argument& e) {
      throw TopologyError(where.field(key).str(), e.what());
    }
  }

 private:
  std::unordered_map<std::string, double> bandwidths_, latencies_;
};

Link parse_link(const json& value, const Where& where, FigureCache& figures) {
  expect_type(value, json::value_t::object, where, "an object with \"bandwidth\" and \"latency\"");
  check_fields(value, where, {"bandwidth", "latency"});
  require(value, where, "bandwidth");
  Link link;
  link.bandwidth = figures.get(value, where, "bandwidth", parse_bandwidth);
  if (value.contains("latency")) link.latency = figures.get(value, where, "latency", parse_latency);
  return link;
}

// Names are printed one to a line, in trees, in messages and by inspect: a control character
// would break the line or drive the terminal, and a bidirectional control would reorder what
// follows it (a name could then pass for another).
void check_printable(const std::string& name, const Where& where) {
  if (const auto c = unprintable_code_point(name))
    throw TopologyError(where.str(), fmt::format("\"{}\" holds {}; names must be printable",
                                                 escaped(name), describe_unprintable(*c)));
}

void check_name(const std::string& name, const Where& where, bool has_count) {
  if (name.empty()) throw TopologyError(where.str(), "a name cannot be empty");
  check_printable(name, where);
  if (name.find('/') != std::string::npos)
    throw TopologyError(where.str(),
                        fmt::format("\"{}\" contains '/', which joins full names", name));
  const bool has_placeholder = name.find("{i}") != std::string::npos;
  if (has_placeholder && !has_count)
    throw TopologyError(where.str(),
                        fmt::format("\"{}\" uses {{i}}, which needs \"count\" on the node", name));
  if (name.find_first_of("{}") == std::string::npos) return;
  std::string rest = name;
  for (size_t hit; (hit = rest.find("{i}")) != std::string::npos;) rest.erase(hit, 3);
  if (rest.find_first_of("{}") != std::string::npos)
    throw TopologyError(where.str(),
                        fmt::format("\"{}\" has braces other than the {{i}} placeholder", name));
}

// The node object `fields` (everything but its children, which are read already) as a
// NodeSpec.
NodeSpec make_node(const json& fields, bool children_read, std::vector<NodeSpec>&& children,
                   const Where& where, bool is_root, FigureCache& figures) {
  check_fields(fields, where, {"name", "children", "link", "count", "rank"});
  NodeSpec spec;
  const json& name = require(fields, where, "name");
  expect_type(name, json::value_t::string, where.field("name"), "a string");
  spec.name = name.get<std::string>();

  if (auto count = fields.find("count"); count != fields.end()) {
    const Where at = where.field("count");
    if (is_root) throw TopologyError(at.str(), "the root is one node and cannot have a count");
    spec.has_count = true;
    spec.written_count = whole_number(*count, at, 1);
    // Past the limit the size check refuses the tree before any copy is made.
    spec.count = static_cast<uint64_t>(std::min(spec.written_count, kMaxNodes + 1));
  }
  check_name(spec.name, where.field("name"), spec.has_count);

  if (auto link = fields.find("link"); link != fields.end()) {
    const Where at = where.field("link");
    if (is_root) throw TopologyError(at.str(), "the root has no parent, so it has no link");
    spec.link = parse_link(*link, at, figures);
  } else if (!is_root) {
    throw TopologyError(where.str(), "missing field \"link\" (every node but the root has a "
                                     "link to its parent)");
  }

  if (auto listed = fields.find("children"); listed != fields.end()) {
    const Where at = where.field("children");
    if (!children_read) expect_type(*listed, json::value_t::array, at, "an array of nodes");
    if (children.empty())
      throw TopologyError(at.str(), "is empty; leave \"children\" out for a learner");
    spec.children = std::move(children);
  }

  if (auto rank = fields.find("rank"); rank != fields.end()) {
    const Where at = where.field("rank");
    if (!spec.is_learner())
      throw TopologyError(at.str(), "only learners (nodes without children) have a rank");
    const double written = whole_number(*rank, at, 0);
    // No tree has this many learners: refused here, as written.
    if (written >= kMaxNodes)
      throw TopologyError(at.str(), fmt::format("rank {} is outside 0..P-1: a tree has at most "
                                                "{} nodes",
                                                rank->dump(), with_commas(kMaxNodes)));
    spec.rank = static_cast<int64_t>(written);
  }
  return spec;
}

// The parser's event handler (nlohmann::json's SAX interface).
class TreeReader : public PathSource {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  TreeReader(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  // After the parse: the top level's checks, then the first fault found in the nodes.
  TopologyText finish() {
    const Where top(*this, kDocument);
    const json& document = document_ ? *document_ : empty_;
    expect_type(document, json::value_t::object, top, "an object with \"name\" and \"root\"");
    check_fields(document, top, {"name", "description", "reduce_bandwidth", "hop_overhead", "root"});
    const json& name = require(document, top, "name");
    expect_type(name, json::value_t::string, top.field("name"), "a string");
    if (name.get<std::string>().empty()) throw TopologyError("name", "cannot be empty");
    check_printable(name.get<std::string>(), top.field("name"));
    if (auto description = document.find("description"); description != document.end())
      expect_type(*description, json::value_t::string, top.field("description"), "a string");
    const json& root = require(document, top, "root");
    if (!root_read_) expect_type(root, json::value_t::object, top.field("root"), "a node object");
    double reduce_bandwidth = 0;
    if (auto rate = document.find("reduce_bandwidth"); rate != document.end()) {
      expect_type(*rate, json::value_t::string, top.field("reduce_bandwidth"),
                  "a bandwidth string such as \"4 GB/s\"");
      try {
        reduce_bandwidth = parse_bandwidth(rate->get<std::string>());
      } catch (const std::invalid_argument& e) {
        throw TopologyError("reduce_bandwidth", e.what());
      }
    }
    std::optional<double> hop_overhead;
    if (auto cost = document.find("hop_overhead"); cost != document.end()) {
      expect_type(*cost, json::value_t::string, top.field("hop_overhead"), "a latency string such as \"40 us\"");
      try {
        hop_overhead = parse_latency(cost->get<std::string>());
      } catch (const std::invalid_argument& e) {
        throw TopologyError("hop_overhead", e.what());
      }
      if (*hop_overhead > Topology::kMaxHopOverhead)
        throw TopologyError("hop_overhead", fmt::format("\"{}\" is above {} s per hop, the most flexplan accepts",
                                                        cost->get<std::string>(), Topology::kMaxHopOverhead));
    }
    if (first_fault_) throw *first_fault_;
    TopologyText result{name.get<std::string>(), reduce_bandwidth, hop_overhead, std::move(root_)};
    return result;
  }

  bool null() { return skipped_ > 0 || value(json(nullptr)); }
  bool boolean(bool v) { return skipped_ > 0 || value(json(v)); }
  bool number_integer(number_integer_t v) { return skipped_ > 0 || value(json(v)); }
  bool number_unsigned(number_unsigned_t v) { return skipped_ > 0 || value(json(v)); }
  bool number_float(number_float_t v, const string_t&) { return skipped_ > 0 || value(json(v)); }
  bool string(string_t& v) { return skipped_ > 0 || value(json(std::move(v))); }
  bool binary(binary_t& v) { return skipped_ > 0 || value(json(std::move(v))); }

  bool start_object(std::size_t) {
    if (skip_nested()) return true;
    if (frames_.empty()) {
      document_ = std::make_unique<json>(json::object());
      frames_.push_back(Frame{Kind::Object, document_.get()});
      return true;
    }
    Frame& top = frames_.back();
    const bool is_root = frames_.size() == 1 && top.kind == Kind::Object && top.key == "root";
    if (top.kind == Kind::Children || is_root) {
      if (top.kind == Kind::Children) ++top.elements;
      if (is_root) (*top.container)["root"] = json();  // present; the node is read here
      Frame node{Kind::Node, nullptr};
      node.owned = std::make_unique<json>(json::object());
      node.container = node.owned.get();
      node.depth = is_root ? 0 : frames_[frames_.size() - 2].depth + 1;
      frames_.push_back(std::move(node));
      if (frames_.back().depth > kMaxDepth)
        note_fault([&] {
          return TopologyError(path(frames_.size() - 1),
                               fmt::format("the tree is nested more than {} levels deep", kMaxDepth));
        });
      return true;
    }
    json* object = add(json::object());
    frames_.push_back(Frame{Kind::Object, object});
    return true;
  }

  bool start_array(std::size_t) {
    if (skip_nested()) return true;
    if (frames_.empty()) {
      document_ = std::make_unique<json>(json::array());
      frames_.push_back(Frame{Kind::Array, document_.get()});
      return true;
    }
    Frame& top = frames_.back();
    if (top.kind == Kind::Node && top.key == "children") {
      (*top.container)["children"] = json();  // present; the nodes are read into the frame
      top.children_read = true;
      frames_.push_back(Frame{Kind::Children, nullptr});
      return true;
    }
    json* array = add(json::array());
    frames_.push_back(Frame{Kind::Array, array});
    return true;
  }

  bool key(string_t& key) {
    if (skipped_ > 0) return true;
    Frame& top = frames_.back();
    if (top.container->contains(key))
      throw TopologyError(child_location(path(frames_.size() - 1), escaped(key)),
                          fmt::format("the key \"{}\" appears twice", escaped(key)));
    top.key = std::move(key);
    return true;
  }

  bool end_object() {
    if (skipped_ > 0) return --skipped_, true;
    if (frames_.back().kind == Kind::Node) {
      const size_t at = frames_.size() - 1;
      Frame& node = frames_[at];
      NodeSpec spec;
      if (!first_fault_) {
        try {
          spec = make_node(*node.container, node.children_read, std::move(node.children),
                           Where(*this, at), node.depth == 0, figures_);
        } catch (const TopologyError& e) {
          note_fault([&] { return e; });
        }
      }
      frames_.pop_back();
      Frame& parent = frames_.back();
      if (parent.kind == Kind::Children) {
        if (!first_fault_) parent.children.push_back(std::move(spec));
      } else {
        root_ = std::make_unique<NodeSpec>(std::move(spec));
        root_read_ = true;
      }
      return true;
    }
    frames_.pop_back();
    return true;
  }

  bool end_array() {
    if (skipped_ > 0) return --skipped_, true;
    if (frames_.back().kind == Kind::Children) {
      std::vector<NodeSpec> children = std::move(frames_.back().children);
      frames_.pop_back();
      frames_.back().children = std::move(children);
      return true;
    }
    frames_.pop_back();
    return true;
  }

  // A syntax error, or a number too large for a double ("number overflow parsing '1e400'").
  bool parse_error(std::size_t position, const std::string& token, const json::exception& error) {
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line L,
    // column C: "; keep what follows.
    std::string detail = error.what();
    const size_t column_at = detail.find("column ");
    const size_t colon = column_at == std::string::npos ? column_at : detail.find(": ", column_at);
    if (colon != std::string::npos)
      detail = detail.substr(colon + 2);
    else if (const size_t bracket = detail.find("] "); bracket != std::string::npos)
      detail = detail.substr(bracket + 2);
    // `position` counts the bytes read, the offending one included; a number out of range is
    // located at its start.
    const bool whole_token = dynamic_cast<const json::out_of_range*>(&error) != nullptr;
    const size_t offset = whole_token && token.size() <= position ? position - token.size()
                          : position == 0                        ? 0
                                                                 : position - 1;
    // The detail quotes the input ("last read: '...'"), raw bytes and all.
    throw TopologyError(text_location(text_, source_, offset), "invalid JSON: " + escaped(detail));
  }

  // The JSON location of the value open in frame `frame` ("" for the document).
  std::string path(size_t frame) const override {
    if (frame == kDocument || frame == 0) return "";
    const Frame& parent = frames_[frame - 1];
    const std::string above = path(frame - 1);
    if (parent.kind == Kind::Children || parent.kind == Kind::Array)
      return fmt::format("{}[{}]", above, parent.elements - 1);
    return child_location(above, escaped(parent.key));
  }

 private:
  static constexpr size_t kDocument = ~size_t{0};

  // Object: an object of plain values (the top level, a link, or one inside a value);
  // Array: an array of plain values; Node: a node object, read into a NodeSpec when it ends;
  // Children: a node's "children" array, whose nodes are read one by one.
  enum class Kind { Object, Array, Node, Children };
  struct Frame {
    Frame(Kind k, json* c) : kind(k), container(c) {}
    Kind kind;
    json* container;              // Object, Array, Node: where plain values go
    std::unique_ptr<json> owned;  // Node: its own object
    std::string key;              // Object, Node: the key of the value being read
    size_t elements = 0;          // Array, Children: elements begun
    int depth = 0;                // Node: 0 for the root
    bool children_read = false;   // Node: its "children" array was read into `children`
    std::vector<NodeSpec> children;  // Node, Children: the nodes read
  };

  // Whether a container opening now lies past kMaxNesting, so that the reader skips it and
  // everything in it, counting brackets only. The first one skipped is the fault, located at
  // the value that holds it; none of the cost depends on how deep the nesting goes on.
  bool skip_nested() {
    if (skipped_ == 0 && frames_.size() < kMaxNesting) return false;
    if (skipped_++ == 0)
      note_fault([&] {
        return TopologyError(path(frames_.size() - 1),
                             fmt::format("the JSON is nested more than {} levels deep", kMaxNesting));
      });
    return true;
  }

  bool value(json&& v) {
    if (frames_.empty()) {
      document_ = std::make_unique<json>(std::move(v));
      return true;
    }
    if (frames_.back().kind == Kind::Children) {
      Frame& list = frames_.back();
      ++list.elements;
      note_fault([&] {
        return TopologyError(fmt::format("{}[{}]", path(frames_.size() - 1), list.elements - 1),
                             fmt::format("must be a node object, got {}", shown(v)));
      });
      return true;
    }
    add(std::move(v));
    return true;
  }

  // Puts a plain value into the open object or array; where it now lives.
  json* add(json&& v) {
    Frame& top = frames_.back();
    if (top.kind == Kind::Children) {
      // An array element of "children" that is an array: not a node; its contents go nowhere.
      ++top.elements;
      note_fault([&] {
        return TopologyError(fmt::format("{}[{}]", path(frames_.size() - 1), top.elements - 1),
                             fmt::format("must be a node object, got {}", shown(v)));
      });
      discarded_.push_back(std::make_unique<json>(std::move(v)));
      return discarded_.back().get();
    }
    if (top.container->is_array()) {
      ++top.elements;
      auto& array = top.container->get_ref<json::array_t&>();
      array.push_back(std::move(v));
      return &array.back();
    }
    return &((*top.container)[top.key] = std::move(v));
  }

  // Keeps the first fault only; `make` spells it out (its path costs time growing with the
  // depth) only when it is the first.
  template <typename Make>
  void note_fault(Make make) {
    if (!first_fault_) first_fault_ = make();
  }

  const std::string& text_;
  const std::string& source_;
  std::vector<Frame> frames_;
  std::unique_ptr<json> document_;
  const json empty_;
  std::vector<std::unique_ptr<json>> discarded_;
  size_t skipped_ = 0;  // containers open past kMaxNesting (skip_nested)
  bool root_read_ = false;
  std::unique_ptr<NodeSpec> root_;
  std::optional<TopologyError> first_fault_;
  FigureCache figures_;
};

// Every node's parent and index, once the tree has its final place in memory.
void link_parents(NodeSpec& spec) {
  for (size_t i = 0; i < spec.children.size(); ++i) {
    spec.children[i].parent = &spec;
    spec.children[i].index = i;
    link_parents(spec.children[i]);
  }
}

}  // namespace

std::string NodeSpec::location() const {
  return parent ? fmt::format("{}.children[{}]", parent->location(), index) : "root";
}

std::string NodeSpec::copy_name(uint64_t i) const {
  if (!has_count) return name;
  const std::string number = std::to_string(i);
  if (name.find("{i}") == std::string::npos) return name + number;
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = name.find("{i}", pos);
    out.append(name, pos, hit == std::string::npos ? std::string::npos : hit - pos);
    if (hit == std::string::npos) return out;
    out += number;
    pos = hit + 3;
  }
}

std::string NodeSpec::copy_location(uint64_t i) const {
  return has_count ? fmt::format("{} (copy {})", location(), i) : location();
}

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

TopologyText read_topology_text(const std::string& text, const std::string& source) {
  // The parser takes a NUL byte for the end of the text and would ignore what follows.
  if (const void* nul = std::memchr(text.data(), '\0', text.size()))
    throw TopologyError(
        text_location(text, source,
                      static_cast<size_t>(static_cast<const char*>(nul) - text.data())),
        "invalid JSON: a NUL byte, which JSON text cannot hold (is this a binary file?)");
  TreeReader reader(text, source);
  json::sax_parse(text, &reader);
  TopologyText result = reader.finish();
  link_parents(*result.root);
  return result;
}

}  // namespace flexplan::detail
