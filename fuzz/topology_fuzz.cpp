// libFuzzer harness for the topology JSON reader: any input either gives a Topology or a
// TopologyError (anything else escapes and is a crash); an accepted tree must read the same
// way twice and satisfy the model's basic facts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "topology/topology.hpp"

namespace {

// The reader's size refusals, at bounds this harness can afford. A tree at the default limits
// (2,000,000 nodes) takes about 25 s and over 1 GB to build under the sanitizers and coverage,
// past the fuzzer's per-input bounds (setup.sh: 10 s, 2 GB); the checks that refuse it are the
// same code with a smaller figure. docs/topology.md gives the time and memory at the defaults.
constexpr flexplan::TopologyLimits kLimits{20'000, 4.0 * 1024 * 1024};

struct Facts {
  uint64_t hash;
  int learners;
  size_t distinct_names;
};

Facts read_facts(const std::string& text) {
  const flexplan::Topology topology = flexplan::parse_topology(text, "fuzz.json", kLimits);
  std::set<std::string> names;
  for (int rank = 0; rank < topology.num_learners(); ++rank)
    names.insert(topology.full_name(topology.learner_node(rank)));
  return {topology.hash(), topology.num_learners(), names.size()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    // One tree alive at a time, so an input's memory is one tree's.
    const Facts first = read_facts(text);
    const Facts again = read_facts(text);
    if (first.learners < 2 || again.hash != first.hash ||
        first.distinct_names != static_cast<size_t>(first.learners)) {
      std::fprintf(stderr, "fuzz check failed: an accepted topology breaks the model's facts\n");
      std::abort();
    }
  } catch (const flexplan::TopologyError&) {
  }
  return 0;
}
