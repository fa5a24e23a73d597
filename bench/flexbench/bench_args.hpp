// flexbench's command line, in the manner of the nccl-tests tools:
//   flexbench PLAN [--collective C] [-r ROOT] -b MIN -e MAX -f FACTOR [-a ALGORITHM] [-n ITERS]
//             [-w WARMUP] [-t DTYPE] [-o REDOP] [--blocking | --polling] [--check 0|1]
//             [--json FILE] [--device [--staged]]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/plan.hpp"
#include "runtime/datatype.hpp"

namespace flexplan::bench {

struct BenchArgs {
  std::string plan_path;
  ir::Collective collective = ir::Collective::AllReduce;
  int root = 0;  // broadcast and reduce
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 128ull << 20;
  uint64_t factor = 2;
  std::string algorithm;  // empty: the plan's choice per size
  int iterations = 20;
  int warmup = 5;
  int agg_iters = 1;  // calls back to back per timed iteration (nccl-tests' -m)
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  bool blocking = false;
  bool polling = false;   // busy-poll even where ranks outnumber this host's cores
  bool check = true;
  bool mpi = true;        // time MPI_Allreduce beside each size (0: skip, saves a run on slow links)
  std::string json_path;
  bool device = false;    // device buffers through the GPU backend (NCCL), out of place and in place
  bool staged = false;    // with device: the UCX path staged through pinned memory instead of NCCL
};

// Parses argv. Returns the arguments, or nullopt after printing help or an error (then
// `exit_code` says how to leave: 0 for --help, 2 for bad arguments).
std::optional<BenchArgs> parse_args(int argc, char** argv, bool print, int& exit_code);

// A size given to `option`, by the rule every flexplan command reads sizes with
// (topology/sizes.hpp: "8", "64K", "1.5M", "128 M", binary as nccl-tests); warns about "16MB"
// when `print`. Throws std::invalid_argument naming the option.
uint64_t parse_size(const std::string& text, std::string_view option, bool print);

// The data type of -t/--dtype, or of the older -d/--datatype when that was given (with a
// warning when `print`); the older names ("float", "half") are read with a warning too.
std::optional<DataType> parse_dtype(const std::string& name, const std::string& old_flag_value, bool print);

}  // namespace flexplan::bench
