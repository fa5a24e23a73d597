// NCCL's topology XML, as NCCL_TOPO_DUMP_FILE writes it (<system><cpu><pci>...<gpu>, <nic><net>):
// the inside of one machine: its GPUs with their NVLink and PCIe figures, and its NICs' rates.
// Also the small XML reader it needs, and nvidia-smi's `topo -m` matrix, a simpler source of
// the same facts.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace flexplan {

// ---- XML --------------------------------------------------------------------------------------

// An element of a small XML document: attributes, children, and the line its tag opens on.
// Text, comments, processing instructions and DOCTYPE are skipped.
struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // in order, entities decoded
  std::vector<int> children;                                    // indices into XmlDocument::elements
  int parent = -1;
  int line = 0;
  const std::string* attribute(std::string_view key) const;
};

struct XmlDocument {
  std::vector<XmlElement> elements;  // elements[0] is the root
};

// Throws ImportError(source, line, ...) for malformed XML: a tag never closed, a closing tag
// that does not match, a bad or repeated attribute, text outside the root, nesting deeper than
// 256 elements, more than 1,000,000 elements.
XmlDocument parse_xml(std::string_view text, const std::string& source);

// ---- NCCL's figures ---------------------------------------------------------------------------

// Bandwidth of one NVLink in bytes/s by the GPU's SM version (compute capability x 10), as
// NCCL's tables give it: 18 GB/s for SM 6x, 20 for 7x and 8x (12 for SM 86), 20.6 for 9x, 40.1
// for 10x and later; NCCL's SM 80 figure where the version is unknown (0).
double nvlink_bandwidth_per_link(int sm);

// PCIe bandwidth in bytes/s from NCCL's XML attributes: `link_speed` ("8.0 GT/s PCIe", "16 GT/s")
// and `link_width` ("16"): width x the generation's rate per lane, as NCCL reckons it (Gen3 x16
// is 12 GB/s: 2.5 GT/s lanes give 0.1875 GB/s, each generation doubles). 0 when unknown.
double pcie_bandwidth(std::string_view link_speed, int link_width);

struct NcclGpu {
  int dev = -1;                // CUDA device number
  int sm = 0;                  // compute capability x 10 (0: not given)
  std::string busid;           // of the enclosing <pci>
  int nvlinks = 0;             // NVLinks in all, summed over its <nvlink count=...>
  double nvlink_bandwidth = 0; // bytes/s: nvlinks x nvlink_bandwidth_per_link(sm)
  double pci_bandwidth = 0;    // bytes/s of its own PCIe link (0: not given)
  int line = 0;
  int pci_line = 0;            // the <pci> whose link figures it has
};

struct NcclNic {
  std::string name;   // <net name=...>
  double speed = 0;   // bytes/s, from speed= in Mb/s
  int line = 0;
};

struct NcclMachine {
  std::string source;
  std::vector<NcclGpu> gpus;  // in document order
  std::vector<NcclNic> nics;  // every <net>, in document order
};

// Reads a topology dump. The root must be <system>; <gpu> elements need `dev` (and `sm` for
// NVLink figures), <net> elements a positive `speed` in Mb/s. Throws ImportError naming the
// line for malformed XML, a missing or non-numeric attribute, and a system without GPUs.
NcclMachine parse_nccl_topology(std::string_view text, const std::string& source);
NcclMachine load_nccl_topology(const std::string& path);

// ---- nvidia-smi topo -m -----------------------------------------------------------------------

struct SmiTopology {
  std::string source;
  std::vector<std::string> gpus;             // GPU0, GPU1, ... in row order
  std::vector<std::string> nics;             // NIC0 or mlx5_0 columns, with the legend's names
  std::vector<std::vector<int>> nvlinks;     // [i][j]: NV# between GPU i and GPU j, 0 for none
  std::vector<int> gpu_lines;                // the line of each GPU's row
  // NVLinks of GPU i in all. Where a GPU shows the same NV# to every other GPU of three or
  // more, they meet at NVSwitches and the GPU has that many links (nvidia-smi prints the
  // GPU's own count for each pair); otherwise its links are direct and are summed.
  int nvlinks_of(size_t gpu) const;
};

// Reads `nvidia-smi topo -m` output: the header row of GPUn/NICn/mlx columns, one row per
// device with X, NV#, PIX, PXB, PHB, NODE, SYS (or SOC) per column, an optional legend. Throws
// ImportError naming the line for a missing header, a row of the wrong length, an unknown cell
// or an asymmetric NVLink count.
SmiTopology parse_nvidia_smi_topology(std::string_view text, const std::string& source);
SmiTopology load_nvidia_smi_topology(const std::string& path);

// ---- hostfiles --------------------------------------------------------------------------------

struct HostfileEntry {
  std::string host;
  int slots = 0;  // 0: not given
  int line = 0;
};

// Open MPI's hostfile ("node01 slots=8 max_slots=8", '#' comments) or MPICH's ("node01:8").
// A host listed twice is an error, as are a bad slots value and unknown keys.
std::vector<HostfileEntry> parse_hostfile(std::string_view text, const std::string& source);
std::vector<HostfileEntry> load_hostfile(const std::string& path);

}  // namespace flexplan
