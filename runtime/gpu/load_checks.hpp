// The checks a GPU job makes when it loads a plan: every rank describes what it loaded and where
// it runs (a LoadRecord), the records are gathered, and every rank evaluates the same checks on
// the same records, so that either all ranks go on or all fail with the same reason naming
// what differs (NCCL version, world size, plan and topology, device placement). Pure: no MPI,
// no CUDA, so each mismatch is tested directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flexplan::gpu {

struct LoadRecord {
  int nccl_version = 0;          // ncclGetVersion
  int plan_world_size = 0;       // the plan's world size (0 when the plan did not load)
  uint64_t plan_fingerprint = 0;  // the whole plan's content
  std::string topology_name;
  std::string topology_hash;     // the plan's, 16 hex digits
  std::string host;
  std::string device_bus_id;     // cudaDeviceGetPCIBusId of the chosen device
  int device = -1;
  std::string local_error;       // what failed on this rank before the gather, or ""
};

struct LoadExpectations {
  int job_size = 0;                  // processes in the job (the communicator's size)
  int min_nccl_version = 21800;      // ncclCommSplit needs 2.18
  std::string topology_hash;         // the cluster's, when the job knows it (else not checked)
};

// "" when the plan can be used, else the reason, the same on every rank given the same records.
std::string check_load_records(const std::vector<LoadRecord>& records, const LoadExpectations& expect);

// A fixed-size byte form for the gather (strings truncated to their field's size).
std::vector<char> encode(const LoadRecord& record);
LoadRecord decode(const char* bytes);
size_t encoded_size();

}  // namespace flexplan::gpu
