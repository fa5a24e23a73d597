#include "runtime/bootstrap.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/pipeline_form.hpp"
#include "runtime/errors.hpp"
#include "runtime/host_check.hpp"
#include "runtime/tag.hpp"

namespace flexplan::bootstrap {
namespace {

// The machine a learner sits on: the second-to-last component of its full name.
std::string machine_of(const std::string& full_name) {
  const size_t last = full_name.rfind('/');
  if (last == std::string::npos || last == 0) return "";
  const size_t before = full_name.rfind('/', last - 1);
  return full_name.substr(before == std::string::npos ? 0 : before + 1,
                          last - (before == std::string::npos ? 0 : before + 1));
}

bool names_learner(const std::string& full_name, const std::string& name) {
  return full_name == name ||
         (full_name.size() > name.size() && full_name.ends_with(name) &&
          full_name[full_name.size() - name.size() - 1] == '/');
}

std::string rank_list(const std::vector<int>& ranks) { return fmt::format("{}", fmt::join(ranks, ", ")); }

}  // namespace

std::string this_host() {
  std::array<char, 256> name{};
  return gethostname(name.data(), name.size() - 1) == 0 ? std::string(name.data()) : std::string();
}

HostIdentity Group::host_identity() {
  HostIdentity identity;
  identity.host = this_host();
  const auto hosts = allgather(identity.host);
  for (int r = 0; r < rank(); ++r) identity.local_rank += hosts[static_cast<size_t>(r)] == identity.host;
  return identity;
}

MpiGroup::MpiGroup(MPI_Comm comm) { MPI_Comm_dup(comm, &comm_); }

MpiGroup::~MpiGroup() {
  // A dead peer can make MPI_Comm_free wait forever in some MPIs: leave the duplicate then.
  if (!abandoned_) MPI_Comm_free(&comm_);
}

int MpiGroup::rank() const {
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  return rank;
}

int MpiGroup::size() const {
  int size = 0;
  MPI_Comm_size(comm_, &size);
  return size;
}

// Variable-length: the lengths first, then the bytes.
std::vector<std::string> MpiGroup::allgather(const std::string& mine) {
  const int size = this->size();
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size));
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_);
  std::vector<int> displacements(static_cast<size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displacements[static_cast<size_t>(r)] = total;
    total += lengths[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), displacements.data(),
                 MPI_CHAR, comm_);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    out.push_back(all.substr(static_cast<size_t>(displacements[static_cast<size_t>(r)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  }
  return out;
}

HostIdentity MpiGroup::host_identity() {
  HostIdentity identity;
  identity.host = this_host();
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &identity.local_rank);
  MPI_Comm_free(&node);
  return identity;
}

void MpiGroup::barrier_start() { MPI_Ibarrier(comm_, &barrier_); }

bool MpiGroup::barrier_done() {
  int finished = 0;
  MPI_Test(&barrier_, &finished, MPI_STATUS_IGNORE);
  return finished != 0;
}

int32_t plan_rank_for(const ir::Plan& plan, const Options& options, int mpi_rank,
                      const HostIdentity& host) {
  if (options.rank_mapping == RankMapping::MpiRank) return mpi_rank;
  const auto& names = plan.rank_names;
  if (names.size() != static_cast<size_t>(plan.world_size)) {
    throw RuntimeError("rank mapping by name: the plan carries no learner names");
  }
  std::vector<int> matches;
  if (!options.learner_name.empty()) {
    for (size_t r = 0; r < names.size(); ++r) {
      if (names_learner(names[r], options.learner_name)) matches.push_back(static_cast<int>(r));
    }
    if (matches.size() == 1) return matches[0];
    if (matches.empty()) {
      throw RuntimeError(fmt::format("learner name '{}' (FLEXPLAN_LEARNER_NAME) matches no learner "
                                     "of the plan; its learners are: {}",
                                     options.learner_name, fmt::join(names, ", ")));
    }
    std::vector<std::string> matched;
    for (int r : matches) matched.push_back(names[static_cast<size_t>(r)]);
    throw RuntimeError(fmt::format("learner name '{}' matches several learners ({}); give more of "
                                   "its path",
                                   options.learner_name, fmt::join(matched, ", ")));
  }
  // The local_rank-th learner, in rank order, of the machine named like this host (or like
  // its short name, before the first dot).
  const std::string short_host = host.host.substr(0, host.host.find('.'));
  for (size_t r = 0; r < names.size(); ++r) {
    const std::string machine = machine_of(names[r]);
    if (!machine.empty() && (machine == host.host || machine == short_host)) {
      matches.push_back(static_cast<int>(r));
    }
  }
  if (static_cast<size_t>(host.local_rank) < matches.size()) {
    return matches[static_cast<size_t>(host.local_rank)];
  }
  // Name the machines the plan expects, so that a wrong host name is seen at once.
  std::vector<std::string> machines;
  std::map<std::string, int> learners_on;
  for (const auto& name : names) {
    const std::string machine = machine_of(name);
    if (learners_on[machine]++ == 0) machines.push_back(machine);
  }
  std::string expected;
  for (size_t m = 0; m < machines.size() && m < 16; ++m) {
    expected += fmt::format("{}'{}' ({} learner{})", m ? ", " : "", machines[m], learners_on[machines[m]],
                            learners_on[machines[m]] == 1 ? "" : "s");
  }
  if (machines.size() > 16) expected += fmt::format(" and {} more", machines.size() - 16);
  throw RuntimeError(fmt::format(
      "rank mapping by name: this is local rank {} on host '{}', but the plan has {} learner(s) "
      "on a machine of that name; the plan's machines are {} (name the topology's machines after "
      "the hosts, or set FLEXPLAN_LEARNER_NAME to name the learner instead)",
      host.local_rank, host.host, matches.size(), expected));
}

// plan.bin refuses pipelines beyond this (ir/pipeline_form.hpp): one fact for both.
static_assert(ir::kMaxExpandedOps <= tag::kMaxMessages,
              "a pipeline plan.bin accepts must be numberable by the tags");

void check_tag_limits(const ir::Plan& plan) {
  // The tags number a schedule's ops (runtime/tag.hpp). Pipelines that decode are within it
  // (the static_assert above); a schedule held whole of 2^31 - 1 ops would take a plan of tens
  // of GB, so none that loads comes near. Star reduces' sources are bounded by the verifier.
  for (const auto& schedule : plan.schedules) {
    const uint64_t ops = ir::expanded_op_count(schedule);
    if (ops > tag::kMaxMessages) {
      throw RuntimeError(fmt::format("schedule '{}' has {} ops; the runtime's tags number at most {} ops of "
                                     "one schedule",
                                     schedule.algorithm, ops, tag::kMaxMessages));
    }
  }
}

namespace {

const char* peer_failure_name(int mode) {
  switch (static_cast<PeerFailureDetection>(mode)) {
    case PeerFailureDetection::Remote: return "remote";
    case PeerFailureDetection::All: return "all";
    case PeerFailureDetection::None: return "none";
  }
  return "?";
}

}  // namespace

void agree_on_settings(Group& group, const Options& options) {
  // One record per rank: the settings that must agree, then the errors, NUL-separated (no
  // environment value can hold a NUL).
  std::string mine = std::to_string(static_cast<int>(options.peer_failure));
  for (const auto& error : options.errors) {
    mine += '\0';
    mine += error;
  }
  const auto records = group.allgather(mine);
  std::string errors;
  std::map<int, std::vector<int>> by_peer_failure;
  for (size_t r = 0; r < records.size(); ++r) {
    size_t start = 0;
    for (size_t field = 0; start <= records[r].size(); ++field) {
      const size_t end = std::min(records[r].find('\0', start), records[r].size());
      const std::string text = records[r].substr(start, end - start);
      if (field == 0) {
        by_peer_failure[std::atoi(text.c_str())].push_back(static_cast<int>(r));
      } else {
        errors += fmt::format("\n  {} {}: {}", group.member_noun(), r, text);
      }
      start = end + 1;
    }
  }
  if (!errors.empty()) throw InputError("flexplan: configuring the communicator failed" + errors);
  if (by_peer_failure.size() > 1) {
    std::string message = "flexplan: the ranks detect peer failure differently (FLEXPLAN_PEER_FAILURE), "
                          "which must be the same on every rank:";
    for (const auto& [mode, ranks] : by_peer_failure) {
      message += fmt::format("\n  '{}': {}{} {}", peer_failure_name(mode), group.member_noun(),
                             ranks.size() > 1 ? "s" : "", rank_list(ranks));
    }
    throw InputError(message);
  }
}

void raise_if_any_failed(Group& group, const std::string& local_error, const std::string& what,
                         bool bad_input) {
  const auto errors = group.allgather(local_error);
  if (std::all_of(errors.begin(), errors.end(), [](const auto& e) { return e.empty(); })) return;
  std::string message = fmt::format("flexplan: {} failed", what);
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r].empty()) message += fmt::format("\n  {} {}: {}", group.member_noun(), r, errors[r]);
  }
  if (bad_input) throw InputError(message);
  throw RuntimeError(message);
}

std::vector<int32_t> agree_on_plan(Group& group, const PlanIdentity& mine) {
  const int size = group.size();
  // Fixed-size records (host byte order: every member runs this same build); the topology hash
  // travels as text in the second gather.
  const std::array<int64_t, 4> record{mine.world_size, static_cast<int64_t>(mine.fingerprint),
                                      static_cast<int64_t>(mine.chunk_bytes), mine.plan_rank};
  const auto records = group.allgather(
      std::string(reinterpret_cast<const char*>(record.data()), sizeof(record)));
  const auto topology_hashes = group.allgather(mine.topology_hash);
  auto field = [&](int rank, size_t i) {
    int64_t value = 0;
    const auto& bytes = records[static_cast<size_t>(rank)];
    if (bytes.size() == sizeof(record)) std::memcpy(&value, bytes.data() + i * sizeof(int64_t), sizeof(value));
    return value;
  };

  // Same plan everywhere?
  std::map<uint64_t, std::vector<int>> holders;
  for (int r = 0; r < size; ++r) holders[static_cast<uint64_t>(field(r, 1))].push_back(r);
  if (holders.size() > 1) {
    std::string message = "flexplan: the ranks loaded different plans:";
    for (const auto& [fingerprint, ranks] : holders) {
      message += fmt::format("\n  plan {:016x} (world size {}, topology hash '{}'): {}s {}",
                             fingerprint, field(ranks[0], 0),
                             topology_hashes[static_cast<size_t>(ranks[0])], group.member_noun(),
                             rank_list(ranks));
    }
    throw InputError(message);
  }
  if (mine.world_size != size) {
    throw InputError(fmt::format("flexplan: the plan is for world size {} but the job has {} "
                                   "{}s ({})",
                                   mine.world_size, size, group.member_noun(),
                                   group.launch_hint(mine.world_size)));
  }
  // Chunking decides message lengths: it must agree.
  std::map<int64_t, std::vector<int>> chunkings;
  for (int r = 0; r < size; ++r) chunkings[field(r, 2)].push_back(r);
  if (chunkings.size() > 1) {
    std::string message = "flexplan: the ranks use different chunk sizes (FLEXPLAN_CHUNK_BYTES):";
    for (const auto& [chunk_bytes, ranks] : chunkings) {
      message += fmt::format("\n  {} bytes: {}s {}", chunk_bytes, group.member_noun(), rank_list(ranks));
    }
    throw InputError(message);
  }
  // The plan ranks must be a permutation.
  std::vector<int32_t> plan_rank_of(static_cast<size_t>(size));
  std::vector<std::vector<int>> claimed_by(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const int64_t plan_rank = field(r, 3);
    plan_rank_of[static_cast<size_t>(r)] = static_cast<int32_t>(plan_rank);
    if (plan_rank >= 0 && plan_rank < size) claimed_by[static_cast<size_t>(plan_rank)].push_back(r);
  }
  std::string problems;
  for (int p = 0; p < size; ++p) {
    const auto& claimants = claimed_by[static_cast<size_t>(p)];
    if (claimants.size() > 1) {
      problems += fmt::format("\n  plan rank {} is claimed by {}s {}", p, group.member_noun(),
                             rank_list(claimants));
    } else if (claimants.empty()) {
      problems += fmt::format("\n  plan rank {} is claimed by no process", p);
    }
  }
  if (!problems.empty()) throw InputError("flexplan: the rank mapping is not one-to-one:" + problems);
  return plan_rank_of;
}

std::string check_hosts(Group& group, const ir::Plan& plan, const std::vector<int32_t>& plan_rank_of,
                        const std::string& host, bool allow_mismatch) {
  // One record per rank: its allowance, then its host name.
  const auto records = group.allgather(std::string(allow_mismatch ? "1" : "0") + host);
  const size_t size = records.size();
  std::vector<std::string> host_of(size);
  std::vector<int> member_of(size);
  std::vector<int> refusing;
  for (size_t r = 0; r < size; ++r) {
    const auto p = static_cast<size_t>(plan_rank_of[r]);
    host_of[p] = records[r].empty() ? std::string() : records[r].substr(1);
    member_of[p] = static_cast<int>(r);
    if (records[r].empty() || records[r][0] != '1') refusing.push_back(static_cast<int>(r));
  }
  const std::string difference = compare_hosts(plan.rank_names, host_of, member_of, group.member_noun());
  if (difference.empty() || refusing.empty()) return difference;
  std::string message = fmt::format(
      "flexplan: the plan's machines are not the job's hosts: {}\n  launch one process per learner on "
      "each machine's host in plan order (flexplan inspect lists the learners), or set "
      "FLEXPLAN_ALLOW_HOST_MISMATCH=1 on every rank to run anyway",
      difference);
  if (refusing.size() < size) {
    message += fmt::format(" (it is set on some ranks, but not on {}{} {})", group.member_noun(),
                           refusing.size() == 1 ? "" : "s", rank_ranges(refusing));
  }
  throw InputError(message);
}

std::vector<std::vector<uint8_t>> exchange_by_plan_rank(Group& group,
                                                        const std::vector<uint8_t>& mine,
                                                        const std::vector<int32_t>& plan_rank_of) {
  const auto gathered = group.allgather(std::string(mine.begin(), mine.end()));
  std::vector<std::vector<uint8_t>> by_plan_rank(gathered.size());
  for (size_t r = 0; r < gathered.size(); ++r) {
    by_plan_rank[static_cast<size_t>(plan_rank_of[r])].assign(gathered[r].begin(), gathered[r].end());
  }
  return by_plan_rank;
}

}  // namespace flexplan::bootstrap
