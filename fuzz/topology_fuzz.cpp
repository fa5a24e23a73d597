// libFuzzer harness for the topology JSON reader: any input either gives a Topology or a
// TopologyError (anything else escapes and is a crash); an accepted tree must read the same
// way twice and satisfy the model's basic facts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "topology/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const flexplan::Topology topology = flexplan::parse_topology(text, "fuzz.json");
    const flexplan::Topology again = flexplan::parse_topology(text, "fuzz.json");
    std::set<std::string> names;
    for (int rank = 0; rank < topology.num_learners(); ++rank)
      names.insert(topology.full_name(topology.learner_node(rank)));
    if (topology.num_learners() < 2 || again.hash() != topology.hash() ||
        names.size() != static_cast<size_t>(topology.num_learners())) {
      std::fprintf(stderr, "fuzz check failed: an accepted topology breaks the model's facts\n");
      std::abort();
    }
  } catch (const flexplan::TopologyError&) {
  }
  return 0;
}
