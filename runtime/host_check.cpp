// The plan's machines against the job's hosts (host_check.hpp).
#include "runtime/host_check.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace flexplan::bootstrap {
namespace {

// At most this many machines and hosts are listed; the rest are counted.
constexpr size_t kListed = 16;

// Groups in order of first appearance by plan rank.
struct Groups {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<int>> ranks;
  void add(const std::string& key, int rank) {
    auto [it, fresh] = ranks.try_emplace(key);
    if (fresh) keys.push_back(key);
    it->second.push_back(rank);
  }
};

}  // namespace

std::string machine_path(const std::string& learner_full_name) {
  const size_t last = learner_full_name.rfind('/');
  return last == std::string::npos ? std::string() : learner_full_name.substr(0, last);
}

std::string rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

std::string compare_hosts(const std::vector<std::string>& rank_names,
                          const std::vector<std::string>& host_of_plan_rank,
                          const std::vector<int>& member_of_plan_rank, const std::string& member_noun) {
  const size_t size = host_of_plan_rank.size();
  if (rank_names.size() != size || member_of_plan_rank.size() != size) return "";
  Groups machines, hosts;
  for (size_t p = 0; p < size; ++p) {
    machines.add(machine_path(rank_names[p]), static_cast<int>(p));
    hosts.add(host_of_plan_rank[p], static_cast<int>(p));
  }
  // Equal partitions: each machine's ranks are exactly one host's.
  bool match = machines.keys.size() == hosts.keys.size();
  for (size_t m = 0; match && m < machines.keys.size(); ++m) {
    const auto& ranks = machines.ranks[machines.keys[m]];
    match = hosts.ranks[host_of_plan_rank[static_cast<size_t>(ranks[0])]] == ranks;
  }
  if (match) return "";
  std::string out = fmt::format("the plan expects {} machine{}:", machines.keys.size(), machines.keys.size() == 1 ? "" : "s");
  for (size_t m = 0; m < machines.keys.size() && m < kListed; ++m) {
    const auto& key = machines.keys[m];
    out += fmt::format("\n    {}: plan rank{} {}", key.empty() ? "(the root)" : key,
                       machines.ranks[key].size() == 1 ? "" : "s", rank_ranges(machines.ranks[key]));
  }
  if (machines.keys.size() > kListed) out += fmt::format("\n    and {} more", machines.keys.size() - kListed);
  out += fmt::format("\n  the job runs on {} host{}:", hosts.keys.size(), hosts.keys.size() == 1 ? "" : "s");
  for (size_t h = 0; h < hosts.keys.size() && h < kListed; ++h) {
    const auto& ranks = hosts.ranks[hosts.keys[h]];
    std::vector<int> members;
    for (int p : ranks) members.push_back(member_of_plan_rank[static_cast<size_t>(p)]);
    out += fmt::format("\n    {}: plan rank{} {} ({}{} {})", hosts.keys[h].empty() ? "(no name)" : hosts.keys[h],
                       ranks.size() == 1 ? "" : "s", rank_ranges(ranks), member_noun, members.size() == 1 ? "" : "s",
                       rank_ranges(members));
  }
  if (hosts.keys.size() > kListed) out += fmt::format("\n    and {} more", hosts.keys.size() - kListed);
  return out;
}

}  // namespace flexplan::bootstrap
