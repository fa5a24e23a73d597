// Writes a topology back as JSON (docs/topology.md): every node spelled out, bandwidths in B/s
// and latencies in seconds with enough digits to read back the same figures and hash.
#pragma once

#include <string>

#include "topology/topology.hpp"

namespace flexplan {

std::string topology_to_json(const Topology&);

}  // namespace flexplan
