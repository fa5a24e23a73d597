// The plan's machines against the job's hosts: learners grouped by the machine above them in
// the plan's names, processes grouped by the host they run on. Pure (no MPI), so that every
// rank reaches the same verdict from the same gathered facts, and tests call it directly.
#pragma once

#include <string>
#include <vector>

namespace flexplan::bootstrap {

// The machine of a learner: its full name without the last component ("switch/m1/gpu2" ->
// "switch/m1"); "" for a name without '/'.
std::string machine_path(const std::string& learner_full_name);

// "" when every plan machine's learners run on one host and no two machines share a host (or
// `rank_names` does not name every plan rank: nothing to compare). Otherwise both groupings,
// one line per machine and per host with its plan ranks, e.g.
//   the plan expects 2 machines:
//     switch/m0: plan ranks 0-1
//     switch/m1: plan ranks 2-4
//   the job runs on 1 host:
//     hostA: plan ranks 0-4 (MPI ranks 0-4)
// `host_of_plan_rank[p]` is the host of the process playing plan rank p, and
// `member_of_plan_rank[p]` its rank in the job (named `member_noun`).
std::string compare_hosts(const std::vector<std::string>& rank_names,
                          const std::vector<std::string>& host_of_plan_rank,
                          const std::vector<int>& member_of_plan_rank, const std::string& member_noun);

// "0-3, 5, 7-8"
std::string rank_ranges(std::vector<int> ranks);

}  // namespace flexplan::bootstrap
