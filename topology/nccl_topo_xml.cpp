// NCCL topology XML, nvidia-smi topo -m text and hostfiles (nccl_topo_xml.hpp).
#include "topology/nccl_topo_xml.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "topology/import_error.hpp"
#include "topology/printable.hpp"
#include "topology/slurm_topology.hpp"

namespace flexplan {
namespace {

constexpr int kMaxXmlDepth = 256;
constexpr size_t kMaxXmlElements = 1'000'000;

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// A whole decimal number, or nothing.
std::optional<long long> whole_number(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> real_number(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

// Decodes the five predefined entities and numeric references below U+0080 (all a topology
// dump holds); anything else is an error.
std::string decode_entities(std::string_view raw, const std::string& source, int line) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const size_t semi = raw.find(';', i);
    if (semi == std::string_view::npos || semi - i > 8)
      throw ImportError(source, line, "an '&' that starts no entity (write &amp;)");
    const std::string_view entity = raw.substr(i + 1, semi - i - 1);
    if (entity == "amp") out += '&';
    else if (entity == "lt") out += '<';
    else if (entity == "gt") out += '>';
    else if (entity == "quot") out += '"';
    else if (entity == "apos") out += '\'';
    else if (entity.size() > 1 && entity[0] == '#') {
      const auto code = entity[1] == 'x' ? std::nullopt : whole_number(entity.substr(1));
      if (!code || *code <= 0 || *code >= 0x80)
        throw ImportError(source, line, fmt::format("the character reference &{}; is not supported", detail::escaped(entity)));
      out += static_cast<char>(*code);
    } else {
      throw ImportError(source, line, fmt::format("unknown entity &{};", detail::escaped(entity)));
    }
    i = semi;
  }
  return out;
}

}  // namespace

const std::string* XmlElement::attribute(std::string_view key) const {
  for (const auto& [name, value] : attributes)
    if (name == key) return &value;
  return nullptr;
}

XmlDocument parse_xml(std::string_view text, const std::string& source) {
  XmlDocument doc;
  std::vector<int> open;  // indices of the elements not yet closed
  bool root_closed = false;
  int line = 1;
  size_t i = 0;
  auto advance_to = [&](size_t to) {
    line += static_cast<int>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i),
                                        text.begin() + static_cast<std::ptrdiff_t>(std::min(to, text.size())), '\n'));
    i = to;
  };
  auto fail = [&](const std::string& what) -> ImportError { return ImportError(source, line, what); };
  while (i < text.size()) {
    if (text[i] != '<') {
      const size_t next = std::min(text.find('<', i), text.size());
      const std::string_view content = text.substr(i, next - i);
      if (open.empty() && !std::all_of(content.begin(), content.end(), is_space)) {
        // Skip to the text itself, so that the line is right.
        size_t first = i;
        while (is_space(text[first])) ++first;
        advance_to(first);
        throw fail(root_closed ? "text after the root element" : "text before the root element");
      }
      advance_to(next);
      continue;
    }
    if (text.substr(i, 4) == "<!--") {
      const size_t end = text.find("-->", i + 4);
      if (end == std::string_view::npos) throw fail("a comment '<!--' is never closed");
      advance_to(end + 3);
      continue;
    }
    if (text.substr(i, 2) == "<?" || text.substr(i, 2) == "<!") {
      const size_t end = text.find('>', i);
      if (end == std::string_view::npos) throw fail("a '<?' or '<!' is never closed");
      advance_to(end + 1);
      continue;
    }
    if (text.substr(i, 2) == "</") {
      size_t j = i + 2;
      while (j < text.size() && is_name_char(text[j])) ++j;
      const std::string_view name = text.substr(i + 2, j - i - 2);
      while (j < text.size() && is_space(text[j])) ++j;
      if (j >= text.size() || text[j] != '>') throw fail(fmt::format("the closing tag </{}> is not closed by '>'", detail::escaped(name)));
      if (open.empty()) throw fail(fmt::format("</{}> closes nothing", detail::escaped(name)));
      const auto& element = doc.elements[static_cast<size_t>(open.back())];
      if (name != element.name) {
        throw fail(fmt::format("</{}> closes <{}> opened on line {}", detail::escaped(name), element.name, element.line));
      }
      open.pop_back();
      if (open.empty()) root_closed = true;
      advance_to(j + 1);
      continue;
    }
    // An opening tag.
    if (root_closed) throw fail("a second root element (a document has one)");
    size_t j = i + 1;
    while (j < text.size() && is_name_char(text[j])) ++j;
    if (j == i + 1) throw fail("a '<' that starts no tag (write &lt;)");
    if (doc.elements.size() >= kMaxXmlElements) throw fail(fmt::format("more than {} elements", kMaxXmlElements));
    if (open.size() >= static_cast<size_t>(kMaxXmlDepth))
      throw fail(fmt::format("elements nested more than {} deep", kMaxXmlDepth));
    XmlElement element;
    element.name = std::string(text.substr(i + 1, j - i - 1));
    element.line = line;
    element.parent = open.empty() ? -1 : open.back();
    bool self_closing = false;
    advance_to(j);
    while (true) {
      while (i < text.size() && is_space(text[i])) advance_to(i + 1);
      if (i >= text.size()) throw fail(fmt::format("the tag <{}> is never closed by '>'", element.name));
      if (text[i] == '>') {
        advance_to(i + 1);
        break;
      }
      if (text.substr(i, 2) == "/>") {
        self_closing = true;
        advance_to(i + 2);
        break;
      }
      size_t k = i;
      while (k < text.size() && is_name_char(text[k])) ++k;
      if (k == i) throw fail(fmt::format("in <{}>: '{}' where an attribute name belongs", element.name, detail::escaped(text.substr(i, 1))));
      const std::string key(text.substr(i, k - i));
      size_t m = k;
      while (m < text.size() && is_space(text[m])) ++m;
      if (m >= text.size() || text[m] != '=') throw fail(fmt::format("in <{}>: attribute '{}' has no '=value'", element.name, key));
      ++m;
      while (m < text.size() && is_space(text[m])) ++m;
      if (m >= text.size() || (text[m] != '"' && text[m] != '\''))
        throw fail(fmt::format("in <{}>: the value of '{}' must be quoted", element.name, key));
      const size_t close = text.find(text[m], m + 1);
      if (close == std::string_view::npos) throw fail(fmt::format("in <{}>: the value of '{}' is never closed", element.name, key));
      const std::string_view raw = text.substr(m + 1, close - m - 1);
      if (raw.find('<') != std::string_view::npos) throw fail(fmt::format("in <{}>: the value of '{}' holds a '<'", element.name, key));
      if (element.attribute(key)) throw fail(fmt::format("in <{}>: attribute '{}' is given twice", element.name, key));
      element.attributes.emplace_back(key, decode_entities(raw, source, line));
      advance_to(close + 1);
    }
    const int index = static_cast<int>(doc.elements.size());
    if (element.parent >= 0) doc.elements[static_cast<size_t>(element.parent)].children.push_back(index);
    doc.elements.push_back(std::move(element));
    if (self_closing) {
      if (open.empty()) root_closed = true;
    } else {
      open.push_back(index);
    }
  }
  if (!open.empty()) {
    const auto& element = doc.elements[static_cast<size_t>(open.back())];
    throw ImportError(source, element.line, fmt::format("<{}> is never closed", element.name));
  }
  if (doc.elements.empty()) throw ImportError(source, 0, "no XML element in it");
  return doc;
}

// ---- NCCL ------------------------------------------------------------------------------------

double nvlink_bandwidth_per_link(int sm) {
  const double gb = sm >= 100 ? 40.1 : sm >= 90 ? 20.6 : sm == 86 ? 12.0 : sm >= 80 ? 20.0 : sm >= 70 ? 20.0
                  : sm >= 60 ? 18.0 : 20.0;
  return gb * 1e9;
}

double pcie_bandwidth(std::string_view link_speed, int link_width) {
  // The leading "<rate> GT/s" token: "8 GT/s" (kernels up to 5.6) or "8.0 GT/s PCIe".
  while (!link_speed.empty() && is_space(link_speed.front())) link_speed.remove_prefix(1);
  const std::string_view rate = link_speed.substr(0, link_speed.find(' '));
  const auto value = real_number(rate);
  if (!value || link_width <= 0 || link_speed.find("GT/s") == std::string_view::npos) return 0;
  // NCCL's figures in 100 Mbit/s per lane; each generation from 2.5 GT/s doubles.
  double per_lane = 0;
  for (const auto& [gts, figure] : {std::pair{2.5, 15.0}, {5.0, 30.0}, {8.0, 60.0}, {16.0, 120.0}, {32.0, 240.0}, {64.0, 480.0}})
    if (*value == gts) per_lane = figure;
  if (per_lane == 0) return 0;
  return link_width * per_lane / 80.0 * 1e9;
}

namespace {

int int_attribute(const XmlElement& e, std::string_view key, const std::string& source, bool required) {
  const std::string* value = e.attribute(key);
  if (!value) {
    if (required) throw ImportError(source, e.line, fmt::format("<{}> has no {}= attribute", e.name, key));
    return 0;
  }
  const auto number = whole_number(*value);
  if (!number || *number < 0 || *number > 1'000'000)
    throw ImportError(source, e.line, fmt::format("<{}> {}=\"{}\": expected a whole number from 0 to 1000000", e.name, key,
                                                  detail::escaped(*value)));
  return static_cast<int>(*number);
}

}  // namespace

NcclMachine parse_nccl_topology(std::string_view text, const std::string& source) {
  const XmlDocument doc = parse_xml(text, source);
  const XmlElement& root = doc.elements[0];
  if (root.name != "system")
    throw ImportError(source, root.line, fmt::format("the root element is <{}>; an NCCL topology dump's is <system>", root.name));
  NcclMachine machine;
  machine.source = source;
  std::set<int> devs;
  for (const auto& e : doc.elements) {
    if (e.name == "gpu") {
      NcclGpu gpu;
      gpu.line = e.line;
      gpu.dev = int_attribute(e, "dev", source, true);
      if (!devs.insert(gpu.dev).second)
        throw ImportError(source, e.line, fmt::format("a second <gpu> with dev=\"{}\"", gpu.dev));
      gpu.sm = int_attribute(e, "sm", source, false);
      for (int c : e.children) {
        const auto& link = doc.elements[static_cast<size_t>(c)];
        if (link.name == "nvlink") gpu.nvlinks += int_attribute(link, "count", source, true);
      }
      if (gpu.nvlinks > 0) {
        if (gpu.sm == 0)
          throw ImportError(source, e.line, "a <gpu> with NVLinks but no sm= attribute (the SM version sets each link's bandwidth)");
        gpu.nvlink_bandwidth = gpu.nvlinks * nvlink_bandwidth_per_link(gpu.sm);
      }
      if (e.parent >= 0 && doc.elements[static_cast<size_t>(e.parent)].name == "pci") {
        const auto& pci = doc.elements[static_cast<size_t>(e.parent)];
        gpu.pci_line = pci.line;
        if (const auto* bus = pci.attribute("busid")) gpu.busid = *bus;
        const std::string* speed = pci.attribute("link_speed");
        const int width = int_attribute(pci, "link_width", source, false);
        if (speed && width > 0) {
          gpu.pci_bandwidth = pcie_bandwidth(*speed, width);
          if (gpu.pci_bandwidth == 0)
            throw ImportError(source, pci.line, fmt::format("<pci> link_speed=\"{}\": not a PCIe rate NCCL knows "
                                                            "(2.5, 5, 8, 16, 32 or 64 GT/s)",
                                                            detail::escaped(*speed)));
        }
      }
      machine.gpus.push_back(gpu);
    } else if (e.name == "net") {
      NcclNic nic;
      nic.line = e.line;
      if (const auto* name = e.attribute("name")) nic.name = *name;
      const std::string* speed = e.attribute("speed");
      if (!speed) throw ImportError(source, e.line, "<net> has no speed= attribute (its rate in Mb/s)");
      const auto mbps = real_number(*speed);
      if (!mbps || *mbps <= 0 || *mbps > 1e9)
        throw ImportError(source, e.line, fmt::format("<net> speed=\"{}\": expected a positive rate in Mb/s such as 100000",
                                                      detail::escaped(*speed)));
      nic.speed = *mbps * 1e6 / 8;
      machine.nics.push_back(nic);
    }
  }
  if (machine.gpus.empty()) throw ImportError(source, root.line, "the <system> holds no <gpu>");
  return machine;
}

NcclMachine load_nccl_topology(const std::string& path) { return parse_nccl_topology(read_import_file(path), path); }

// ---- nvidia-smi topo -m -----------------------------------------------------------------------

int SmiTopology::nvlinks_of(size_t gpu) const {
  const auto& row = nvlinks[gpu];
  int sum = 0, peers = 0, first = -1;
  bool equal = true;
  for (size_t j = 0; j < row.size(); ++j) {
    if (j == gpu) continue;
    ++peers;
    sum += row[j];
    if (first < 0) first = row[j];
    equal = equal && row[j] == first;
  }
  if (peers >= 3 && equal && first > 0) return first;
  return sum;
}

namespace {

std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    if (is_space(line[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < line.size() && !is_space(line[end])) ++end;
    out.emplace_back(line.substr(i, end - i));
    i = end;
  }
  return out;
}

bool starts_with_word(const std::string& word, std::string_view prefix) {
  if (word.size() <= prefix.size() || word.compare(0, prefix.size(), prefix) != 0) return false;
  return std::all_of(word.begin() + static_cast<std::ptrdiff_t>(prefix.size()), word.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

SmiTopology parse_nvidia_smi_topology(std::string_view text, const std::string& source) {
  SmiTopology smi;
  smi.source = source;
  std::vector<std::string> columns;
  std::map<std::string, std::string> nic_names;  // legend: NIC0 -> mlx5_0
  std::vector<std::vector<std::string>> cells;
  int number = 0;
  bool in_legend = false;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    auto w = words(line);
    if (w.empty()) continue;
    if (w[0] == "Legend:" || w[0] == "NIC" ) {
      in_legend = true;
      continue;
    }
    if (in_legend) {
      if (w.size() == 2 && starts_with_word(w[0].substr(0, w[0].size() - 1), "NIC") && w[0].back() == ':')
        nic_names[w[0].substr(0, w[0].size() - 1)] = w[1];
      continue;
    }
    if (columns.empty()) {
      // The header: device columns up to "CPU Affinity".
      if (!starts_with_word(w[0], "GPU"))
        throw ImportError(source, number, fmt::format("expected the header row of nvidia-smi topo -m (GPU0 GPU1 ...), found '{}'",
                                                      detail::escaped(w[0])));
      for (const auto& word : w) {
        if (word == "CPU" || word == "NUMA" || word == "GPU" || word == "Affinity") break;
        columns.push_back(word);
      }
      continue;
    }
    const bool gpu_row = starts_with_word(w[0], "GPU");
    if (std::find(columns.begin(), columns.end(), w[0]) == columns.end())
      throw ImportError(source, number, fmt::format("row '{}' names no column of the header", detail::escaped(w[0])));
    // "X" may be printed padded (" X "); either way one word.
    if (w.size() < columns.size() + 1)
      throw ImportError(source, number, fmt::format("row '{}' has {} cells; the header has {} columns", w[0], w.size() - 1,
                                                    columns.size()));
    if (!gpu_row) continue;
    if (w[0] != fmt::format("GPU{}", smi.gpus.size()))
      throw ImportError(source, number, fmt::format("row '{}' where GPU{} was expected", w[0], smi.gpus.size()));
    smi.gpus.push_back(w[0]);
    smi.gpu_lines.push_back(number);
    cells.emplace_back(w.begin() + 1, w.begin() + 1 + static_cast<std::ptrdiff_t>(columns.size()));
  }
  if (columns.empty()) throw ImportError(source, 0, "no header row (GPU0 GPU1 ...): is this nvidia-smi topo -m output?");
  if (smi.gpus.empty()) throw ImportError(source, 0, "no GPU rows");
  for (const auto& c : columns) {
    if (starts_with_word(c, "GPU")) continue;
    smi.nics.push_back(nic_names.count(c) ? nic_names[c] : c);
  }
  const size_t n = smi.gpus.size();
  smi.nvlinks.assign(n, std::vector<int>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < columns.size(); ++c) {
      const std::string& cell = cells[i][c];
      int links = 0;
      if (cell.size() > 2 && cell.compare(0, 2, "NV") == 0) {
        const auto count = whole_number(std::string_view(cell).substr(2));
        if (!count || *count <= 0 || *count > 64)
          throw ImportError(source, smi.gpu_lines[i], fmt::format("cell '{}' in column {}: NV# needs a link count from 1 to 64",
                                                                  detail::escaped(cell), columns[c]));
        links = static_cast<int>(*count);
      } else if (cell != "X" && cell != "PIX" && cell != "PXB" && cell != "PHB" && cell != "NODE" && cell != "SYS" &&
                 cell != "SOC" && cell != "PXN" && cell != "NV" && cell != "C2C") {
        throw ImportError(source, smi.gpu_lines[i],
                          fmt::format("cell '{}' in column {}: expected X, NV#, PIX, PXB, PHB, NODE or SYS",
                                      detail::escaped(cell), columns[c]));
      }
      if (!starts_with_word(columns[c], "GPU")) continue;
      const size_t j = static_cast<size_t>(std::stoi(columns[c].substr(3)));
      if (j >= n) throw ImportError(source, smi.gpu_lines[i], fmt::format("column {} has no row", columns[c]));
      if ((cell == "X") != (i == j))
        throw ImportError(source, smi.gpu_lines[i], fmt::format("column {}: 'X' marks a GPU's own column only", columns[c]));
      smi.nvlinks[i][j] = links;
    }
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < i; ++j)
      if (smi.nvlinks[i][j] != smi.nvlinks[j][i])
        throw ImportError(source, smi.gpu_lines[i], fmt::format("GPU{} shows {} NVLinks to GPU{} but GPU{} shows {} back", i,
                                                                smi.nvlinks[i][j], j, j, smi.nvlinks[j][i]));
  return smi;
}

SmiTopology load_nvidia_smi_topology(const std::string& path) {
  return parse_nvidia_smi_topology(read_import_file(path), path);
}

// ---- hostfiles --------------------------------------------------------------------------------

std::vector<HostfileEntry> parse_hostfile(std::string_view text, const std::string& source) {
  std::vector<HostfileEntry> out;
  std::map<std::string, int> seen;
  int number = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto w = words(line);
    if (w.empty()) continue;
    HostfileEntry entry;
    entry.line = number;
    entry.host = w[0];
    auto slots_from = [&](std::string_view value, std::string_view what) {
      const auto n = whole_number(value);
      if (!n || *n < 1 || *n > 100000)
        throw ImportError(source, number, fmt::format("{}'{}': expected a whole number from 1 to 100000", what,
                                                      detail::escaped(value)));
      return static_cast<int>(*n);
    };
    if (const size_t colon = entry.host.find(':'); colon != std::string::npos) {  // MPICH: host:N
      entry.slots = slots_from(std::string_view(entry.host).substr(colon + 1), "slots ");
      entry.host.resize(colon);
    }
    if (entry.host.empty() || entry.host.find_first_of("/=") != std::string::npos)
      throw ImportError(source, number, fmt::format("'{}' is not a host name", detail::escaped(w[0])));
    for (size_t k = 1; k < w.size(); ++k) {
      const size_t eq = w[k].find('=');
      const std::string key = w[k].substr(0, eq);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots" && key != "max-slots"))
        throw ImportError(source, number, fmt::format("'{}': expected slots=N (or max_slots=N)", detail::escaped(w[k])));
      const int value = slots_from(std::string_view(w[k]).substr(eq + 1), key + "=");
      if (key == "slots") entry.slots = value;
    }
    auto [it, fresh] = seen.emplace(entry.host, number);
    if (!fresh)
      throw ImportError(source, number, fmt::format("host '{}' is already listed on line {}", detail::escaped(entry.host), it->second));
    out.push_back(entry);
  }
  if (out.empty()) throw ImportError(source, 0, "no host listed");
  return out;
}

std::vector<HostfileEntry> load_hostfile(const std::string& path) { return parse_hostfile(read_import_file(path), path); }

}  // namespace flexplan
