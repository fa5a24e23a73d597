// What `flexplan probe` measured, turned into a topology: figures with their spread, the switch
// tree (given or inferred from shared bottlenecks), the topology JSON, and the comparison of a
// declared topology with a measured one. No MPI and no transport here (probe.cpp measures), so
// the flexplan program and the unit tests use it alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/slurm_topology.hpp"
#include "topology/topology.hpp"

namespace flexplan::probe {

// Bad input (a topology that does not fit the job, a bad argument): exit 2.
class ProbeInputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One figure from repeated samples: the median, and the spread (max - min) / median.
struct Figure {
  std::vector<double> samples;
  // The traffic could not fill this link (what received it was slower): the figure is a floor.
  bool lower_bound = false;
  bool known() const { return !samples.empty(); }
  double value() const;   // the median; 0 when unknown
  double spread() const;  // 0 with fewer than two samples
  // Stable: at least two samples within `tolerance` of each other (relative spread).
  bool stable(double tolerance) const { return samples.size() >= 2 && spread() <= tolerance; }
};

// A switch below the root: the machines under it (all of them, nested switches' too).
struct Group {
  std::string name;
  int parent = -1;  // index of the enclosing group, -1 for the root switch
  std::vector<int> machines;
  Figure out, in;   // its uplink, bytes/s, each direction with every machine under it sending
  double latency = 0;  // seconds (given by --topology, else 0: not separable from the machines')
  // Inferred groups: how sure (0..1) and why.
  double confidence = 1;
  std::string evidence;
  bool twin = false;  // another group over every other machine would carry every flow alike
};

struct Measurements {
  std::vector<std::string> machine_names;  // by machine index
  std::vector<int> machine_of_rank;        // by rank
  std::vector<Figure> learner_bandwidth;   // by rank, bytes/s (pair rates within its machine)
  std::vector<Figure> learner_latency;     // by rank, seconds (half a pair's one-way latency)
  bool learner_default = false;            // no machine had two learners: defaults used
  std::vector<Figure> machine_out, machine_in;  // by machine, bytes/s
  std::vector<double> machine_latency;          // by machine, seconds (fitted)
  // one-way latency between machines' first learners, seconds (-1: not measured)
  std::vector<std::vector<double>> pair_latency;
  std::vector<Group> groups;  // switches below the root, parents before children
  bool tree_given = false;
  std::string tree_note;  // how the tree was found, and how sure
  // The software cost of one hop beyond its link's latency and bytes, seconds: what the
  // planner's cost model adds per hop (CostParams::hop_overhead), one sample per batch of the
  // runtime's all-reduces (run_probe.cpp, hop_overhead_test). Unknown: not measured.
  Figure hop_overhead;
};

// Ranks grouped by machine: a machine's index is its order of first appearance by rank.
struct MachineGrouping {
  std::vector<std::string> names;
  std::vector<int> machine_of_rank;
  std::vector<std::vector<int>> ranks;  // by machine
};
MachineGrouping group_by_name(const std::vector<std::string>& name_of_rank);
// "a,a,b,b" (one name per rank) or "2,2" (learners per machine, in rank order); ProbeInputError
// naming what is wrong, or if it does not cover exactly `world` ranks.
std::vector<std::string> parse_machine_of_rank(const std::string& text, int world);

// The switch tree a topology declares, for the machines of this job: every inner node that is
// neither the root nor a machine (a parent of learners) becomes a group. The machines are
// matched by their learners' ranks; ProbeInputError lists both groupings when they differ.
std::vector<Group> groups_from_topology(const Topology& topo, const MachineGrouping& machines,
                                        const std::string& source);

// The switch tree of Slurm's topology.conf (topology/slurm_topology.hpp) for the machines of
// this job, matched by host name (a name's part before its first '.' matches too): every switch
// below the top with a machine of the job under it becomes a group. Machines of the file the job
// does not use are left out; a machine of the job the file lacks is a ProbeInputError naming it.
std::vector<Group> groups_from_slurm(const SlurmTopology& slurm, const MachineGrouping& machines);

// Shared bottlenecks from the all-to-all test: every machine sends to every other at once, and
// rate[a][b] is what a's flows to b reached. A shared uplink slows the flows that cross it, and
// the flows that stay inside take what their machines' links have left. Given the machines'
// measured rates out and in, each flow is first divided by its share in the same all-to-all on
// one flat switch (fair_all_to_all), so that a slow machine's flows do not pass for a switch's;
// a pair of machines counts at the slower of its two directions.
// The machines are clustered (average linkage on the pairs' values, every level kept, the best
// refined by moving one machine at a time) and each partition scored as a block model: a mean
// inside each cluster of two machines or more, one mean across, and the weakest cluster's
// separation from the pairs across in units of the pairs' scatter (a t statistic). Averages
// over every pair of a group, not single flows, decide, so per-flow noise does not split a rack.
// The best partition is a switch tree when its t is above what the same search finds in 99.5%
// of flat clusters of as many machines with noise alone (simulated, seeded, once per size:
// the search's choice among many partitions is what inflates t) and its weakest cluster's pairs
// inside are 1 + threshold/2 times those across; with fewer than three degrees of freedom
// (three machines) the scatter cannot be judged and the contrast must reach 1 + threshold.
// Candidates: not found, but past the flat clusters' median t and 1 + threshold/2 wide; the
// probe tests their uplinks, which decide. About one flat cluster in 200 still shows a false switch here: the probe measures every
// switch's uplink after, and drops one that limits nothing. Two groups that split the machines
// between them explain each other (every flow of one goes into the other): the smaller is kept
// (the first on a tie), with confidence 0.5 at most. A group's confidence is the fraction of the
// pairs touching it on the right side of the midpoint between the means, lowered where t (or
// the contrast) is less than twice what is needed.
struct Inference {
  std::vector<Group> groups;
  std::string note;
  // Not found, but the best split is more telling than half of those in flat clusters and
  // wide enough to matter: worth an uplink test each (the probe runs them; they decide).
  std::vector<Group> candidates;
  double t = 0, t_needed = 0, t_candidate = 0, contrast = 1;
  int dof = 0;
};
Inference infer_tree(const std::vector<std::vector<double>>& rate, double threshold, const std::vector<double>& out = {},
                     const std::vector<double>& in = {});
// infer_tree's groups, its note in `note`.
std::vector<Group> infer_groups(const std::vector<std::vector<double>>& rate, double threshold, std::string* note,
                                const std::vector<double>& out = {}, const std::vector<double>& in = {});
// Whether group `gi`'s uplink, as measured (its out and in figures: every machine under it
// sending to every machine outside at once, and the reverse), limited anything: below 1 - margin
// of what its machines could send and the rest take (each other group at most its own uplink),
// either way. ratio: the smaller of the two directions' measured / allowed.
struct UplinkVerdict {
  bool limits = false;
  double ratio = 1;
};
UplinkVerdict judge_uplink(const std::vector<Group>& groups, size_t gi, const std::vector<Figure>& machine_out,
                           const std::vector<Figure>& machine_in, double margin);
// The max-min fair rates of an all-to-all (every machine to every other) on one flat switch.
std::vector<std::vector<double>> fair_all_to_all(const std::vector<double>& out, const std::vector<double>& in);

// Least-squares fit of per-machine link latency from pair latencies, each pair's figure being
// lat_a + lat_b (after the learner links are taken off by the caller). Machines in no pair, or
// a two-machine job, split evenly; never negative.
std::vector<double> fit_machine_latency(const std::vector<std::vector<double>>& pair_latency);

// The topology JSON (docs/topology.md): root "switch", groups as switches, machines by name,
// learners "learner{rank}" with explicit ranks. Links are min(in, out) of what was measured;
// "hop_overhead" where it was measured.
nlohmann::json to_topology_json(const Measurements& m, const std::string& name);

// The comparison of a declared topology with the measured one: one row per link matched by the
// learners under it (names may differ). Bandwidth off by more than `tolerance` is flagged; so is
// latency off by more than `tolerance` and more than `latency_floor` seconds (the measurement's
// resolution). A measured floor (lower_bound) passes when the declared figure is above it.
struct CompareRow {
  std::string declared_name, measured_name;
  double declared_bandwidth = 0, measured_bandwidth = 0;
  double declared_latency = 0, measured_latency = 0;
  bool measured_floor = false;
  bool bandwidth_off = false, latency_off = false;
};
struct Comparison {
  std::vector<CompareRow> rows;
  // Each topology's "hop_overhead" (nullopt: none given, the commands' default). Shown, never
  // flagged: a declared topology rarely has one, and it is no link's figure.
  std::optional<double> declared_hop_overhead, measured_hop_overhead;
  std::vector<std::string> unmatched;  // links of one side with no counterpart on the other
  bool any_off() const;
};
Comparison compare(const Topology& declared, const Topology& measured, double tolerance, double latency_floor,
                   const std::vector<std::string>& floor_nodes = {});
std::string format_comparison(const Comparison& c, double tolerance);

// "60s", "90", "1.5m", "500ms" -> seconds; "5%" or "0.05" -> 0.05. ProbeInputError otherwise.
double parse_seconds(const std::string& text, const std::string& what);
double parse_fraction(const std::string& text, const std::string& what);

}  // namespace flexplan::probe
