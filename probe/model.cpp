// What `flexplan probe` measured, turned into a topology and compared with a declared one.
#include "probe/model.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace flexplan::probe {

double Figure::value() const {
  if (samples.empty()) return 0;
  std::vector<double> s = samples;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double Figure::spread() const {
  if (samples.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  const double v = value();
  return v > 0 ? (*hi - *lo) / v : 0;
}

MachineGrouping group_by_name(const std::vector<std::string>& name_of_rank) {
  MachineGrouping g;
  std::map<std::string, int> index;
  for (const auto& name : name_of_rank) {
    auto [it, fresh] = index.emplace(name, static_cast<int>(g.names.size()));
    if (fresh) {
      g.names.push_back(name);
      g.ranks.emplace_back();
    }
    g.ranks[it->second].push_back(static_cast<int>(g.machine_of_rank.size()));
    g.machine_of_rank.push_back(it->second);
  }
  return g;
}

std::vector<std::string> parse_machine_of_rank(const std::string& text, int world) {
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string token = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (token.empty()) {
      throw ProbeInputError(fmt::format("--machine-of-rank '{}': entry {} is empty (write one machine name per rank, "
                                        "comma-separated, e.g. a,a,b)", text, names.size()));
    }
    if (token.find('/') != std::string::npos || token.find('{') != std::string::npos ||
        token.find('}') != std::string::npos) {
      throw ProbeInputError(fmt::format("--machine-of-rank '{}': machine name '{}' may not hold '/', '{{' or '}}'",
                                        text, token));
    }
    names.push_back(token);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(names.size()) != world) {
    throw ProbeInputError(fmt::format("--machine-of-rank '{}' names {} ranks, but the job has {}", text,
                                      names.size(), world));
  }
  return names;
}

namespace {

std::vector<int> sorted_ranks(const Topology& t, NodeId n) {
  auto span = t.learners_under(n);
  std::vector<int> r(span.begin(), span.end());
  std::sort(r.begin(), r.end());
  return r;
}

std::string rank_list(const std::vector<int>& ranks) {
  // "0-2,5"
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<Group> groups_from_topology(const Topology& topo, const MachineGrouping& machines,
                                        const std::string& source) {
  const int world = static_cast<int>(machines.machine_of_rank.size());
  if (topo.num_learners() != world) {
    throw ProbeInputError(fmt::format("{}: the topology has {} learners, the job {} ranks", source,
                                      topo.num_learners(), world));
  }
  std::map<std::vector<int>, int> job_machine;
  for (size_t m = 0; m < machines.ranks.size(); ++m) {
    std::vector<int> r = machines.ranks[m];
    std::sort(r.begin(), r.end());
    job_machine.emplace(r, static_cast<int>(m));
  }
  std::vector<int> machine_of_node(static_cast<size_t>(topo.num_nodes()), -1);
  std::vector<std::string> file_side, job_side;
  bool all_match = true;
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (!topo.is_machine(n)) continue;
    const auto r = sorted_ranks(topo, n);
    file_side.push_back(fmt::format("{} (ranks {})", topo.full_name(n), rank_list(r)));
    auto it = job_machine.find(r);
    if (it == job_machine.end()) all_match = false;
    else machine_of_node[static_cast<size_t>(n)] = it->second;
  }
  for (size_t m = 0; m < machines.ranks.size(); ++m) {
    std::vector<int> r = machines.ranks[m];
    std::sort(r.begin(), r.end());
    job_side.push_back(fmt::format("{} (ranks {})", machines.names[m], rank_list(r)));
  }
  if (!all_match || file_side.size() != job_side.size()) {
    throw ProbeInputError(fmt::format(
        "{}: its machines do not group the ranks as this job's hosts do.\n  the topology's machines: {}\n"
        "  the job's machines:      {}\n(give --machine-of-rank where the hosts do not tell the machines apart)",
        source, fmt::join(file_side, "; "), fmt::join(job_side, "; ")));
  }
  std::vector<Group> groups;
  std::vector<int> group_of_node(static_cast<size_t>(topo.num_nodes()), -1);
  // Preorder by node id is not guaranteed: walk from the root.
  std::vector<NodeId> stack{topo.root()};
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    const auto kids = topo.children(n);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
    if (n == topo.root() || topo.is_learner(n) || topo.is_machine(n)) continue;
    Group g;
    g.name = topo.node(n).name;
    for (NodeId p = topo.parent(n); p >= 0 && p != topo.root(); p = topo.parent(p)) {
      if (group_of_node[static_cast<size_t>(p)] >= 0) {
        g.parent = group_of_node[static_cast<size_t>(p)];
        break;
      }
    }
    std::set<int> under;
    for (int r : topo.learners_under(n)) under.insert(machines.machine_of_rank[static_cast<size_t>(r)]);
    g.machines.assign(under.begin(), under.end());
    g.latency = topo.uplink(n).latency;
    g.evidence = "given";
    group_of_node[static_cast<size_t>(n)] = static_cast<int>(groups.size());
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<Group> groups_from_slurm(const SlurmTopology& slurm, const MachineGrouping& machines) {
  const auto short_name = [](const std::string& name) { return name.substr(0, name.find('.')); };
  // The switch above each machine of the job.
  std::vector<int> switch_of_machine;
  std::vector<std::string> missing;
  for (const std::string& name : machines.names) {
    auto it = slurm.switch_of_node.find(name);
    if (it == slurm.switch_of_node.end()) it = slurm.switch_of_node.find(short_name(name));
    if (it == slurm.switch_of_node.end()) {
      missing.push_back(name);
      switch_of_machine.push_back(-1);
    } else {
      switch_of_machine.push_back(it->second);
    }
  }
  if (!missing.empty())
    throw ProbeInputError(fmt::format("{}: no switch lists the job's machine{} {} (Nodes= of some SwitchName)",
                                      slurm.source, missing.size() == 1 ? "" : "s", fmt::join(missing, ", ")));
  // Every switch with a machine of the job below it, except the top one (the root).
  const size_t switches = slurm.switches.size();
  std::vector<std::set<int>> under(switches);
  for (size_t m = 0; m < switch_of_machine.size(); ++m)
    for (int s = switch_of_machine[m]; s >= 0; s = slurm.parent[static_cast<size_t>(s)])
      under[static_cast<size_t>(s)].insert(static_cast<int>(m));
  std::vector<Group> groups;
  std::vector<int> group_of_switch(switches, -1);
  // Depth-first from the top, so that a parent's group comes before its children's.
  std::vector<int> stack{slurm.top};
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    const SlurmSwitch& sw = slurm.switches[static_cast<size_t>(s)];
    for (auto it = sw.switches.rbegin(); it != sw.switches.rend(); ++it) stack.push_back(slurm.index_of_switch.at(*it));
    if (s == slurm.top || under[static_cast<size_t>(s)].empty()) continue;
    Group g;
    g.name = sw.name;
    for (int p = slurm.parent[static_cast<size_t>(s)]; p >= 0; p = slurm.parent[static_cast<size_t>(p)]) {
      if (group_of_switch[static_cast<size_t>(p)] >= 0) {
        g.parent = group_of_switch[static_cast<size_t>(p)];
        break;
      }
    }
    g.machines.assign(under[static_cast<size_t>(s)].begin(), under[static_cast<size_t>(s)].end());
    g.evidence = fmt::format("given by {}:{}", slurm.source, sw.line);
    group_of_switch[static_cast<size_t>(s)] = static_cast<int>(groups.size());
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<std::vector<double>> fair_all_to_all(const std::vector<double>& out, const std::vector<double>& in) {
  const size_t m = out.size();
  std::vector<std::vector<double>> rate(m, std::vector<double>(m, 0));
  std::vector<std::vector<bool>> frozen(m, std::vector<bool>(m, false));
  std::vector<double> out_left = out, in_left = in;
  for (size_t a = 0; a < m; ++a) frozen[a][a] = true;
  // Progressive filling: raise every unfrozen flow alike until a link fills; freeze its flows.
  for (size_t round = 0; round < 2 * m + 1; ++round) {
    std::vector<int> out_n(m, 0), in_n(m, 0);
    for (size_t a = 0; a < m; ++a)
      for (size_t b = 0; b < m; ++b)
        if (!frozen[a][b]) {
          ++out_n[a];
          ++in_n[b];
        }
    double step = std::numeric_limits<double>::infinity();
    for (size_t x = 0; x < m; ++x) {
      if (out_n[x]) step = std::min(step, out_left[x] / out_n[x]);
      if (in_n[x]) step = std::min(step, in_left[x] / in_n[x]);
    }
    if (!std::isfinite(step)) break;
    for (size_t a = 0; a < m; ++a)
      for (size_t b = 0; b < m; ++b)
        if (!frozen[a][b]) {
          rate[a][b] += step;
          out_left[a] -= step;
          in_left[b] -= step;
        }
    for (size_t a = 0; a < m; ++a)
      for (size_t b = 0; b < m; ++b)
        if (!frozen[a][b] && (out_left[a] <= 1e-9 * out[a] || in_left[b] <= 1e-9 * in[b])) frozen[a][b] = true;
  }
  return rate;
}

namespace {

// A partition of the machines into clusters, scored as a block model of the pair values: each
// cluster of two machines or more has its own mean inside, every pair across clusters one
// mean. The score is the weakest cluster's separation from the pairs across, in units of the
// pairs' scatter about their block means (a t statistic): every cluster must stand out, and a
// single noisy pair stands out only as far as the others' scatter allows.
struct PartitionScore {
  double t = -std::numeric_limits<double>::infinity();
  double contrast = 0;  // weakest cluster's mean inside / mean across
  int dof = 0;          // pairs less the block means fitted
  bool valid() const { return std::isfinite(t); }
};

PartitionScore score_partition(const std::vector<std::vector<double>>& v, const std::vector<int>& cluster_of) {
  const size_t m = v.size();
  int clusters = 0;
  for (int c : cluster_of) clusters = std::max(clusters, c + 1);
  std::vector<double> sum_in(static_cast<size_t>(clusters), 0);
  std::vector<int> n_in(static_cast<size_t>(clusters), 0);
  double sum_x = 0, total = 0;
  int n_x = 0, n = 0;
  for (size_t a = 0; a < m; ++a)
    for (size_t b = a + 1; b < m; ++b) {
      const double x = v[a][b];
      if (!(x > 0)) continue;
      total += x;
      ++n;
      if (cluster_of[a] == cluster_of[b]) {
        sum_in[static_cast<size_t>(cluster_of[a])] += x;
        ++n_in[static_cast<size_t>(cluster_of[a])];
      } else {
        sum_x += x;
        ++n_x;
      }
    }
  PartitionScore s;
  int blocks = n_x > 0 ? 1 : 0;
  for (int k : n_in) blocks += k > 0;
  if (n_x == 0 || blocks < 2) return s;
  const double mean_x = sum_x / n_x;
  double ssr = 0;
  for (size_t a = 0; a < m; ++a)
    for (size_t b = a + 1; b < m; ++b) {
      const double x = v[a][b];
      if (!(x > 0)) continue;
      const size_t c = static_cast<size_t>(cluster_of[a]);
      const double mean = cluster_of[a] == cluster_of[b] ? sum_in[c] / n_in[c] : mean_x;
      ssr += (x - mean) * (x - mean);
    }
  s.dof = n - blocks;
  // The scatter is floored at 1% of the mean (the rates' resolution), so that exact figures
  // (and unit tests) score finitely; with no pair left to measure it, the floor alone.
  const double floor = 0.01 * total / n;
  const double sigma = std::max(floor, s.dof > 0 ? std::sqrt(ssr / s.dof) : 0.0);
  double t = std::numeric_limits<double>::infinity(), contrast = std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < static_cast<size_t>(clusters); ++c) {
    if (n_in[c] == 0) continue;
    const double mean_in = sum_in[c] / n_in[c];
    t = std::min(t, (mean_in - mean_x) / (sigma * std::sqrt(1.0 / n_in[c] + 1.0 / n_x)));
    contrast = std::min(contrast, mean_in / mean_x);
  }
  s.t = t;
  s.contrast = contrast;
  return s;
}

// Renumbers clusters 0.. in order of their first machine.
std::vector<int> canonical(const std::vector<int>& cluster_of) {
  std::map<int, int> renumber;
  std::vector<int> out;
  for (int c : cluster_of) {
    auto it = renumber.emplace(c, static_cast<int>(renumber.size())).first;
    out.push_back(it->second);
  }
  return out;
}

// The best partition of the pair values `v` (0: not measured): average-linkage clustering,
// joining the two clusters whose pairs across are fastest on average (a mean over every pair
// between them, so one noisy flow moves it little), every level scored; then the best level
// refined by moving one machine at a time while the score rises.
std::pair<std::vector<int>, PartitionScore> best_partition(const std::vector<std::vector<double>>& v) {
  const size_t mm = v.size();
  std::vector<int> cluster_of(mm);
  std::iota(cluster_of.begin(), cluster_of.end(), 0);
  // Sums and counts of the pair values between clusters, kept as clusters join.
  std::vector<std::vector<double>> sum(mm, std::vector<double>(mm, 0));
  std::vector<std::vector<int>> count(mm, std::vector<int>(mm, 0));
  for (size_t a = 0; a < mm; ++a)
    for (size_t b = 0; b < mm; ++b)
      if (a != b && v[a][b] > 0) {
        sum[a][b] = v[a][b];
        count[a][b] = 1;
      }
  std::vector<bool> alive(mm, true);
  std::vector<int> best = cluster_of;
  PartitionScore best_score;
  for (size_t clusters = mm; clusters > 2; --clusters) {
    double top = -1;
    size_t ja = mm, jb = mm;
    for (size_t ca = 0; ca < mm; ++ca)
      for (size_t cb = ca + 1; cb < mm && alive[ca]; ++cb)
        if (alive[cb] && count[ca][cb] && sum[ca][cb] / count[ca][cb] > top) {
          top = sum[ca][cb] / count[ca][cb];
          ja = ca;
          jb = cb;
        }
    if (ja == mm) break;
    alive[jb] = false;
    for (size_t c = 0; c < mm; ++c) {
      sum[ja][c] += sum[jb][c];
      sum[c][ja] = sum[ja][c];
      count[ja][c] += count[jb][c];
      count[c][ja] = count[ja][c];
    }
    for (auto& c : cluster_of)
      if (c == static_cast<int>(jb)) c = static_cast<int>(ja);
    const auto part = canonical(cluster_of);
    const auto score = score_partition(v, part);
    if (score.valid() && score.t > best_score.t) {
      best_score = score;
      best = part;
    }
  }
  for (size_t round = 0; round < 4 * mm && best_score.valid(); ++round) {
    bool moved = false;
    const int clusters = *std::max_element(best.begin(), best.end()) + 1;
    for (size_t x = 0; x < mm && !moved; ++x)
      for (int c = 0; c <= clusters && !moved; ++c) {
        if (c == best[x]) continue;
        std::vector<int> trial = best;
        trial[x] = c;  // c == clusters: a cluster of its own
        trial = canonical(trial);
        const auto score = score_partition(v, trial);
        if (score.valid() && score.t > best_score.t * (1 + 1e-9) + 1e-12) {
          best = trial;
          best_score = score;
          moved = true;
        }
      }
    if (!moved) break;
  }
  return {best, best_score};
}

// A pair's value: the slower of its two directions. Machines under one switch reach each
// other fast both ways; a flow that was fast one way only (a noisy sample, an unfair share)
// says nothing about a switch.
std::vector<std::vector<double>> pair_values(const std::vector<std::vector<double>>& rate) {
  const size_t mm = rate.size();
  std::vector<std::vector<double>> v(mm, std::vector<double>(mm, 0));
  for (size_t a = 0; a < mm; ++a)
    for (size_t b = 0; b < mm; ++b) {
      if (a == b) continue;
      const double x = rate[a][b], y = rate[b][a];
      v[a][b] = x > 0 && y > 0 ? std::min(x, y) : std::max(x, y);
    }
  return v;
}

// What the search finds in noise alone: the best partition's t in `runs` flat clusters of `m`
// machines, every flow 10% off at random (seeded: the same figures every time), sorted. t is a
// ratio of differences to scatter, so the noise's size hardly matters; the search's choice
// among many partitions does, and is what a measured t is held against. Computed once per
// cluster size (0.1 s for eight machines, 0.7 s for 32, 4 s for 64 with 20 runs).
const std::vector<double>& null_t(size_t m) {
  static std::mutex mutex;
  static std::map<size_t, std::vector<double>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(m);
  if (it != cache.end()) return it->second;
  const int runs = m <= 12 ? 1000 : m <= 24 ? 300 : m <= 48 ? 100 : 20;
  std::mt19937 gen(12345 + static_cast<unsigned>(m));
  auto uniform = [&] { return static_cast<double>(gen()) / 4294967296.0; };
  std::vector<double> ts;
  for (int run = 0; run < runs; ++run) {
    std::vector<std::vector<double>> r(m, std::vector<double>(m, 0));
    for (size_t a = 0; a < m; ++a)
      for (size_t b = 0; b < m; ++b)
        if (a != b) r[a][b] = 1 + 0.1 * 2 * (uniform() + uniform() + uniform() - 1.5);
    const auto found = best_partition(pair_values(r));
    ts.push_back(found.second.valid() ? found.second.t : 0);
  }
  std::sort(ts.begin(), ts.end());
  return cache.emplace(m, std::move(ts)).first->second;
}

double quantile(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5)];
}

}  // namespace

Inference infer_tree(const std::vector<std::vector<double>>& measured, double threshold, const std::vector<double>& out,
                     const std::vector<double>& in) {
  Inference result;
  const int m = static_cast<int>(measured.size());
  const size_t mm = measured.size();
  // Each flow against its share on one flat switch with the machines' measured links, so that
  // a slow machine's flows do not pass for a switch's.
  std::vector<std::vector<double>> rate = measured;
  if (out.size() == mm && in.size() == mm) {
    const auto fair = fair_all_to_all(out, in);
    for (size_t a = 0; a < mm; ++a)
      for (size_t b = 0; b < mm; ++b) rate[a][b] = fair[a][b] > 0 ? measured[a][b] / fair[a][b] : 0;
  }
  const auto v = pair_values(rate);
  if (m < 3) {
    result.note = "flat: fewer than three machines cannot show a shared bottleneck";
    return result;
  }
  const auto found_partition = best_partition(v);
  const std::vector<int>& best = found_partition.first;
  const PartitionScore& best_score = found_partition.second;
  result.t = best_score.valid() ? best_score.t : 0;
  result.contrast = best_score.valid() ? best_score.contrast : 1;
  result.dof = best_score.dof;
  // Held against what the same search finds in flat clusters of as many machines with noise
  // alone: past the 99.5th percentile of 1000 such (fewer on large clusters, where the search
  // costs more). With fewer than three degrees of freedom (three machines) the scatter cannot
  // be judged: the contrast alone decides there, and the uplink test after confirms or drops.
  const bool judged = best_score.dof >= 3;
  if (judged) {
    const auto& null = null_t(mm);
    result.t_needed = quantile(null, 0.995);
    result.t_candidate = quantile(null, 0.50);
  }
  const bool found = best_score.valid() && (judged ? result.t > result.t_needed && result.contrast >= 1 + threshold / 2
                                                   : result.contrast >= 1 + threshold);
  // Not enough to name a switch from the all-to-all alone, but a split more telling than half
  // of those in noise, and wide enough to matter: a candidate, for the uplink test to decide.
  const bool candidate = best_score.valid() && !found && result.contrast >= 1 + threshold / 2 &&
                         (!judged || result.t > result.t_candidate);
  const auto describe = [&] {
    return judged ? fmt::format("the weakest cluster's pairs inside {:.2f}x those across, t = {:.1f} over {} degrees of "
                                "freedom (a switch needs t above {:.1f}, the most found in 99.5% of flat clusters, and {:.2f}x)",
                                result.contrast, result.t, result.dof, result.t_needed, 1 + threshold / 2)
                  : fmt::format("the weakest cluster's pairs inside {:.2f}x those across (too few pairs to judge their "
                                "scatter: a switch needs {:.2f}x)",
                                result.contrast, 1 + threshold);
  };
  if (!found && !candidate) {
    result.note = best_score.valid()
                      ? fmt::format("inferred: no shared bottleneck between machines (flat switch): best split of the "
                                    "all-to-all's {} machines: {}",
                                    m, describe())
                      : "inferred: no shared bottleneck between machines (flat switch)";
    return result;
  }
  std::map<int, std::vector<int>> members;
  for (int a = 0; a < m; ++a) members[best[static_cast<size_t>(a)]].push_back(a);
  std::vector<Group>& groups = found ? result.groups : result.candidates;
  for (const auto& entry : members) {
    if (entry.second.size() < 2) continue;
    Group g;
    g.machines = entry.second;
    groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) { return x.machines < y.machines; });
  // Two groups that split the machines between them explain each other: every flow out of one
  // goes into the other, and either's uplink limits it alike. Keep the smaller (the first on a
  // tie) and say so.
  std::string twin;
  if (groups.size() == 2 && groups[0].machines.size() + groups[1].machines.size() == mm) {
    const size_t drop = groups[1].machines.size() < groups[0].machines.size() ? 0 : 1;
    twin = fmt::format("{}", fmt::join(groups[drop].machines, ","));
    groups.erase(groups.begin() + static_cast<long>(drop));
  }
  // Agreement: a pair inside a cluster faster than the midpoint between the means inside and
  // across, a pair across slower.
  double sum_in = 0, sum_x = 0;
  int n_in = 0, n_x = 0;
  for (size_t a = 0; a < mm; ++a)
    for (size_t b = a + 1; b < mm; ++b) {
      if (!(v[a][b] > 0)) continue;
      if (best[a] == best[b]) sum_in += v[a][b], ++n_in;
      else sum_x += v[a][b], ++n_x;
    }
  const double mid = (sum_in / std::max(1, n_in) + sum_x / std::max(1, n_x)) / 2;
  int agree_all = 0, pairs_all = 0;
  for (size_t a = 0; a < mm; ++a)
    for (size_t b = a + 1; b < mm; ++b) {
      if (!(v[a][b] > 0)) continue;
      ++pairs_all;
      agree_all += (best[a] == best[b]) == (v[a][b] > mid);
    }
  // Clear: how far past what a switch needs (t, else the contrast), 1 at twice it.
  const double clear = judged ? result.t / (2 * result.t_needed) : (result.contrast - 1) / (2 * threshold);
  for (size_t g = 0; g < groups.size(); ++g) {
    Group& gr = groups[g];
    gr.name = fmt::format("group{}", g);
    int agree = 0, total = 0;
    for (int a : gr.machines)
      for (int b = 0; b < m; ++b) {
        if (b == a || !(v[static_cast<size_t>(a)][static_cast<size_t>(b)] > 0)) continue;
        ++total;
        agree += (best[static_cast<size_t>(a)] == best[static_cast<size_t>(b)]) == (v[static_cast<size_t>(a)][static_cast<size_t>(b)] > mid);
      }
    gr.confidence = (total ? static_cast<double>(agree) / total : 0) * std::clamp(clear, 0.0, 1.0);
    gr.evidence = fmt::format("{} of {} machine pairs touching it agree; {}", agree, total, describe());
    if (!twin.empty()) {
      gr.evidence += fmt::format("; a switch over the other machines ({}) would carry every flow alike", twin);
      gr.confidence = std::min(gr.confidence, 0.5);
      gr.twin = true;
    }
  }
  result.note = found ? fmt::format("inferred: {} switch group(s) from shared bottlenecks in the all-to-all; {} of {} "
                                    "machine pairs agree with the tree; {}",
                                    groups.size(), agree_all, pairs_all, describe())
                      : fmt::format("inferred: {} candidate switch group(s), for their uplinks' tests to confirm: the "
                                    "all-to-all alone does not tell them from noise; {} of {} machine pairs agree; {}",
                                    groups.size(), agree_all, pairs_all, describe());
  return result;
}

std::vector<Group> infer_groups(const std::vector<std::vector<double>>& measured, double threshold, std::string* note,
                                const std::vector<double>& out, const std::vector<double>& in) {
  Inference r = infer_tree(measured, threshold, out, in);
  if (note) *note = r.note;
  return std::move(r.groups);
}

UplinkVerdict judge_uplink(const std::vector<Group>& groups, size_t gi, const std::vector<Figure>& machine_out,
                           const std::vector<Figure>& machine_in, double margin) {
  const Group& g = groups[gi];
  double own_out = 0, own_in = 0;
  for (int mach : g.machines) {
    own_out += machine_out[static_cast<size_t>(mach)].value();
    own_in += machine_in[static_cast<size_t>(mach)].value();
  }
  // What the rest can take and send, each other group at most its uplink.
  double take = 0, send = 0;
  std::set<int> counted(g.machines.begin(), g.machines.end());
  for (size_t hi = 0; hi < groups.size(); ++hi) {
    if (hi == gi) continue;
    const Group& h = groups[hi];
    double h_in = 0, h_out = 0;
    for (int mach : h.machines) {
      h_in += machine_in[static_cast<size_t>(mach)].value();
      h_out += machine_out[static_cast<size_t>(mach)].value();
      counted.insert(mach);
    }
    take += h.in.known() ? std::min(h_in, h.in.value()) : h_in;
    send += h.out.known() ? std::min(h_out, h.out.value()) : h_out;
  }
  for (size_t mach = 0; mach < machine_out.size(); ++mach) {
    if (counted.count(static_cast<int>(mach))) continue;
    take += machine_in[mach].value();
    send += machine_out[mach].value();
  }
  const double allow_out = std::min(own_out, take), allow_in = std::min(own_in, send);
  UplinkVerdict v;
  v.ratio = std::min(allow_out > 0 ? g.out.value() / allow_out : 1, allow_in > 0 ? g.in.value() / allow_in : 1);
  v.limits = v.ratio < 1 - margin;
  return v;
}

std::vector<double> fit_machine_latency(const std::vector<std::vector<double>>& pair_latency) {
  const size_t m = pair_latency.size();
  // Normal equations of x_a + x_b = y_ab, with a small ridge so that a job of two machines (or
  // any underdetermined set) takes the even split, the least-norm answer.
  std::vector<std::vector<double>> a(m, std::vector<double>(m + 1, 0));
  for (size_t i = 0; i < m; ++i) a[i][i] = 1e-6;
  for (size_t i = 0; i < m; ++i)
    for (size_t j = i + 1; j < m; ++j) {
      const double y = pair_latency[i][j];
      if (y < 0) continue;
      a[i][i] += 1;
      a[j][j] += 1;
      a[i][j] += 1;
      a[j][i] += 1;
      a[i][m] += y;
      a[j][m] += y;
    }
  // Gaussian elimination with partial pivoting (the matrix is symmetric positive definite).
  for (size_t c = 0; c < m; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < m; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    for (size_t r = 0; r < m; ++r) {
      if (r == c || a[c][c] == 0) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k <= m; ++k) a[r][k] -= f * a[c][k];
    }
  }
  std::vector<double> x(m, 0);
  for (size_t i = 0; i < m; ++i) x[i] = a[i][i] != 0 ? std::max(0.0, a[i][m] / a[i][i]) : 0;
  return x;
}

namespace {

std::string bandwidth_text(double bytes_per_s) { return fmt::format("{:.6g} MB/s", bytes_per_s / 1e6); }
std::string latency_text(double seconds) { return fmt::format("{:.3f} us", std::max(0.0, seconds) * 1e6); }

double link_rate(const Figure& out, const Figure& in) {
  if (out.known() && in.known()) return std::min(out.value(), in.value());
  return out.known() ? out.value() : in.value();
}

}  // namespace

nlohmann::json to_topology_json(const Measurements& m, const std::string& name) {
  using nlohmann::json;
  const int machines = static_cast<int>(m.machine_names.size());
  std::vector<std::vector<int>> ranks(static_cast<size_t>(machines));
  for (size_t r = 0; r < m.machine_of_rank.size(); ++r) ranks[static_cast<size_t>(m.machine_of_rank[r])].push_back(static_cast<int>(r));
  auto learners = [&](int machine) {
    json kids = json::array();
    for (int r : ranks[static_cast<size_t>(machine)]) {
      kids.push_back({{"name", fmt::format("learner{}", r)},
                      {"rank", r},
                      {"link",
                       {{"bandwidth", bandwidth_text(m.learner_bandwidth[static_cast<size_t>(r)].value())},
                        {"latency", latency_text(m.learner_latency[static_cast<size_t>(r)].value())}}}});
    }
    return kids;
  };
  auto with_hop_overhead = [&](json doc) {
    if (m.hop_overhead.known()) doc["hop_overhead"] = latency_text(m.hop_overhead.value());
    return doc;
  };
  if (machines == 1) {
    return with_hop_overhead({{"name", name},
                              {"description", "Measured by flexplan probe: one machine"},
                              {"root", {{"name", m.machine_names[0]}, {"children", learners(0)}}}});
  }
  // The innermost group of each machine.
  std::vector<int> innermost(static_cast<size_t>(machines), -1);
  for (size_t g = 0; g < m.groups.size(); ++g)
    for (int mach : m.groups[g].machines) {
      const int cur = innermost[static_cast<size_t>(mach)];
      if (cur < 0 || m.groups[g].machines.size() < m.groups[static_cast<size_t>(cur)].machines.size())
        innermost[static_cast<size_t>(mach)] = static_cast<int>(g);
    }
  std::function<json(int)> children_of = [&](int group) {
    std::vector<std::pair<int, json>> kids;  // ordered by first machine
    for (size_t g = 0; g < m.groups.size(); ++g) {
      if (m.groups[g].parent != group) continue;
      const Group& gr = m.groups[g];
      // A switch over every machine sends nowhere: its uplink is never crossed, and carries
      // what its machines can.
      double rate = link_rate(gr.out, gr.in);
      if (!gr.out.known() && !gr.in.known())
        for (int mach : gr.machines) rate += link_rate(m.machine_out[static_cast<size_t>(mach)], m.machine_in[static_cast<size_t>(mach)]);
      json node = {{"name", gr.name},
                   {"link", {{"bandwidth", bandwidth_text(rate)}, {"latency", latency_text(gr.latency)}}},
                   {"children", children_of(static_cast<int>(g))}};
      kids.emplace_back(*std::min_element(gr.machines.begin(), gr.machines.end()), std::move(node));
    }
    for (int mach = 0; mach < machines; ++mach) {
      if (innermost[static_cast<size_t>(mach)] != group) continue;
      json node = {{"name", m.machine_names[static_cast<size_t>(mach)]},
                   {"link",
                    {{"bandwidth", bandwidth_text(link_rate(m.machine_out[static_cast<size_t>(mach)], m.machine_in[static_cast<size_t>(mach)]))},
                     {"latency", latency_text(m.machine_latency[static_cast<size_t>(mach)])}}},
                   {"children", learners(mach)}};
      kids.emplace_back(mach, std::move(node));
    }
    std::stable_sort(kids.begin(), kids.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    json out = json::array();
    for (auto& k : kids) out.push_back(std::move(k.second));
    return out;
  };
  return with_hop_overhead(
      {{"name", name},
       {"description", fmt::format("Measured by flexplan probe: {} machines, {} learners; switch tree {}", machines,
                                   m.machine_of_rank.size(), m.tree_note.empty() ? "flat" : m.tree_note)},
       {"root", {{"name", "switch"}, {"children", children_of(-1)}}}});
}

bool Comparison::any_off() const {
  return std::any_of(rows.begin(), rows.end(), [](const CompareRow& r) { return r.bandwidth_off || r.latency_off; });
}

namespace {

// A link's identity across two trees: the learners under it and what kind of node owns it;
// switches with the same learners (a chain) are told apart by their order from the top.
std::map<std::pair<std::vector<int>, std::string>, NodeId> link_keys(const Topology& t) {
  std::map<std::pair<std::vector<int>, std::string>, NodeId> keys;
  std::vector<NodeId> order;
  std::vector<NodeId> stack{t.root()};
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (NodeId c : t.children(n)) stack.push_back(c);
  }
  std::map<std::vector<int>, int> chain;
  for (NodeId n : order) {
    if (n == t.root()) continue;
    const auto ranks = sorted_ranks(t, n);
    std::string kind = t.is_learner(n) ? "learner" : t.is_machine(n) ? "machine" : "switch";
    if (kind == "switch") kind += std::to_string(chain[ranks]++);
    keys.emplace(std::make_pair(ranks, kind), n);
  }
  return keys;
}

}  // namespace

Comparison compare(const Topology& declared, const Topology& measured, double tolerance, double latency_floor,
                   const std::vector<std::string>& floor_nodes) {
  Comparison c;
  c.declared_hop_overhead = declared.hop_overhead();
  c.measured_hop_overhead = measured.hop_overhead();
  const auto d = link_keys(declared);
  const auto m = link_keys(measured);
  for (const auto& [key, dn] : d) {
    auto it = m.find(key);
    if (it == m.end()) {
      c.unmatched.push_back(fmt::format("declared {} (learners {}) has no measured counterpart", declared.full_name(dn),
                                        rank_list(key.first)));
      continue;
    }
    const NodeId mn = it->second;
    CompareRow row;
    row.declared_name = declared.full_name(dn);
    row.measured_name = measured.full_name(mn);
    row.declared_bandwidth = declared.uplink(dn).bandwidth;
    row.measured_bandwidth = measured.uplink(mn).bandwidth;
    row.declared_latency = declared.uplink(dn).latency;
    row.measured_latency = measured.uplink(mn).latency;
    row.measured_floor = std::find(floor_nodes.begin(), floor_nodes.end(), row.measured_name) != floor_nodes.end();
    if (row.measured_floor) {
      row.bandwidth_off = row.declared_bandwidth < row.measured_bandwidth * (1 - tolerance);
    } else {
      row.bandwidth_off = std::abs(row.measured_bandwidth - row.declared_bandwidth) > tolerance * row.declared_bandwidth;
    }
    const double dl = std::abs(row.measured_latency - row.declared_latency);
    row.latency_off = dl > tolerance * row.declared_latency && dl > latency_floor;
    c.rows.push_back(row);
  }
  for (const auto& [key, mn] : m) {
    if (!d.count(key)) {
      c.unmatched.push_back(fmt::format("measured {} (learners {}) has no declared counterpart", measured.full_name(mn),
                                        rank_list(key.first)));
    }
  }
  return c;
}

std::string format_comparison(const Comparison& c, double tolerance) {
  std::string out = fmt::format("{:<28} {:>13} {:>13} {:>7}   {:>11} {:>11} {:>9}\n", "link (declared name)",
                                "declared bw", "measured bw", "diff", "declared lat", "measured lat", "diff");
  int off = 0;
  for (const auto& r : c.rows) {
    const double bw_diff = (r.measured_bandwidth - r.declared_bandwidth) / r.declared_bandwidth;
    const double lat_diff_us = (r.measured_latency - r.declared_latency) * 1e6;
    out += fmt::format("{:<28} {:>13} {:>13} {:>+6.1f}%{} {:>11} {:>11} {:>+7.1f}us{}{}\n", r.declared_name,
                       format_bandwidth(r.declared_bandwidth),
                       (r.measured_floor ? ">=" : "") + format_bandwidth(r.measured_bandwidth), 100 * bw_diff,
                       r.bandwidth_off ? "!" : " ", format_latency(r.declared_latency), format_latency(r.measured_latency),
                       lat_diff_us, r.latency_off ? "!" : " ",
                       r.measured_name != r.declared_name ? "  (measured: " + r.measured_name + ")" : "");
    off += r.bandwidth_off || r.latency_off;
  }
  for (const auto& u : c.unmatched) out += "  unmatched: " + u + "\n";
  if (c.declared_hop_overhead || c.measured_hop_overhead) {
    auto text = [](const std::optional<double>& v) { return v ? format_latency(*v) : std::string("none (the commands' default)"); };
    out += fmt::format("hop overhead: declared {}, measured {} (not compared: no link's figure)\n", text(c.declared_hop_overhead),
                       text(c.measured_hop_overhead));
  }
  out += fmt::format("{} of {} links off by more than {:.0f}% (marked !)\n", off, c.rows.size(), 100 * tolerance);
  return out;
}

double parse_seconds(const std::string& text, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw ProbeInputError(fmt::format("{} '{}': not a duration (write it like 60s, 500ms or 2m)", what, text));
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "m" || unit == "min") scale = 60;
  if (scale == 0) throw ProbeInputError(fmt::format("{} '{}': unknown unit '{}' (s, ms or m)", what, text, unit));
  v *= scale;
  if (!std::isfinite(v) || v <= 0) throw ProbeInputError(fmt::format("{} '{}': must be positive", what, text));
  return v;
}

double parse_fraction(const std::string& text, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw ProbeInputError(fmt::format("{} '{}': not a fraction (write it like 5% or 0.05)", what, text));
  }
  const std::string rest = text.substr(used);
  if (rest == "%") v /= 100;
  else if (!rest.empty()) throw ProbeInputError(fmt::format("{} '{}': write it like 5% or 0.05", what, text));
  if (!std::isfinite(v) || v <= 0 || v >= 1) throw ProbeInputError(fmt::format("{} '{}': must be between 0 and 100%", what, text));
  return v;
}

}  // namespace flexplan::probe
