// The importer's readers (hostlists, Slurm topology.conf, NCCL topology XML, nvidia-smi topo -m,
// hostfiles, link overrides), the joining of them into a topology, and `flexplan topo import`.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "tests/unit/cli_run.hpp"
#include "topology/cluster_import.hpp"
#include "topology/hostlist.hpp"
#include "topology/import_error.hpp"
#include "topology/nccl_topo_xml.hpp"
#include "topology/slurm_topology.hpp"
#include "topology/topology.hpp"

namespace flexplan {
namespace {

using Names = std::vector<std::string>;
const std::string kFixtures = FLEXPLAN_SOURCE_DIR "/tests/fixtures/import/";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The message of the ImportError `f` throws, or "" (a failure) if it throws none.
template <typename F>
std::string import_error(F f) {
  try {
    f();
  } catch (const ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ImportError";
  return "";
}

template <typename F>
std::string hostlist_error(F f) {
  try {
    f();
  } catch (const HostlistError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no HostlistError";
  return "";
}

// ---- hostlists --------------------------------------------------------------------------------

TEST(Hostlist, EveryDocumentedForm) {
  EXPECT_EQ(expand_hostlist("node1"), Names{"node1"});
  EXPECT_EQ(expand_hostlist("node1,node2 node3\tnode4"), (Names{"node1", "node2", "node3", "node4"}));
  EXPECT_EQ(expand_hostlist("tux[0-2,12,20-21]"), (Names{"tux0", "tux1", "tux2", "tux12", "tux20", "tux21"}));
  EXPECT_EQ(expand_hostlist("node[01-03]"), (Names{"node01", "node02", "node03"}));
  EXPECT_EQ(expand_hostlist("node[08-10]"), (Names{"node08", "node09", "node10"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("node[1-2]-ib"), (Names{"node1-ib", "node2-ib"}));
  EXPECT_EQ(expand_hostlist("rack[1-2]-n[1-2]"), (Names{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(expand_hostlist("[1-2]x"), (Names{"1x", "2x"}));
  EXPECT_EQ(expand_hostlist("a[7],b[1-2],c"), (Names{"a7", "b1", "b2", "c"}));
  EXPECT_EQ(expand_hostlist("node1,,node2, "), (Names{"node1", "node2"}));
  EXPECT_EQ(expand_hostlist(""), Names{});
  // The 3-D prism: each digit position a range.
  EXPECT_EQ(expand_hostlist("bgl[00x11]"), (Names{"bgl00", "bgl01", "bgl10", "bgl11"}));
  EXPECT_EQ(expand_hostlist("bgl[123x234]").size(), 8u);
  EXPECT_EQ(expand_hostlist("bgl[000x333]").size(), 64u);
  EXPECT_EQ(expand_hostlist("bgl[000x333]").back(), "bgl333");
  // A name listed twice stays twice: callers decide what that means.
  EXPECT_EQ(expand_hostlist("a[1-2],a1").size(), 3u);
}

TEST(Hostlist, Errors) {
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[1-3"); }), "never closed"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node1-3]"); }), "without its '['"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[1-[2]]"); }), "cannot nest"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[]"); }), "empty brackets"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[1,,2]"); }), "empty entry"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[5-3]"); }), "runs down"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[a-c]"); }), "not a number"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[1-]"); }), "not a number"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("node[1-99999999999]"); }), "more than"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("a[1-2000]b[1-1000]"); }), "more than"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("bgl[12x3]"); }), "not a prism"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("bgl[21x12]"); }), "runs down"));
  EXPECT_TRUE(contains(hostlist_error([] { expand_hostlist("n[1234567890123456789]"); }), "digits"));
  // The position points at the problem.
  try {
    expand_hostlist("ok1,bad[3-1]");
    FAIL();
  } catch (const HostlistError& e) {
    EXPECT_EQ(e.position(), 8u);
  }
  EXPECT_TRUE(hostlist_contains("node[01-16]", "node07"));
  EXPECT_FALSE(hostlist_contains("node[01-16]", "node7"));
}

// ---- Slurm topology.conf ----------------------------------------------------------------------

TEST(SlurmTopology, ReadsTheFixture) {
  const SlurmTopology topo = load_slurm_topology(kFixtures + "topology.conf");
  ASSERT_EQ(topo.switches.size(), 5u);
  EXPECT_EQ(topo.switches[static_cast<size_t>(topo.top)].name, "spine");
  EXPECT_EQ(topo.switches[0].nodes, (Names{"dgx01", "dgx02"}));
  EXPECT_EQ(topo.switches[0].link_speed, "100");
  EXPECT_EQ(topo.switches[1].nodes, (Names{"ws1-ib", "ws3-ib"}));
  EXPECT_EQ(topo.switches[2].nodes, (Names{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(topo.switches[3].nodes, (Names{"solo1", "solo2"}));  // continued line
  EXPECT_EQ(topo.switches[3].line, 7);
  EXPECT_EQ(topo.switches[4].switches, (Names{"leaf0", "leaf1", "leaf2", "leaf3"}));
  EXPECT_EQ(topo.machines_in_order(),
            (Names{"dgx01", "dgx02", "ws1-ib", "ws3-ib", "rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2", "solo1", "solo2"}));
  EXPECT_EQ(topo.parent[0], 4);
}

TEST(SlurmTopology, Errors) {
  auto error = [](const std::string& text) {
    return import_error([&] { parse_slurm_topology(text, "t.conf"); });
  };
  EXPECT_EQ(error("SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodez=b1\n"),
            "t.conf:2: unknown key 'Nodez' (the tree plugin's keys: SwitchName, Switches, Nodes, LinkSpeed)");
  EXPECT_TRUE(contains(error("Nodes=a1\n"), "t.conf:1: a line without SwitchName="));
  EXPECT_TRUE(contains(error("SwitchName=s0 Nodes=a1\nSwitchName=s0 Nodes=a2\n"), "t.conf:2: switch 's0' is already defined on line 1"));
  EXPECT_TRUE(contains(error("SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=a2\n"),
                       "t.conf:2: machine 'a2' is already under switch 's0' (line 1)"));
  // A machine or switch named twice on one line (found by the fuzzer: the first message read a switch not yet stored).
  EXPECT_EQ(error("SwitchName=s0 Nodes=a[1-2],a2\n"), "t.conf:1: machine 'a2' is listed twice");
  EXPECT_EQ(error("SwitchName=t Switches=s0,s0\nSwitchName=s0 Nodes=a1\n"), "t.conf:1: switch 't' lists switch 's0' twice");
  EXPECT_TRUE(contains(error("\n\nSwitchName=s0 Nodes=a[1-\n"), "t.conf:3: Nodes=a[1-:"));
  EXPECT_TRUE(contains(error("SwitchName=top Switches=s[0-1]\nSwitchName=s0 Nodes=a1\n"),
                       "t.conf:1: switch 'top' lists switch 's1', which no line defines"));
  EXPECT_TRUE(contains(error("SwitchName=s0 Nodes=a1\nSwitchName=s1 Nodes=b1\n"), "2 switches are under no other"));
  EXPECT_TRUE(contains(error("SwitchName=a Switches=b\nSwitchName=b Switches=a\n"), "loop"));
  EXPECT_TRUE(contains(error("SwitchName=t Switches=x\nSwitchName=x\nSwitchName=a Switches=b\nSwitchName=b Switches=a\n"), "loop"));
  EXPECT_TRUE(contains(error("SwitchName=t Switches=a,b\nSwitchName=a Switches=c\nSwitchName=b Switches=c\nSwitchName=c\n"),
                       "t.conf:3: switch 'c' is already under switch 'a' (line 2)"));
  EXPECT_TRUE(contains(error("SwitchName=s0 SwitchName=s1\n"), "given twice"));
  EXPECT_TRUE(contains(error("SwitchName=s0 Nodes=\n"), "Nodes has no value"));
  EXPECT_TRUE(contains(error("SwitchName=s0 garbage\n"), "'garbage' is not KEY=VALUE"));
  EXPECT_TRUE(contains(error("# nothing\n"), "t.conf: no switch defined"));
  EXPECT_TRUE(contains(import_error([] { load_slurm_topology("/nonexistent/topology.conf"); }),
                       "/nonexistent/topology.conf: cannot open"));
}

// ---- XML and NCCL's dump ----------------------------------------------------------------------

TEST(Xml, ReadsElementsAttributesAndLines) {
  const XmlDocument doc = parse_xml("<?xml version=\"1.0\"?>\n<!-- c -->\n<a x='1' y=\"&lt;&amp;\">\n text <b/>\n<c z=\"2\"></c></a>\n", "d.xml");
  ASSERT_EQ(doc.elements.size(), 3u);
  EXPECT_EQ(doc.elements[0].name, "a");
  EXPECT_EQ(doc.elements[0].line, 3);
  EXPECT_EQ(*doc.elements[0].attribute("y"), "<&");
  EXPECT_EQ(doc.elements[1].name, "b");
  EXPECT_EQ(doc.elements[1].line, 4);
  EXPECT_EQ(doc.elements[2].parent, 0);
  EXPECT_EQ(doc.elements[2].line, 5);
}

TEST(Xml, Errors) {
  auto error = [](const std::string& text) { return import_error([&] { parse_xml(text, "d.xml"); }); };
  EXPECT_EQ(error("<a>\n<b>\n</a>\n"), "d.xml:3: </a> closes <b> opened on line 2");
  EXPECT_EQ(error("<a>\n<b/>\n"), "d.xml:1: <a> is never closed");
  EXPECT_TRUE(contains(error("<a x=1/>"), "d.xml:1: in <a>: the value of 'x' must be quoted"));
  EXPECT_TRUE(contains(error("<a x='1' x='2'/>"), "given twice"));
  EXPECT_TRUE(contains(error("<a/>\n<b/>"), "d.xml:2: a second root element"));
  EXPECT_TRUE(contains(error("\n\nstray <a/>"), "d.xml:3: text before the root element"));
  EXPECT_TRUE(contains(error("<a x='&bogus;'/>"), "unknown entity"));
  EXPECT_TRUE(contains(error("<a>\n<!-- open"), "d.xml:2: a comment"));
  EXPECT_TRUE(contains(error(""), "no XML element"));
  EXPECT_TRUE(contains(error(std::string(300, '<') ), "d.xml:1:"));
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "<a>";
  EXPECT_TRUE(contains(error(deep), "nested more than 256 deep"));
}

TEST(NcclTopology, Figures) {
  EXPECT_DOUBLE_EQ(nvlink_bandwidth_per_link(60), 18e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth_per_link(70), 20e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth_per_link(80), 20e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth_per_link(86), 12e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth_per_link(90), 20.6e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth_per_link(100), 40.1e9);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("8.0 GT/s PCIe", 16), 12e9);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("8 GT/s", 16), 12e9);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("16.0 GT/s PCIe", 16), 24e9);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("32.0 GT/s PCIe", 8), 24e9);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("2.5 GT/s PCIe", 1), 0.1875e9);
  EXPECT_EQ(pcie_bandwidth("7 GT/s", 16), 0);
  EXPECT_EQ(pcie_bandwidth("Unknown", 16), 0);
}

TEST(NcclTopology, ReadsTheDgxFixture) {
  const NcclMachine m = load_nccl_topology(kFixtures + "dgx-a100.xml");
  ASSERT_EQ(m.gpus.size(), 8u);
  ASSERT_EQ(m.nics.size(), 8u);
  for (const auto& gpu : m.gpus) {
    EXPECT_EQ(gpu.sm, 80);
    EXPECT_EQ(gpu.nvlinks, 12);
    EXPECT_DOUBLE_EQ(gpu.nvlink_bandwidth, 240e9);
    EXPECT_DOUBLE_EQ(gpu.pci_bandwidth, 24e9);
  }
  EXPECT_EQ(m.gpus[3].dev, 3);
  EXPECT_EQ(m.nics[0].name, "mlx5_0");
  EXPECT_DOUBLE_EQ(m.nics[0].speed, 25e9);  // 200000 Mb/s
}

TEST(NcclTopology, ReadsThePcieFixture) {
  const NcclMachine m = load_nccl_topology(kFixtures + "pcie-2gpu.xml");
  ASSERT_EQ(m.gpus.size(), 2u);
  EXPECT_EQ(m.gpus[0].nvlinks, 0);
  EXPECT_DOUBLE_EQ(m.gpus[0].pci_bandwidth, 12e9);
  EXPECT_EQ(m.gpus[1].line, 10);
  ASSERT_EQ(m.nics.size(), 1u);
  EXPECT_DOUBLE_EQ(m.nics[0].speed, 25e9 / 8);
}

TEST(NcclTopology, Errors) {
  auto error = [](const std::string& text) { return import_error([&] { parse_nccl_topology(text, "n.xml"); }); };
  EXPECT_TRUE(contains(error("<topology/>"), "n.xml:1: the root element is <topology>"));
  EXPECT_TRUE(contains(error("<system>\n</system>"), "n.xml:1: the <system> holds no <gpu>"));
  EXPECT_TRUE(contains(error("<system>\n<gpu sm='80'/></system>"), "n.xml:2: <gpu> has no dev= attribute"));
  EXPECT_TRUE(contains(error("<system>\n<gpu dev='x'/></system>"), "n.xml:2: <gpu> dev=\"x\": expected a whole number"));
  EXPECT_TRUE(contains(error("<system><gpu dev='0'/>\n<gpu dev='0'/></system>"), "n.xml:2: a second <gpu> with dev=\"0\""));
  EXPECT_TRUE(contains(error("<system><gpu dev='0'>\n<nvlink count='2'/></gpu></system>"), "n.xml:1: a <gpu> with NVLinks but no sm="));
  EXPECT_TRUE(contains(error("<system><gpu dev='0'/><nic>\n<net name='x'/></nic></system>"), "n.xml:2: <net> has no speed="));
  EXPECT_TRUE(contains(error("<system><gpu dev='0'/><nic>\n<net speed='fast'/></nic></system>"), "n.xml:2: <net> speed=\"fast\""));
  EXPECT_TRUE(contains(error("<system>\n<pci link_speed='9 GT/s' link_width='16'><gpu dev='0'/></pci></system>"),
                       "n.xml:2: <pci> link_speed=\"9 GT/s\""));
}

// ---- nvidia-smi topo -m -----------------------------------------------------------------------

TEST(NvidiaSmi, ReadsNvSwitchAndHybridCubeMesh) {
  const SmiTopology a100 = load_nvidia_smi_topology(kFixtures + "dgx-a100.smi.txt");
  ASSERT_EQ(a100.gpus.size(), 8u);
  EXPECT_EQ(a100.nics, (Names{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(a100.nvlinks[0][5], 12);
  EXPECT_EQ(a100.nvlinks_of(0), 12);  // NVSwitch: the GPU's own count
  EXPECT_EQ(a100.gpu_lines[2], 4);
  const SmiTopology v100 = load_nvidia_smi_topology(kFixtures + "dgx1-v100.smi.txt");
  ASSERT_EQ(v100.gpus.size(), 8u);
  EXPECT_TRUE(v100.nics.empty());
  for (size_t g = 0; g < 8; ++g) EXPECT_EQ(v100.nvlinks_of(g), 6) << g;  // direct links, summed
}

TEST(NvidiaSmi, Errors) {
  auto error = [](const std::string& text) { return import_error([&] { parse_nvidia_smi_topology(text, "s.txt"); }); };
  EXPECT_TRUE(contains(error("hello\n"), "s.txt:1: expected the header row"));
  EXPECT_TRUE(contains(error("\tGPU0\tGPU1\nGPU0\t X \tNV2\n"), "s.txt:2: column GPU1 has no row"));
  EXPECT_TRUE(contains(error("\tGPU0\tGPU1\nGPU0\t X \n"), "s.txt:2: row 'GPU0' has 1 cells; the header has 2 columns"));
  EXPECT_TRUE(contains(error("\tGPU0\tGPU1\nGPU0\t X \tWAT\nGPU1\tNV1\t X \n"), "s.txt:2: cell 'WAT' in column GPU1"));
  EXPECT_TRUE(contains(error("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV1\t X \n"), "s.txt:3: GPU1 shows 1 NVLinks to GPU0 but GPU0 shows 2 back"));
  EXPECT_TRUE(contains(error("\tGPU0\tGPU1\nGPU0\tNV1\tNV1\nGPU1\tNV1\t X \n"), "s.txt:2: column GPU0: 'X' marks"));
  EXPECT_TRUE(contains(error("\tGPU0\tGPU1\nGPU7\t X \tNV1\n"), "s.txt:2: row 'GPU7' names no column"));
  EXPECT_TRUE(contains(error("\tGPU0\tGPU1\nGPU0\t X \tNV0\nGPU1\tNV0\t X \n"), "NV# needs a link count"));
}

// ---- hostfiles and link overrides -------------------------------------------------------------

TEST(Hostfile, OpenMpiAndMpichForms) {
  const auto hosts = load_hostfile(kFixtures + "hostfile");
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].host, "dgx01");
  EXPECT_EQ(hosts[0].slots, 8);
  EXPECT_EQ(hosts[1].slots, 8);
  EXPECT_EQ(hosts[3].host, "ws3-ib");
  EXPECT_EQ(hosts[3].slots, 2);
  EXPECT_EQ(hosts[3].line, 5);
  auto error = [](const std::string& text) { return import_error([&] { parse_hostfile(text, "h"); }); };
  EXPECT_EQ(error("a slots=2\nb slots=0\n"), "h:2: slots='0': expected a whole number from 1 to 100000");
  EXPECT_TRUE(contains(error("a slots=2\na slots=3\n"), "h:2: host 'a' is already listed on line 1"));
  EXPECT_TRUE(contains(error("a cpus=3\n"), "h:1: 'cpus=3': expected slots=N"));
  EXPECT_TRUE(contains(error("a:x\n"), "h:1: slots 'x'"));
  EXPECT_TRUE(contains(error("# none\n"), "h: no host listed"));
}

TEST(LinkOverrides, Forms) {
  const auto links = parse_link_overrides(
      "# c\nleaf0=400Gbit/s,2us\nleaf[1-2] 100 Gbit/s 5 us\nleaf3=25Gbit/s\ns 10GB/s\n", "l.txt");
  ASSERT_EQ(links.size(), 4u);
  EXPECT_EQ(links[0].names, "leaf0");
  EXPECT_DOUBLE_EQ(links[0].bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(*links[0].latency, 2e-6);
  EXPECT_EQ(links[1].names, "leaf[1-2]");
  EXPECT_DOUBLE_EQ(links[1].bandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(*links[1].latency, 5e-6);
  EXPECT_EQ(links[1].source, "l.txt:3");
  EXPECT_FALSE(links[2].latency.has_value());
  EXPECT_DOUBLE_EQ(links[3].bandwidth, 10e9);
  auto error = [](const std::string& text) { return import_error([&] { parse_link_overrides(text, "l.txt"); }); };
  EXPECT_TRUE(contains(error("\ns0=fast\n"), "l.txt:2: 's0=fast':"));
  EXPECT_TRUE(contains(error("s0=10 gb/s\n"), "did you mean"));
  EXPECT_TRUE(contains(error("s[1-=10Gbit/s\n"), "l.txt:1:"));
  EXPECT_TRUE(contains(error("lonely\n"), "l.txt:1: 'lonely': expected NAMES BANDWIDTH"));
}

// ---- joining ----------------------------------------------------------------------------------

std::string fixture_text(const std::string& path) { return read_import_file(path); }

ImportOptions fixture_cluster() {
  ImportOptions options;
  options.slurm = load_slurm_topology(kFixtures + "topology.conf");
  options.hostfile = load_hostfile(kFixtures + "hostfile");
  options.hostfile_source = "hostfile";
  options.descriptions.push_back(parse_description_spec(DescriptionSpec::Kind::NcclXml, "dgx[01-02]=" + kFixtures + "dgx-a100.xml"));
  options.descriptions.push_back(parse_description_spec(DescriptionSpec::Kind::NcclXml, "ws[1,3]-ib=" + kFixtures + "pcie-2gpu.xml"));
  options.links = parse_link_overrides(fixture_text(kFixtures + "links.txt"), "links.txt");
  options.name = "fixture";
  return options;
}

TEST(ClusterImport, JoinsSlurmHostfileAndNcclXml) {
  ImportOptions options = fixture_cluster();
  // leaf3 holds none of the hostfile's machines, so the tree has no such switch.
  EXPECT_THROW(import_cluster(options), TopologyError) << "an override naming no node of the tree is refused";
  options.links.pop_back();
  const ImportResult result = import_cluster(options);
  EXPECT_EQ(result.machines, 4);
  EXPECT_EQ(result.learners, 20);
  EXPECT_EQ(result.switches, 3);  // spine, leaf0, leaf1: the hostfile's machines only
  EXPECT_EQ(result.defaults, 0);
  const Topology topo = parse_topology(result.json);
  EXPECT_EQ(topo.num_learners(), 20);
  EXPECT_EQ(topo.full_name(topo.learner_node(0)), "spine/leaf0/dgx01/gpu0");
  EXPECT_EQ(topo.full_name(topo.learner_node(19)), "spine/leaf1/ws3-ib/gpu1");
  const int dgx = topo.parent(topo.learner_node(0));
  EXPECT_DOUBLE_EQ(topo.uplink(dgx).bandwidth, 8 * 25e9);          // 8 NICs of 200 Gbit/s
  EXPECT_DOUBLE_EQ(topo.uplink(topo.learner_node(0)).bandwidth, 240e9);  // 12 NVLinks x 20 GB/s
  EXPECT_DOUBLE_EQ(topo.uplink(topo.learner_node(19)).bandwidth, 12e9);  // PCIe 3.0 x16
  EXPECT_DOUBLE_EQ(topo.uplink(topo.parent(dgx)).bandwidth, 50e9);       // leaf0 from links.txt
  EXPECT_DOUBLE_EQ(topo.uplink(topo.parent(dgx)).latency, 2e-6);
  bool leaf0 = false, gpus = false;
  for (const auto& link : result.links) {
    if (link.node == "spine/leaf0") leaf0 = link.bandwidth_source == "links.txt:2";
    if (link.node == "spine/leaf0/dgx01/gpu[0..7]") gpus = contains(link.bandwidth_source, "dgx-a100.xml:5 (12 NVLinks x 20 GB/s, SM 80)");
  }
  EXPECT_TRUE(leaf0);
  EXPECT_TRUE(gpus);
  EXPECT_TRUE(contains(result.notes.at(0), "LinkSpeed=100 ignored"));
}

TEST(ClusterImport, MissingFiguresRefusedUnlessDefaultsAllowed) {
  ImportOptions options;
  options.hosts = {"a", "b"};
  options.learners = 2;
  try {
    import_cluster(options);
    FAIL();
  } catch (const TopologyError& e) {
    EXPECT_TRUE(contains(e.what(), "the links of 2 learners of machine 'a'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "the uplink of machine 'b'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "--allow-defaults")) << e.what();
  }
  options.allow_defaults = true;
  const ImportResult result = import_cluster(options);
  EXPECT_EQ(result.defaults, 6);
  EXPECT_TRUE(contains(result.json, "measure me"));
  const Topology topo = parse_topology(result.json);
  EXPECT_DOUBLE_EQ(topo.uplink(topo.learner_node(0)).bandwidth, kDefaultLearnerBandwidth);
  EXPECT_DOUBLE_EQ(topo.uplink(topo.parent(topo.learner_node(0))).bandwidth, kDefaultMachineBandwidth);
  // Figures by hand leave nothing to default.
  options.allow_defaults = false;
  options.links = {parse_link_override("a,b=10Gbit/s", "--link")};
  options.learner_link = parse_link_override("learners=10GB/s,1us", "--learner-link");
  const ImportResult by_hand = import_cluster(options);
  EXPECT_EQ(by_hand.defaults, 0);
}

TEST(ClusterImport, SwitchDefaultIsTheSumOfItsChildren) {
  ImportOptions options;
  options.slurm = parse_slurm_topology("SwitchName=t Switches=s[0-1]\nSwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b1\n", "t.conf");
  options.learners = 1;
  options.links = {parse_link_override("a[1-2],b1=1Gbit/s", "--link")};
  options.learner_link = parse_link_override("x=1GB/s", "--learner-link");
  EXPECT_THROW(import_cluster(options), TopologyError);
  options.allow_defaults = true;
  const ImportResult result = import_cluster(options);
  EXPECT_EQ(result.defaults, 2);
  const Topology topo = parse_topology(result.json);
  EXPECT_DOUBLE_EQ(topo.uplink(topo.parent(topo.parent(topo.learner_node(0)))).bandwidth, 2 * 1.25e8);
}

TEST(ClusterImport, PerMachineFilesAndNvidiaSmi) {
  ImportOptions options;
  options.hosts = {"h1", "h2"};
  std::map<std::string, std::string> files = {
      {"dumps/h1.xml", fixture_text(kFixtures + "pcie-2gpu.xml")},
      {"dumps/h2.xml", fixture_text(kFixtures + "pcie-2gpu.xml")},
      {"smi.txt", fixture_text(kFixtures + "dgx1-v100.smi.txt")}};
  options.read_file = [&](const std::string& path) {
    if (!files.count(path)) throw ImportError(path, 0, "cannot open: No such file or directory");
    return files[path];
  };
  options.descriptions = {parse_description_spec(DescriptionSpec::Kind::NcclXml, "dumps/{host}.xml")};
  EXPECT_EQ(import_cluster(options).learners, 4);
  options.descriptions.push_back(parse_description_spec(DescriptionSpec::Kind::NvidiaSmi, "h2=smi.txt"));
  options.sm = 70;
  options.links = {parse_link_override("h2=100Gbit/s", "--link")};
  const ImportResult result = import_cluster(options);
  EXPECT_EQ(result.learners, 10);
  const Topology topo = parse_topology(result.json);
  EXPECT_DOUBLE_EQ(topo.uplink(topo.learner_node(2)).bandwidth, 6 * 20e9);  // DGX-1: 6 NVLinks x 20 GB/s
  options.hosts = {"h1", "h3"};
  options.descriptions.pop_back();
  EXPECT_TRUE(contains(import_error([&] { import_cluster(options); }), "dumps/h3.xml: cannot open"));
}

TEST(ClusterImport, HostsNotInTheSlurmTree) {
  ImportOptions options;
  options.slurm = parse_slurm_topology("SwitchName=s0 Nodes=a[1-2]\n", "t.conf");
  options.hostfile = parse_hostfile("a1 slots=2\n\nzz slots=2\n", "hosts");
  options.hostfile_source = "hosts";
  EXPECT_EQ(import_error([&] { import_cluster(options); }), "hosts:3: host 'zz' is under no switch of t.conf");
  options.hostfile.pop_back();
  options.hostfile.push_back({"a2", 0, 2});
  EXPECT_TRUE(contains(import_error([&] { import_cluster(options); }), "hosts:2: host 'a2' has no slots=N"));
}

// ---- the command ------------------------------------------------------------------------------

class TopoImportCli : public testing::ScratchDirTest {};

TEST_F(TopoImportCli, WritesATopologyThatPlans) {
  const std::string out = path("cluster.json");
  const auto run = testing::run_flexplan(
      "topo import --slurm '" + kFixtures + "topology.conf' --hostfile '" + kFixtures + "hostfile' --nccl-xml 'dgx[01-02]=" +
      kFixtures + "dgx-a100.xml' --nccl-xml 'ws[1,3]-ib=" + kFixtures + "pcie-2gpu.xml' --link leaf0=400Gbit/s,2us --link "
      "'leaf1=100Gbit/s' --name fixture -o '" + out + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "imported 3 switches, 4 machines, 20 learners")) << run.output;
  EXPECT_TRUE(contains(run.output, "--link leaf0=400Gbit/s,2us")) << run.output;
  EXPECT_TRUE(contains(run.output, "pcie-2gpu.xml:6 (PCIe)")) << run.output;
  EXPECT_TRUE(contains(run.output, "latency: default")) << run.output;
  EXPECT_TRUE(contains(run.output, "note: ")) << run.output;
  const auto plan = testing::run_flexplan("'" + out + "' -o '" + path("plan.bin") + "'");
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_TRUE(std::filesystem::exists(path("plan.bin")));
  // A missing figure is refused by default, written with --allow-defaults.
  const auto missing = testing::run_flexplan("topo import --hosts 'n[1-2]' --learners 2 -o '" + path("d.json") + "'");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "flexplan: error: topology: topo import: no source gives the bandwidth of")) << missing.output;
  const auto defaults =
      testing::run_flexplan("topo import --hosts 'n[1-2]' --learners 2 --allow-defaults -o '" + path("d.json") + "'");
  EXPECT_EQ(defaults.exit_code, 0) << defaults.output;
  EXPECT_TRUE(contains(defaults.output, "default: measure me")) << defaults.output;
  EXPECT_EQ(testing::run_flexplan("'" + path("d.json") + "' -o '" + path("d.bin") + "'").exit_code, 0);
}

TEST_F(TopoImportCli, MalformedInputExitsTwoWithFileAndLine) {
  std::ofstream(path("bad.conf")) << "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=a[3-\n";
  auto run = testing::run_flexplan("topo import --slurm '" + path("bad.conf") + "' --learners 1 -o '" + path("o.json") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "flexplan: error: topology: " + path("bad.conf") + ":2: Nodes=a[3-: ")) << run.output;
  std::ofstream(path("bad.xml")) << "<system>\n  <gpu dev='0'>\n</system>\n";
  run = testing::run_flexplan("topo import --hosts a,b --nccl-xml '" + path("bad.xml") + "' -o '" + path("o.json") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, path("bad.xml") + ":3: </system> closes <gpu> opened on line 2")) << run.output;
  std::ofstream(path("hosts")) << "a slots=2\nb slots=two\n";
  run = testing::run_flexplan("topo import --hostfile '" + path("hosts") + "' -o '" + path("o.json") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, path("hosts") + ":2: slots='two'")) << run.output;
  run = testing::run_flexplan("topo import --hosts 'a[1-' -o '" + path("o.json") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "--hosts: 'a[1-'")) << run.output;
  run = testing::run_flexplan("topo import --hosts a,b --learners 1 --link zz=1Gbit/s --learner-link 1GB/s -o '" +
                              path("o.json") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "--link zz=1Gbit/s: 'zz' names no switch or machine")) << run.output;
  run = testing::run_flexplan("topo import --nccl-xml '" + path("none.xml") + "' --hosts a,b -o '" + path("o.json") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, path("none.xml") + ": cannot open")) << run.output;
  EXPECT_FALSE(std::filesystem::exists(path("o.json")));
}

}  // namespace
}  // namespace flexplan
