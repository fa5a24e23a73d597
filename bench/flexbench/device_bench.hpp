// flexbench --device: a collective of a plan on device buffers through the GPU backend
// (runtime/gpu), nccl-tests style: out-of-place and in-place columns per size.
#pragma once

#include "bench/flexbench/bench_args.hpp"

namespace flexplan::bench {

// Exit status as flexbench's: 0, 1 wrong results, 2 bad input (plan, checks at load), 3 failed.
int run_device(const BenchArgs& args, int rank, int world);

}  // namespace flexplan::bench
