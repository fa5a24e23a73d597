// libFuzzer harness for the importer's readers (flexplan topo import): the first byte picks the
// reader (hostlist, Slurm topology.conf, NCCL topology XML, nvidia-smi topo -m, hostfile, link
// overrides), the rest is its text. Any input either reads or throws the reader's error
// (ImportError, a TopologyError, or HostlistError); anything else escapes and is a crash. What
// is accepted must satisfy the readers' own promises.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "topology/cluster_import.hpp"
#include "topology/hostlist.hpp"
#include "topology/nccl_topo_xml.hpp"
#include "topology/slurm_topology.hpp"
#include "topology/topology.hpp"

namespace {

void check(bool fact, const char* what) {
  if (fact) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

// Names an expression may expand to here: enough to cover every form, small enough that each
// input stays within the fuzzer's time and memory per input.
constexpr size_t kMaxNames = 5'000;

void read(uint8_t which, const std::string& text) {
  switch (which % 6) {
    case 0: {
      const auto names = flexplan::expand_hostlist(text, kMaxNames);
      check(names.size() <= kMaxNames, "a hostlist expanded past its limit");
      for (const auto& name : names) check(!name.empty(), "a hostlist gave an empty name");
      break;
    }
    case 1: {
      const auto topo = flexplan::parse_slurm_topology(text, "fuzz.conf", kMaxNames);
      const auto machines = topo.machines_in_order();
      check(machines.size() == topo.switch_of_node.size(), "a machine is missed or met twice in the tree");
      check(topo.top >= 0 && topo.parent[static_cast<size_t>(topo.top)] < 0, "the top switch has a parent");
      break;
    }
    case 2: {
      const auto machine = flexplan::parse_nccl_topology(text, "fuzz.xml");
      check(!machine.gpus.empty(), "an NCCL system without GPUs was accepted");
      for (const auto& nic : machine.nics) check(nic.speed > 0, "a NIC without a rate was accepted");
      break;
    }
    case 3: {
      const auto smi = flexplan::parse_nvidia_smi_topology(text, "fuzz.txt");
      for (size_t g = 0; g < smi.gpus.size(); ++g) check(smi.nvlinks_of(g) >= 0, "a negative NVLink count");
      break;
    }
    case 4: {
      const auto hosts = flexplan::parse_hostfile(text, "fuzz.hosts");
      std::set<std::string> seen;
      for (const auto& h : hosts) check(seen.insert(h.host).second, "a host listed twice was accepted");
      break;
    }
    case 5: {
      for (const auto& link : flexplan::parse_link_overrides(text, "fuzz.links", kMaxNames))
        check(link.bandwidth > 0, "a link override without a bandwidth was accepted");
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    read(data[0], text);
  } catch (const flexplan::TopologyError&) {
  } catch (const flexplan::HostlistError&) {
  }
  return 0;
}
