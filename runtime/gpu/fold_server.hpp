// The fold server: one kernel per staged operation, enqueued on the staged path's own stream,
// that serves the operation's local arithmetic (folds, avg's division) posted by the host
// through a queue in pinned memory, until the host tells it to return. The host thread that
// runs the operation then makes no CUDA call that waits for the device: it only writes requests
// and reads replies. That is what CUDA's rules ask of work a stream waits for (no host function
// waits on other CUDA work; nothing ordered only by memory flags runs on another stream, which
// the scheduler could put behind the waiting one), as NCCL's kernels wait for its proxy thread.
//
// The protocol (host side in device_arithmetic.cpp), every flag a 32-bit counter in `FoldQueue`:
//   1. the kernel starts, each block reads `posted`, and the last block to check in writes
//      `running` = its operation number;
//   2. for each request the host fills `request`, then writes `posted` + 1; every block does its
//      share, and the last one to finish writes `finished` = that `posted`;
//   3. the host writes `stop` = the operation number (or a later one); blocks return.
// Comparisons of operation numbers are cyclic (int32 difference), so a server whose operation
// was already told to stop before it started returns at once.
//
// fold_server.cu is the CUDA kernel; fold_server_host.cpp the host stand-in the emulation links
// (a host function on the stream that serves the same queue).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime/datatype.hpp"

namespace flexplan::gpu {

// Parts per request; a longer fold is posted as several requests, left to right.
inline constexpr size_t kMaxFoldParts = 16;

enum class FoldKind : uint32_t { Fold = 0, Divide = 1 };

// One request: out[i] = parts[0][i] op ... op parts[count-1][i] (left to right, each step
// rounded as the host's combine), or out[i] /= divisor. Pointers into pinned host memory.
struct FoldRequest {
  FoldKind kind;
  DataType type;
  ReduceOp op;
  uint32_t count;
  uint64_t n;
  uint64_t divisor;
  void* out;
  const void* parts[kMaxFoldParts];
};

// Lives in pinned host memory (cudaMallocHost), read and written by both sides. The two sides'
// fields are on separate cache lines.
struct FoldQueue {
  alignas(64) uint32_t running;   // device -> host: the operation being served
  uint32_t finished;              // device -> host: the last request done
  alignas(64) uint32_t posted;    // host -> device: the last request posted
  uint32_t stop;                  // host -> device: servers of this operation or earlier return
  alignas(64) FoldRequest request;
};

// Enqueues operation `operation`'s server on `stream`. `arrivals` is a zeroed device-memory
// counter the blocks meet at (unused by the stand-in). Returns the launch's error.
cudaError_t launch_fold_server(FoldQueue* queue, unsigned* arrivals, uint32_t operation, cudaStream_t stream);

#ifdef __CUDACC__
#define FLEXPLAN_HOST_DEVICE __host__ __device__
#else
#define FLEXPLAN_HOST_DEVICE
#endif
// Whether `a` is `b` or later, cyclically.
FLEXPLAN_HOST_DEVICE inline bool at_or_after(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

}  // namespace flexplan::gpu
