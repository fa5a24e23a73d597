// The plan-load checks of a GPU job (load_checks.hpp).
#include "runtime/gpu/load_checks.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "runtime/gpu/device_api.hpp"

namespace flexplan::gpu {
namespace {

constexpr size_t kName = 96, kHash = 24, kHost = 96, kBus = 32, kError = 512;

// Which ranks hold each distinct value, for "rank 0 has X, rank 2 has Y" messages.
template <typename T, typename Show>
std::string differing(const std::vector<LoadRecord>& records, T LoadRecord::*field, Show show) {
  std::map<T, std::vector<size_t>> by_value;
  for (size_t r = 0; r < records.size(); ++r) by_value[records[r].*field].push_back(r);
  if (by_value.size() < 2) return "";
  std::string out;
  for (const auto& [value, ranks] : by_value) {
    if (!out.empty()) out += "; ";
    out += fmt::format("rank{} {} {}", ranks.size() > 1 ? "s" : "",
                       fmt::join(ranks.begin(), ranks.begin() + std::min<size_t>(ranks.size(), 8), ","),
                       show(value));
    if (ranks.size() > 8) out += fmt::format(" (and {} more)", ranks.size() - 8);
  }
  return out;
}

void put(std::vector<char>& out, size_t& at, const std::string& s, size_t size) {
  std::memcpy(out.data() + at, s.data(), std::min(s.size(), size - 1));
  at += size;
}
std::string get(const char* bytes, size_t& at, size_t size) {
  std::string s(bytes + at, strnlen(bytes + at, size));
  at += size;
  return s;
}

}  // namespace

size_t encoded_size() { return 3 * sizeof(int) + sizeof(uint64_t) + kName + kHash + kHost + kBus + kError; }

std::vector<char> encode(const LoadRecord& record) {
  std::vector<char> out(encoded_size(), 0);
  size_t at = 0;
  for (int v : {record.nccl_version, record.plan_world_size, record.device}) {
    std::memcpy(out.data() + at, &v, sizeof v);
    at += sizeof v;
  }
  std::memcpy(out.data() + at, &record.plan_fingerprint, sizeof(uint64_t));
  at += sizeof(uint64_t);
  put(out, at, record.topology_name, kName);
  put(out, at, record.topology_hash, kHash);
  put(out, at, record.host, kHost);
  put(out, at, record.device_bus_id, kBus);
  put(out, at, record.local_error, kError);
  return out;
}

LoadRecord decode(const char* bytes) {
  LoadRecord record;
  size_t at = 0;
  for (int* v : {&record.nccl_version, &record.plan_world_size, &record.device}) {
    std::memcpy(v, bytes + at, sizeof *v);
    at += sizeof *v;
  }
  std::memcpy(&record.plan_fingerprint, bytes + at, sizeof(uint64_t));
  at += sizeof(uint64_t);
  record.topology_name = get(bytes, at, kName);
  record.topology_hash = get(bytes, at, kHash);
  record.host = get(bytes, at, kHost);
  record.device_bus_id = get(bytes, at, kBus);
  record.local_error = get(bytes, at, kError);
  return record;
}

std::string check_load_records(const std::vector<LoadRecord>& records, const LoadExpectations& expect) {
  const std::string prefix = "the plan cannot be used: ";
  for (size_t r = 0; r < records.size(); ++r)
    if (!records[r].local_error.empty()) return prefix + fmt::format("rank {}: {}", r, records[r].local_error);
  if (static_cast<int>(records.size()) != expect.job_size)
    return prefix + fmt::format("{} records for a job of {} processes", records.size(), expect.job_size);
  const auto version = [](int v) { return fmt::format("NCCL {} ({})", nccl_version_text(v), v); };
  if (std::string d = differing(records, &LoadRecord::nccl_version, version); !d.empty())
    return prefix + "the NCCL version differs between ranks: " + d;
  if (!records.empty() && records[0].nccl_version < expect.min_nccl_version)
    return prefix + fmt::format("{} is older than {}, which ncclCommSplit needs", version(records[0].nccl_version),
                                nccl_version_text(expect.min_nccl_version));
  if (std::string d = differing(records, &LoadRecord::plan_world_size,
                                [](int w) { return fmt::format("loaded a plan for {} ranks", w); });
      !d.empty())
    return prefix + "the plan's world size differs between ranks: " + d;
  if (!records.empty() && records[0].plan_world_size != expect.job_size)
    return prefix + fmt::format("the plan is for {} ranks, the job has {} processes", records[0].plan_world_size,
                                expect.job_size);
  if (std::string d = differing(records, &LoadRecord::topology_hash,
                                [](const std::string& h) { return "hold a plan for topology hash " + h; });
      !d.empty())
    return prefix + "the topology differs between ranks: " + d;
  if (!expect.topology_hash.empty() && !records.empty() && records[0].topology_hash != expect.topology_hash)
    return prefix + fmt::format("the plan is for topology {} (hash {}), this cluster's topology hash is {}",
                                records[0].topology_name, records[0].topology_hash, expect.topology_hash);
  if (std::string d = differing(records, &LoadRecord::plan_fingerprint,
                                [](uint64_t f) { return fmt::format("hold plan fingerprint {:016x}", f); });
      !d.empty())
    return prefix + "the plans differ between ranks (same topology): " + d;
  // Placement: NCCL refuses two ranks of one communicator on one GPU.
  std::map<std::pair<std::string, std::string>, size_t> owner;
  for (size_t r = 0; r < records.size(); ++r) {
    const auto key = std::make_pair(records[r].host, records[r].device_bus_id);
    const auto [it, fresh] = owner.emplace(key, r);
    if (!fresh)
      return prefix + fmt::format("ranks {} and {} both use device {} (bus id {}) on host {}; NCCL needs one GPU per "
                                  "rank (set FLEXPLAN_DEVICE or CUDA_VISIBLE_DEVICES per process)",
                                  it->second, r, records[r].device, records[r].device_bus_id, records[r].host);
  }
  return "";
}

}  // namespace flexplan::gpu
