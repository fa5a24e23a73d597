// The probe as a function of an out-of-band group, so that mpirun (flexplan-probe) and torchrun
// (the PyTorch package's flexplan_torch.probe) start the same measurement.
#pragma once

#include <string>

#include "runtime/bootstrap.hpp"

namespace flexplan::probe {

// Parses the probe's command line (argv[0] is the program's name), measures the cluster of
// `group`'s processes and writes the topology from rank 0. Collective: every member calls it
// with the same arguments. Returns the exit status, the same on every rank (docs/probe.md):
// 0 done, 1 --compare found a link off, 2 bad input, 4 the measurement failed. `launch` is how
// the help and errors say to start it ("mpirun -np P flexplan-probe").
int run_probe(bootstrap::Group& group, int argc, const char* const* argv, const std::string& launch);

// The longest run_probe can take with these arguments before its watchdog ends it (twice the
// budget and a minute), so that a launcher can bound its own waits by it. Not collective.
double probe_time_limit_seconds(int argc, const char* const* argv);

}  // namespace flexplan::probe
