// The probe's model without MPI: figures, machine grouping, the tree from a topology or
// Slurm's topology.conf, the shared-bottleneck inference, the latency fit, the topology it
// writes and the comparison.
#include <gtest/gtest.h>

#include <random>

#include "probe/model.hpp"
#include "topology/topology.hpp"

namespace flexplan::probe {
namespace {

TEST(ProbeModel, FigureMedianAndSpread) {
  Figure f{{10, 12, 11}};
  EXPECT_DOUBLE_EQ(f.value(), 11);
  EXPECT_NEAR(f.spread(), 2.0 / 11, 1e-12);
  EXPECT_FALSE(f.stable(0.1));
  EXPECT_TRUE(f.stable(0.2));
  EXPECT_FALSE(Figure{{5}}.stable(0.5));  // one sample is never stable
}

TEST(ProbeModel, MachineOfRank) {
  const auto names = parse_machine_of_rank("a,a,b", 3);
  const auto g = group_by_name(names);
  ASSERT_EQ(g.names.size(), 2u);
  EXPECT_EQ(g.machine_of_rank, (std::vector<int>{0, 0, 1}));
  EXPECT_THROW(parse_machine_of_rank("a,a", 3), ProbeInputError);
  EXPECT_THROW(parse_machine_of_rank("a,,b", 3), ProbeInputError);
  EXPECT_THROW(parse_machine_of_rank("a,b/c,d", 3), ProbeInputError);
}

TEST(ProbeModel, DurationsAndFractions) {
  EXPECT_DOUBLE_EQ(parse_seconds("60s", "--budget"), 60);
  EXPECT_DOUBLE_EQ(parse_seconds("2m", "--budget"), 120);
  EXPECT_DOUBLE_EQ(parse_seconds("500ms", "--budget"), 0.5);
  EXPECT_THROW(parse_seconds("soon", "--budget"), ProbeInputError);
  EXPECT_THROW(parse_seconds("-1s", "--budget"), ProbeInputError);
  EXPECT_THROW(parse_seconds("5h", "--budget"), ProbeInputError);
  EXPECT_DOUBLE_EQ(parse_fraction("5%", "x"), 0.05);
  EXPECT_DOUBLE_EQ(parse_fraction("0.1", "x"), 0.1);
  EXPECT_THROW(parse_fraction("150%", "x"), ProbeInputError);
}

const char* kRacks = R"({"name": "r", "root": {"name": "top", "children": [
  {"name": "rack", "link": {"bandwidth": "150 Mbit/s", "latency": "1 us"}, "children": [
    {"name": "m0", "link": {"bandwidth": "100 Mbit/s"}, "children": [{"name": "g", "count": 2, "link": {"bandwidth": "1 GB/s"}}]},
    {"name": "m1", "link": {"bandwidth": "100 Mbit/s"}, "children": [{"name": "g", "count": 1, "link": {"bandwidth": "1 GB/s"}}]}]},
  {"name": "m2", "link": {"bandwidth": "100 Mbit/s"}, "children": [{"name": "g", "count": 2, "link": {"bandwidth": "1 GB/s"}}]}]}})";

TEST(ProbeModel, TreeFromTopologyMatchesMachinesByRanks) {
  const Topology t = parse_topology(kRacks);
  const auto g = group_by_name({"x", "x", "y", "z", "z"});
  const auto groups = groups_from_topology(t, g, "t.json");
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].name, "rack");
  EXPECT_EQ(groups[0].machines, (std::vector<int>{0, 1}));
  // Hosts that group the ranks otherwise: refused, naming both groupings.
  const auto other = group_by_name({"x", "y", "y", "z", "z"});
  try {
    groups_from_topology(t, other, "t.json");
    FAIL() << "no error";
  } catch (const ProbeInputError& e) {
    EXPECT_NE(std::string(e.what()).find("top/rack/m0 (ranks 0-1)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("y (ranks 1-2)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(groups_from_topology(t, group_by_name({"x", "x", "y", "z"}), "t.json"), ProbeInputError);
}

// Slurm's tree: switches below the top with a machine of the job become groups, nested as in
// the file; switches without one are dropped; host names match by their first label too.
TEST(ProbeModel, TreeFromSlurmMatchesMachinesByHostName) {
  const SlurmTopology slurm = parse_slurm_topology(
      "SwitchName=top Switches=agg[0-1]\n"
      "SwitchName=agg0 Switches=leaf[0-1]\n"
      "SwitchName=agg1 Nodes=node[20-21]\n"
      "SwitchName=leaf0 Nodes=node[01-02]\n"
      "SwitchName=leaf1 Nodes=node03\n",
      "topology.conf");
  const auto g = group_by_name({"node01.cluster", "node01.cluster", "node02", "node03", "node03"});
  const auto groups = groups_from_slurm(slurm, g);
  ASSERT_EQ(groups.size(), 3u);  // agg0, leaf0, leaf1 (agg1 has no machine of the job)
  EXPECT_EQ(groups[0].name, "agg0");
  EXPECT_EQ(groups[0].parent, -1);
  EXPECT_EQ(groups[0].machines, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(groups[1].name, "leaf0");
  EXPECT_EQ(groups[1].parent, 0);
  EXPECT_EQ(groups[1].machines, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[2].name, "leaf1");
  EXPECT_EQ(groups[2].machines, (std::vector<int>{2}));
  EXPECT_NE(groups[1].evidence.find("topology.conf:4"), std::string::npos) << groups[1].evidence;
  try {
    groups_from_slurm(slurm, group_by_name({"node01", "node09"}));
    FAIL() << "no error";
  } catch (const ProbeInputError& e) {
    EXPECT_NE(std::string(e.what()).find("node09"), std::string::npos) << e.what();
  }
}

// An all-to-all's rates, a -> b: `inside` between machines of one group, `across` otherwise.
std::vector<std::vector<double>> all_to_all(const std::vector<int>& group_of, double inside, double across) {
  const size_t m = group_of.size();
  std::vector<std::vector<double>> r(m, std::vector<double>(m, 0));
  for (size_t a = 0; a < m; ++a)
    for (size_t b = 0; b < m; ++b)
      if (a != b) r[a][b] = group_of[a] >= 0 && group_of[a] == group_of[b] ? inside : across;
  return r;
}

TEST(ProbeModel, InfersARackOfFourFromTheAllToAll) {
  // Eight machines of 12 MB/s, 0-3 behind a 24 MB/s uplink: 16 flows cross it at 1.5 MB/s,
  // and the flows that stay on one side take the 2 MB/s their links have left. Both sides look
  // alike; the first is kept, and said to be one of two.
  std::string note;
  const auto groups = infer_groups(all_to_all({0, 0, 0, 0, 1, 1, 1, 1}, 2e6, 1.5e6), 0.2, &note);
  ASSERT_EQ(groups.size(), 1u) << note;
  EXPECT_EQ(groups[0].machines, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_GT(groups[0].confidence, 0);
  EXPECT_LE(groups[0].confidence, 0.5);
  EXPECT_NE(groups[0].evidence.find("(4,5,6,7) would carry every flow alike"), std::string::npos) << groups[0].evidence;
}

TEST(ProbeModel, InfersTwoRacksAndTheirShadow) {
  // Racks {0,1} and {2,3}, machines 4 and 5 on the top switch: 4 and 5 also see each other
  // faster than the racks (the probe drops such a group once its uplink proves no bottleneck).
  std::string note;
  const auto groups = infer_groups(all_to_all({0, 0, 1, 1, 2, 2}, 3e6, 1e6), 0.2, &note);
  ASSERT_EQ(groups.size(), 3u) << note;
  EXPECT_EQ(groups[0].machines, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1].machines, (std::vector<int>{2, 3}));
  EXPECT_DOUBLE_EQ(groups[0].confidence, 1.0);
}

TEST(ProbeModel, InfersNoSwitchWhereFlowsAreAlike) {
  std::string note;
  auto r = all_to_all({-1, -1, -1, -1, -1}, 2e6, 2e6);
  r[0][1] = 2.2e6;  // within the threshold
  r[3][4] = 1.9e6;
  EXPECT_TRUE(infer_groups(r, 0.2, &note).empty());
  EXPECT_NE(note.find("flat"), std::string::npos) << note;
  // One machine sees a gap the other does not return: no switch either.
  r[0][1] = 4e6;
  EXPECT_TRUE(infer_groups(r, 0.2, &note).empty()) << note;
}

TEST(ProbeModel, FairAllToAllAndSlowMachines) {
  // Machines of 24, 12 and 24 MB/s on one switch: flows into the slow one get 6 each; the fast
  // ones fill the rest of their links with each other.
  const auto fair = fair_all_to_all({24e6, 12e6, 24e6}, {24e6, 12e6, 24e6});
  EXPECT_NEAR(fair[0][1], 6e6, 1);
  EXPECT_NEAR(fair[1][0], 6e6, 1);
  EXPECT_NEAR(fair[0][2], 18e6, 1);
  // Measured just so: no switch, though machine 1's flows are three times slower.
  std::string note;
  EXPECT_TRUE(infer_groups(fair, 0.2, &note, {24e6, 12e6, 24e6}, {24e6, 12e6, 24e6}).empty()) << note;
  // Without the machines' rates the slow machine would pass for a switch's shadow.
  EXPECT_FALSE(infer_groups(fair, 0.2, &note).empty());
}

// Every flow of `r` times its own noise factor, 1 + sigma * (a sum of three uniforms, centred
// and scaled to unit spread): seeded, and the same under every standard library (mt19937's
// output is fixed by the standard, the distributions' is not).
std::vector<std::vector<double>> noisy(std::vector<std::vector<double>> r, double sigma, unsigned seed) {
  std::mt19937 gen(seed);
  auto uniform = [&] { return static_cast<double>(gen()) / 4294967296.0; };
  for (auto& row : r)
    for (auto& x : row)
      if (x > 0) x *= 1 + sigma * 2 * (uniform() + uniform() + uniform() - 1.5);
  return r;
}

TEST(ProbeModel, FindsARackOfFourThroughPerFlowNoise) {
  // The emulated m8-rack: eight machines of 12 MB/s, 0-3 behind a 24 MB/s uplink. In theory
  // the flows inside either half take 2 MB/s and the 16 crossing each way 1.5 (1.33x); each
  // flow here is 8% off (one standard deviation; the median of the probe's two passes of one
  // second each). Judged machine by machine (the widest gap in each machine's own seven flows)
  // the rack broke up; judged over every pair of a candidate group it stands out.
  const std::vector<double> link(8, 12e6);
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const auto r = noisy(all_to_all({0, 0, 0, 0, 1, 1, 1, 1}, 2e6, 1.5e6), 0.08, seed);
    const Inference inf = infer_tree(r, 0.2, link, link);
    ASSERT_EQ(inf.groups.size(), 1u) << "seed " << seed << ": " << inf.note;
    EXPECT_EQ(inf.groups[0].machines, (std::vector<int>{0, 1, 2, 3})) << "seed " << seed << ": " << inf.note;
    EXPECT_TRUE(inf.groups[0].twin);
    EXPECT_LE(inf.groups[0].confidence, 0.5);  // the other half would carry every flow alike
    EXPECT_GT(inf.groups[0].confidence, 0.3) << inf.groups[0].evidence;
  }
}

TEST(ProbeModel, FindsARackOfTwoBesideFasterMachinesThroughNoise) {
  // The emulated m4-rack2: four machines of 24 MB/s, 0 and 1 behind 24 MB/s. Max-min fair:
  // the four flows out of the rack (and the four in) take 6 MB/s each, 0 <-> 1 takes 18 and
  // 2 <-> 3 the 12 left; every flow 5% off.
  std::vector<std::vector<double>> r(4, std::vector<double>(4, 6e6));
  r[0][1] = r[1][0] = 18e6;
  r[2][3] = r[3][2] = 12e6;
  for (size_t a = 0; a < 4; ++a) r[a][a] = 0;
  const std::vector<double> link(4, 24e6);
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const Inference inf = infer_tree(noisy(r, 0.05, seed), 0.2, link, link);
    ASSERT_EQ(inf.groups.size(), 1u) << "seed " << seed << ": " << inf.note;
    EXPECT_EQ(inf.groups[0].machines, (std::vector<int>{0, 1})) << "seed " << seed << ": " << inf.note;
  }
}

TEST(ProbeModel, GivesAFlatClusterNoRackThroughNoise) {
  // One switch: every flow at its fair share, 10% or 15% off. The search's best split of pure
  // noise is held against the same search on simulated flat clusters, so about one in 200 is
  // taken for a switch (the probe then drops it: its uplink limits nothing); more would mean
  // the threshold no longer allows for the search's choice.
  for (const int m : {4, 5, 8, 12}) {
    const std::vector<double> link(static_cast<size_t>(m), 12e6);
    const auto fair = fair_all_to_all(link, link);
    for (const double sigma : {0.10, 0.15}) {
      int false_racks = 0;
      for (unsigned seed = 1; seed <= 100; ++seed) false_racks += !infer_tree(noisy(fair, sigma, seed), 0.2, link, link).groups.empty();
      EXPECT_LE(false_racks, 3) << m << " machines, sigma " << sigma;
    }
  }
  // Machines of unlike rates on one switch: their flows differ by design, not by a switch.
  const std::vector<double> mixed{48e6, 12e6, 24e6, 24e6, 12e6};
  const auto fair = fair_all_to_all(mixed, mixed);
  int false_racks = 0;
  for (unsigned seed = 1; seed <= 100; ++seed) false_racks += !infer_tree(noisy(fair, 0.10, seed), 0.2, mixed, mixed).groups.empty();
  EXPECT_LE(false_racks, 3);
  // Exact figures: nothing at all.
  EXPECT_TRUE(infer_tree(fair, 0.2, mixed, mixed).groups.empty());
}

TEST(ProbeModel, CandidateWhereTheNoiseHidesTheRack) {
  // The rack of four with every flow 15% off: mostly not enough to name a switch from the
  // all-to-all alone, but a candidate for the uplink test, nearly always the right machines (or
  // the other half, which carries every flow alike); a switch named outright is never wrong.
  const std::vector<double> link(8, 12e6);
  int candidates_only = 0, halves = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const Inference inf = infer_tree(noisy(all_to_all({0, 0, 0, 0, 1, 1, 1, 1}, 2e6, 1.5e6), 0.15, seed), 0.2, link, link);
    for (const auto& g : inf.groups)  // named outright: one half (either carries every flow alike)
      EXPECT_TRUE(g.machines == (std::vector<int>{0, 1, 2, 3}) || g.machines == (std::vector<int>{4, 5, 6, 7}))
          << "seed " << seed << ": " << inf.note;
    const auto& proposed = inf.groups.empty() ? inf.candidates : inf.groups;
    EXPECT_FALSE(proposed.empty()) << "seed " << seed << ": " << inf.note;
    halves += std::any_of(proposed.begin(), proposed.end(), [](const Group& g) {
      return g.machines == std::vector<int>{0, 1, 2, 3} || g.machines == std::vector<int>{4, 5, 6, 7};
    });
    candidates_only += inf.groups.empty();
  }
  EXPECT_GE(halves, 16);  // 18 of 20 as written; the others propose a near miss, which its uplink test drops
  EXPECT_GT(candidates_only, 0);
}

TEST(ProbeModel, TheMeasuredRackOfFourIsACandidateAndItsUplinkConfirmsIt) {
  // The all-to-all as measured on the emulated m8-rack (2026-11-29, MB/s, the median of two
  // passes): eight machines of 100 Mbit/s, n0-n3 behind 200 Mbit/s. The split is right and
  // 1.3x wide, but TCP's shares scatter 20% from flow to flow, and that scatter persists from
  // pass to pass: the all-to-all alone cannot tell it from noise at 99.5%.
  const std::vector<std::vector<double>> mb = {
      {0.00, 2.05, 1.76, 1.71, 1.27, 1.52, 1.50, 1.44}, {1.44, 0.00, 2.14, 1.76, 1.65, 1.57, 1.18, 1.17},
      {1.65, 2.23, 0.00, 1.89, 1.34, 1.28, 1.47, 1.32}, {1.69, 1.59, 2.23, 0.00, 1.61, 1.53, 1.65, 1.57},
      {1.38, 1.30, 1.14, 1.36, 0.00, 2.35, 2.10, 1.70}, {1.54, 1.39, 1.25, 1.30, 2.98, 0.00, 1.92, 1.57},
      {1.13, 1.41, 1.64, 1.59, 1.48, 1.76, 0.00, 2.47}, {2.06, 1.58, 1.84, 1.01, 1.44, 1.59, 2.07, 0.00}};
  std::vector<std::vector<double>> r = mb;
  for (auto& row : r)
    for (auto& x : row) x *= 1e6;
  const std::vector<double> out{11.90e6, 11.94e6, 11.95e6, 12.00e6, 12.03e6, 12.04e6, 12.00e6, 12.07e6};
  const std::vector<double> in{12.00e6, 12.03e6, 12.17e6, 12.08e6, 12.04e6, 12.03e6, 12.06e6, 11.96e6};
  const Inference inf = infer_tree(r, 0.2, out, in);
  EXPECT_TRUE(inf.groups.empty()) << inf.note;
  ASSERT_EQ(inf.candidates.size(), 1u) << inf.note;
  EXPECT_EQ(inf.candidates[0].machines, (std::vector<int>{0, 1, 2, 3})) << inf.note;
  EXPECT_GT(inf.contrast, 1.25);
  // The uplink test: the four sending out at once carried 24 MB/s of the 48 their links allow
  // (and the reverse alike): a bottleneck.
  std::vector<Figure> mo, mi;
  for (size_t k = 0; k < 8; ++k) {
    mo.push_back(Figure{{out[k]}});
    mi.push_back(Figure{{in[k]}});
  }
  std::vector<Group> groups = inf.candidates;
  groups[0].out.samples = {23.9e6};
  groups[0].in.samples = {23.9e6};
  const UplinkVerdict v = judge_uplink(groups, 0, mo, mi, 0.1);
  EXPECT_TRUE(v.limits);
  EXPECT_NEAR(v.ratio, 0.5, 0.01);
  // The same group on a flat switch carries what its machines send: no bottleneck, dropped.
  groups[0].out.samples = {47.6e6};
  groups[0].in.samples = {47.8e6};
  EXPECT_FALSE(judge_uplink(groups, 0, mo, mi, 0.1).limits);
}

TEST(ProbeModel, AFlatClustersCandidatesAreDroppedByTheirUplinks) {
  // Whatever the noise proposes on one switch, the group's uplink carries all that its
  // machines send (here within 3%): no switch is written.
  for (const int m : {4, 8}) {
    const std::vector<double> link(static_cast<size_t>(m), 12e6);
    const auto fair = fair_all_to_all(link, link);
    std::vector<Figure> mo(static_cast<size_t>(m), Figure{{12e6}}), mi = mo;
    int proposed = 0;
    for (unsigned seed = 1; seed <= 50; ++seed) {
      const Inference inf = infer_tree(noisy(fair, 0.15, seed), 0.2, link, link);
      std::vector<Group> groups = inf.groups.empty() ? inf.candidates : inf.groups;
      for (size_t g = 0; g < groups.size(); ++g) {
        const double own = 12e6 * static_cast<double>(groups[g].machines.size());
        const double rest = 12e6 * static_cast<double>(m - static_cast<int>(groups[g].machines.size()));
        groups[g].out.samples = {0.97 * std::min(own, rest)};
        groups[g].in.samples = {0.98 * std::min(own, rest)};
      }
      for (size_t g = 0; g < groups.size(); ++g) {
        ++proposed;
        EXPECT_FALSE(judge_uplink(groups, g, mo, mi, 0.1).limits) << m << " machines, seed " << seed;
      }
    }
    EXPECT_GT(proposed, 0) << "the test tried no group";
  }
}

TEST(ProbeModel, LatencyFit) {
  // x = {10, 20, 30} us: pairs add up.
  std::vector<std::vector<double>> y(3, std::vector<double>(3, -1));
  y[0][1] = y[1][0] = 30e-6;
  y[0][2] = y[2][0] = 40e-6;
  y[1][2] = y[2][1] = 50e-6;
  const auto x = fit_machine_latency(y);
  EXPECT_NEAR(x[0], 10e-6, 1e-9);
  EXPECT_NEAR(x[1], 20e-6, 1e-9);
  EXPECT_NEAR(x[2], 30e-6, 1e-9);
  // Two machines: an even split.
  const auto two = fit_machine_latency({{-1, 60e-6}, {60e-6, -1}});
  EXPECT_NEAR(two[0], 30e-6, 1e-9);
  EXPECT_NEAR(two[1], 30e-6, 1e-9);
}

Measurements three_machines() {
  Measurements m;
  m.machine_names = {"hostA", "hostB", "hostC"};
  m.machine_of_rank = {0, 1, 1, 2};
  for (int r = 0; r < 4; ++r) {
    m.learner_bandwidth.push_back(Figure{{1e9}});
    m.learner_latency.push_back(Figure{{2e-6}});
  }
  m.machine_out = {Figure{{12.5e6}}, Figure{{25e6}}, Figure{{50e6}}};
  m.machine_in = {Figure{{12e6}}, Figure{{26e6}}, Figure{{50e6}}};
  m.machine_latency = {10e-6, 20e-6, 30e-6};
  Group g;
  g.name = "rack0";
  g.machines = {0, 1};
  g.out.samples = {15e6};
  g.in.samples = {16e6};
  m.groups = {g};
  return m;
}

TEST(ProbeModel, WritesATopologyThatReadsBack) {
  const auto json = to_topology_json(three_machines(), "probed");
  const Topology t = parse_topology(json.dump());
  EXPECT_EQ(t.num_learners(), 4);
  // rack0 (hostA, hostB) and hostC under the root; links are min(out, in).
  const NodeId rack = t.children(t.root())[0];
  EXPECT_EQ(t.full_name(rack), "switch/rack0");
  EXPECT_NEAR(t.uplink(rack).bandwidth, 15e6, 1);
  const NodeId a = t.children(rack)[0];
  EXPECT_EQ(t.full_name(a), "switch/rack0/hostA");
  EXPECT_NEAR(t.uplink(a).bandwidth, 12e6, 1);
  EXPECT_NEAR(t.uplink(a).latency, 10e-6, 1e-9);
  EXPECT_EQ(t.rank_of(t.children(t.children(rack)[1])[1]), 2);
}

TEST(ProbeModel, CompareFlagsLinksOffByMoreThanTheTolerance) {
  const Topology measured = parse_topology(to_topology_json(three_machines(), "probed").dump());
  // Same tree, other names, figures: hostA's link declared 12.5 (measured 12: 4% off), hostB's
  // 20 MB/s (measured 25: 25% off).
  Measurements declared_m = three_machines();
  declared_m.machine_names = {"n0", "n1", "n2"};
  declared_m.machine_out[0] = declared_m.machine_in[0] = Figure{{12.5e6}};
  declared_m.machine_out[1] = declared_m.machine_in[1] = Figure{{20e6}};
  const Topology declared = parse_topology(to_topology_json(declared_m, "declared").dump());
  const auto c = compare(declared, measured, 0.10, 50e-6);
  EXPECT_TRUE(c.unmatched.empty());
  ASSERT_EQ(c.rows.size(), 8u);  // 4 learners, 3 machines, 1 rack
  int off = 0;
  for (const auto& r : c.rows) {
    if (r.declared_name == "switch/rack0/n1") {
      EXPECT_TRUE(r.bandwidth_off);
    }
    if (r.declared_name == "switch/rack0/n0") {
      EXPECT_FALSE(r.bandwidth_off);
    }
    off += r.bandwidth_off;
  }
  EXPECT_EQ(off, 1);
  EXPECT_TRUE(c.any_off());
  EXPECT_NE(format_comparison(c, 0.1).find("1 of 8 links off by more than 10%"), std::string::npos);
  // A measured floor below the declared figure is no disagreement; above it, it is.
  EXPECT_TRUE(compare(declared, measured, 0.10, 50e-6, {"switch/rack0/hostB"}).any_off());
  declared_m.machine_out[1] = declared_m.machine_in[1] = Figure{{40e6}};
  const Topology faster = parse_topology(to_topology_json(declared_m, "declared").dump());
  EXPECT_TRUE(compare(faster, measured, 0.10, 50e-6).any_off());
  EXPECT_FALSE(compare(faster, measured, 0.10, 50e-6, {"switch/rack0/hostB"}).any_off());
  // The same topology: nothing off. A flat one: the rack is unmatched.
  EXPECT_FALSE(compare(measured, measured, 0.10, 50e-6).any_off());
  Measurements flat = three_machines();
  flat.groups.clear();
  const auto c2 = compare(parse_topology(to_topology_json(flat, "f").dump()), measured, 0.10, 50e-6);
  EXPECT_EQ(c2.unmatched.size(), 1u);
}

// The measured hop overhead goes in the topology (the median of its samples) and --compare
// shows it beside the declared one without flagging it; none measured, none written.
TEST(ProbeModel, WritesTheHopOverheadAndComparesIt) {
  Measurements m = three_machines();
  EXPECT_FALSE(parse_topology(to_topology_json(m, "probed").dump()).hop_overhead().has_value());
  m.hop_overhead.samples = {41e-6, 38e-6, 40e-6};
  const Topology measured = parse_topology(to_topology_json(m, "probed").dump());
  ASSERT_TRUE(measured.hop_overhead().has_value());
  EXPECT_NEAR(*measured.hop_overhead(), 40e-6, 1e-12);
  const Topology declared = parse_topology(to_topology_json(three_machines(), "declared").dump());
  const auto c = compare(declared, measured, 0.10, 50e-6);
  EXPECT_FALSE(c.any_off());
  EXPECT_FALSE(c.declared_hop_overhead.has_value());
  ASSERT_TRUE(c.measured_hop_overhead.has_value());
  const std::string text = format_comparison(c, 0.10);
  EXPECT_NE(text.find("hop overhead: declared none (the commands' default), measured 40 us"), std::string::npos) << text;
  EXPECT_EQ(format_comparison(compare(declared, declared, 0.10, 50e-6), 0.10).find("hop overhead"), std::string::npos);
}

}  // namespace
}  // namespace flexplan::probe
