// flexbench's output: the nccl-tests style table on stdout and the --json records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/flexbench/bench_args.hpp"

namespace flexplan::bench {

// Times over the timed iterations, each iteration's time being the slowest rank's.
struct TimeStats {
  double median_us = 0, min_us = 0, max_us = 0;
};
TimeStats summarize(std::vector<double> times_us);

struct Row {
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string algorithm;
  TimeStats flexplan;
  uint64_t wrong = 0;
  std::optional<TimeStats> mpi;  // none where MPI has no such type (float16, bfloat16)
};

// algbw = bytes / time; busbw = algbw * the collective's factor in nccl-tests: all-reduce
// 2(n-1)/n, reduce-scatter and all-gather (n-1)/n, broadcast and reduce 1.
double algbw_gbps(uint64_t bytes, double time_us);
double bus_factor(ir::Collective collective, int world);
double busbw_gbps(uint64_t bytes, double time_us, int world,
                  ir::Collective collective = ir::Collective::AllReduce);
// "MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Allgather", "MPI_Bcast", "MPI_Reduce".
const char* mpi_name(ir::Collective collective);
// Where ranks outnumber this host's cores, why blocking progress was chosen (for the header).
struct ProgressMode {
  bool blocking = false;
  std::string why;  // "" or "5 ranks share 2 cores on this host; --polling to busy-poll"
};

// `blocking`: the progress mode the runtime runs in (Communicator::options().blocking), which
// FLEXPLAN_BLOCKING=1 sets as well as --blocking.
void print_header(const BenchArgs& args, const ProgressMode& mode, const std::string& topology, int world);
void print_row(const BenchArgs& args, const Row& row, int world);
void write_json(const std::string& path, const BenchArgs& args, bool blocking, const std::string& topology,
                int world, const std::vector<Row>& rows);

}  // namespace flexplan::bench
