// MSCCL algorithm XML text, written and read back (msccl.hpp). The executors read it with a
// small hand-written reader, so the writer keeps to what that reader takes and the reader here
// refuses anything else: no XML declaration, no tabs, one tag per line, attributes separated by
// single spaces, double-quoted values.
#include <charconv>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "codegen/msccl.hpp"

namespace flexplan::codegen::msccl {

std::string_view to_string(StepType type) {
  switch (type) {
    case StepType::Send: return "s";
    case StepType::Recv: return "r";
    case StepType::RecvCopySend: return "rcs";
    case StepType::RecvReduceSend: return "rrs";
    case StepType::RecvReduceCopy: return "rrc";
    case StepType::RecvReduceCopySend: return "rrcs";
    case StepType::Copy: return "cpy";
    case StepType::Reduce: return "re";
    case StepType::Nop: return "nop";
  }
  return "?";
}

std::string_view to_string(Buffer buffer) {
  switch (buffer) {
    case Buffer::Input: return "i";
    case Buffer::Output: return "o";
    case Buffer::Scratch: return "s";
  }
  return "?";
}

bool sends(StepType t) {
  return t == StepType::Send || t == StepType::RecvCopySend || t == StepType::RecvReduceSend ||
         t == StepType::RecvReduceCopySend;
}
bool receives(StepType t) {
  return t == StepType::Recv || t == StepType::RecvCopySend || t == StepType::RecvReduceSend ||
         t == StepType::RecvReduceCopy || t == StepType::RecvReduceCopySend;
}
bool fused(StepType t) {
  return t == StepType::RecvCopySend || t == StepType::RecvReduceSend || t == StepType::RecvReduceCopy ||
         t == StepType::RecvReduceCopySend;
}

std::string to_xml(const Algorithm& a) {
  std::string out = fmt::format(
      "<algo name=\"{}\" proto=\"{}\" nchannels=\"{}\" nchunksperloop=\"{}\" ngpus=\"{}\" coll=\"{}\" "
      "inplace=\"{}\" outofplace=\"{}\" minBytes=\"{}\" maxBytes=\"{}\">\n",
      a.name, a.protocol, a.channels, a.chunks_per_loop, a.world, a.collective, a.in_place ? 1 : 0,
      a.out_of_place ? 1 : 0, a.min_bytes, a.max_bytes);
  for (const Gpu& gpu : a.gpus) {
    out += fmt::format("  <gpu id=\"{}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"{}\">\n", gpu.id,
                       gpu.input_chunks, gpu.output_chunks, gpu.scratch_chunks);
    for (const ThreadBlock& tb : gpu.threadblocks) {
      out += fmt::format("    <tb id=\"{}\" send=\"{}\" recv=\"{}\" chan=\"{}\">\n", tb.id, tb.send, tb.recv,
                         tb.channel);
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const Step& step = tb.steps[s];
        out += fmt::format(
            "      <step s=\"{}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" dstoff=\"{}\" "
            "cnt=\"{}\" depid=\"{}\" deps=\"{}\" hasdep=\"{}\"/>\n",
            s, to_string(step.type), to_string(step.src), step.src_offset, to_string(step.dst),
            step.dst_offset, step.count, step.depend_tb, step.depend_step, step.has_dependents ? 1 : 0);
      }
      out += "    </tb>\n";
    }
    out += "  </gpu>\n";
  }
  out += "</algo>\n";
  return out;
}

namespace {

struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<std::unique_ptr<Element>> children;
  size_t line = 0;
};

[[noreturn]] void fail(size_t line, const std::string& what) {
  throw FormatError(fmt::format("line {}: {}", line, what));
}

// One tag, the whole of one line (leading spaces stripped). Returns nullptr for a closing tag
// (whose name goes to `closing`).
std::unique_ptr<Element> parse_tag(std::string_view text, size_t line, bool& self_closing,
                                   std::string& closing) {
  self_closing = false;
  closing.clear();
  if (text.size() < 2 || text.front() != '<') fail(line, "expected a tag starting with '<'");
  const size_t close = text.find('>');
  if (close == std::string_view::npos)
    fail(line, "tag not closed on its line (the executors' reader needs one tag per line)");
  if (close + 1 != text.size()) fail(line, "text after the tag (one tag per line)");
  std::string_view body = text.substr(1, close - 1);
  if (!body.empty() && body.front() == '/') {
    closing = std::string(body.substr(1));
    if (closing.empty() || closing.find(' ') != std::string::npos) fail(line, "malformed closing tag");
    return nullptr;
  }
  if (!body.empty() && body.back() == '/') {
    self_closing = true;
    body.remove_suffix(1);
  }
  auto element = std::make_unique<Element>();
  element->line = line;
  size_t at = body.find(' ');
  element->name = std::string(body.substr(0, at));
  if (element->name.empty()) fail(line, "empty tag name");
  while (at != std::string_view::npos) {
    if (at + 1 >= body.size() || body[at + 1] == ' ')
      fail(line, "attributes must be separated by single spaces");
    const size_t eq = body.find('=', at + 1);
    if (eq == std::string_view::npos) fail(line, "attribute without a value");
    const std::string key(body.substr(at + 1, eq - at - 1));
    if (key.empty() || key.find(' ') != std::string::npos) fail(line, "malformed attribute name");
    if (eq + 1 >= body.size()) fail(line, fmt::format("attribute {} has no value", key));
    if (body[eq + 1] == '\'') fail(line, fmt::format("attribute {} is single-quoted; the executors' reader needs double quotes", key));
    if (body[eq + 1] != '"') fail(line, fmt::format("attribute {} is not quoted", key));
    const size_t end = body.find('"', eq + 2);
    if (end == std::string_view::npos) fail(line, fmt::format("attribute {}: unterminated value", key));
    const std::string value(body.substr(eq + 2, end - eq - 2));
    if (key.size() > 254 || value.size() > 254) fail(line, "a name or value longer than 254 characters");
    element->attributes.push_back({key, value});
    at = end + 1;
    if (at == body.size()) break;
    if (body[at] != ' ') fail(line, "attributes must be separated by single spaces");
  }
  if (element->attributes.size() > 16) fail(line, "more than 16 attributes");
  return element;
}

std::unique_ptr<Element> parse_tree(std::string_view text) {
  std::vector<Element*> open;
  std::unique_ptr<Element> root;
  size_t line = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view content = text.substr(start, end - start);
    ++line;
    start = end + 1;
    if (!content.empty() && content.back() == '\r') content.remove_suffix(1);
    if (content.find('\t') != std::string_view::npos)
      fail(line, "a tab; the executors' reader accepts only spaces and newlines between tags");
    const size_t first = content.find_first_not_of(' ');
    if (first == std::string_view::npos) continue;
    content.remove_prefix(first);
    if (content.substr(0, 2) == "<?") fail(line, "an XML declaration; the executors' reader refuses it");
    if (content.substr(0, 4) == "<!--") {
      if (content.size() < 7 || content.substr(content.size() - 3) != "-->") fail(line, "comment not closed on its line");
      continue;
    }
    bool self_closing = false;
    std::string closing;
    auto element = parse_tag(content, line, self_closing, closing);
    if (!element) {
      if (open.empty() || open.back()->name != closing)
        fail(line, fmt::format("closing tag </{}> does not match", closing));
      open.pop_back();
      continue;
    }
    Element* raw = element.get();
    if (open.empty()) {
      if (root) fail(line, "a second top-level element");
      root = std::move(element);
    } else {
      open.back()->children.push_back(std::move(element));
    }
    if (!self_closing) open.push_back(raw);
  }
  if (!open.empty()) fail(line, fmt::format("<{}> is never closed", open.back()->name));
  if (!root) fail(line, "no element");
  return root;
}

const std::string& attribute(const Element& e, const std::string& key) {
  for (const auto& [k, v] : e.attributes)
    if (k == key) return v;
  fail(e.line, fmt::format("<{}> lacks the attribute {} (the executors require it)", e.name, key));
}

int64_t integer(const Element& e, const std::string& key) {
  const std::string& text = attribute(e, key);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    fail(e.line, fmt::format("<{}> {}=\"{}\" is not an integer", e.name, key, text));
  return value;
}

int32_t int32(const Element& e, const std::string& key) {
  const int64_t value = integer(e, key);
  if (value < INT32_MIN || value > INT32_MAX) fail(e.line, fmt::format("<{}> {} out of range", e.name, key));
  return static_cast<int32_t>(value);
}

Buffer buffer(const Element& e, const std::string& key) {
  const std::string& text = attribute(e, key);
  if (text == "i") return Buffer::Input;
  if (text == "o") return Buffer::Output;
  if (text == "s") return Buffer::Scratch;
  fail(e.line, fmt::format("<{}> {}=\"{}\": a buffer is i, o or s", e.name, key, text));
}

StepType step_type(const Element& e) {
  const std::string& text = attribute(e, "type");
  for (const StepType t : {StepType::Send, StepType::Recv, StepType::RecvCopySend, StepType::RecvReduceSend,
                           StepType::RecvReduceCopy, StepType::RecvReduceCopySend, StepType::Copy,
                           StepType::Reduce, StepType::Nop})
    if (text == to_string(t)) return t;
  fail(e.line, fmt::format("unknown step type \"{}\"", text));
}

void expect_name(const Element& e, const char* name) {
  if (e.name != name) fail(e.line, fmt::format("expected <{}>, found <{}>", name, e.name));
}

}  // namespace

Algorithm parse_xml(std::string_view text) {
  const auto root = parse_tree(text);
  expect_name(*root, "algo");
  Algorithm a;
  a.name = attribute(*root, "name");
  a.protocol = attribute(*root, "proto");
  a.channels = int32(*root, "nchannels");
  a.chunks_per_loop = int32(*root, "nchunksperloop");
  a.world = int32(*root, "ngpus");
  a.collective = attribute(*root, "coll");
  a.in_place = integer(*root, "inplace") != 0;
  a.out_of_place = integer(*root, "outofplace") != 0;
  a.min_bytes = integer(*root, "minBytes");
  a.max_bytes = integer(*root, "maxBytes");
  for (const auto& g : root->children) {
    expect_name(*g, "gpu");
    Gpu gpu;
    gpu.id = int32(*g, "id");
    gpu.input_chunks = int32(*g, "i_chunks");
    gpu.output_chunks = int32(*g, "o_chunks");
    gpu.scratch_chunks = int32(*g, "s_chunks");
    for (const auto& t : g->children) {
      expect_name(*t, "tb");
      ThreadBlock tb;
      tb.id = int32(*t, "id");
      tb.send = int32(*t, "send");
      tb.recv = int32(*t, "recv");
      tb.channel = int32(*t, "chan");
      for (const auto& s : t->children) {
        expect_name(*s, "step");
        if (int32(*s, "s") != static_cast<int32_t>(tb.steps.size()))
          fail(s->line, fmt::format("step s=\"{}\" is not its position {} in the threadblock (the "
                                    "executors count steps by position)",
                                    attribute(*s, "s"), tb.steps.size()));
        Step step;
        step.type = step_type(*s);
        step.src = buffer(*s, "srcbuf");
        step.src_offset = int32(*s, "srcoff");
        step.dst = buffer(*s, "dstbuf");
        step.dst_offset = int32(*s, "dstoff");
        step.count = int32(*s, "cnt");
        step.depend_tb = int32(*s, "depid");
        step.depend_step = int32(*s, "deps");
        const int64_t hasdep = integer(*s, "hasdep");
        if (hasdep != 0 && hasdep != 1) fail(s->line, "hasdep must be 0 or 1");
        step.has_dependents = hasdep == 1;
        tb.steps.push_back(step);
      }
      gpu.threadblocks.push_back(std::move(tb));
    }
    a.gpus.push_back(std::move(gpu));
  }
  return a;
}

}  // namespace flexplan::codegen::msccl
