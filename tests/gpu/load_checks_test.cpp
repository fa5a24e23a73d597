// The GPU backend's plan-load checks (runtime/gpu/load_checks.hpp), one mismatch at a time:
// each yields a reason naming what differs and on which ranks; matching records pass.
#include <gtest/gtest.h>

#include "runtime/gpu/load_checks.hpp"

namespace flexplan::gpu {
namespace {

std::vector<LoadRecord> good(int world) {
  std::vector<LoadRecord> records;
  for (int r = 0; r < world; ++r) {
    LoadRecord record;
    record.nccl_version = 22809;
    record.plan_world_size = world;
    record.plan_fingerprint = 0x1234;
    record.topology_name = "paper-2m-4";
    record.topology_hash = "00112233aabbccdd";
    record.host = r < 2 ? "m0" : "m1";
    record.device = r % 2;
    record.device_bus_id = r % 2 ? "0000:02:00.0" : "0000:01:00.0";
    records.push_back(record);
  }
  return records;
}

LoadExpectations expect(int world) {
  LoadExpectations e;
  e.job_size = world;
  return e;
}

TEST(LoadChecks, MatchingRecordsPass) { EXPECT_EQ(check_load_records(good(4), expect(4)), ""); }

TEST(LoadChecks, NcclVersionDiffers) {
  auto records = good(4);
  records[2].nccl_version = 22703;
  const std::string reason = check_load_records(records, expect(4));
  EXPECT_NE(reason.find("NCCL version differs"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rank 2 NCCL 2.27.3"), std::string::npos) << reason;
  EXPECT_NE(reason.find("ranks 0,1,3 NCCL 2.28.9"), std::string::npos) << reason;
}

TEST(LoadChecks, NcclTooOld) {
  auto records = good(2);
  for (auto& r : records) r.nccl_version = 21705;
  const std::string reason = check_load_records(records, expect(2));
  EXPECT_NE(reason.find("older than 2.18.0"), std::string::npos) << reason;
}

TEST(LoadChecks, WorldSizeDiffersFromJob) {
  auto records = good(4);
  for (auto& r : records) r.plan_world_size = 5;
  const std::string wrong = check_load_records(records, expect(4));
  EXPECT_NE(wrong.find("the plan is for 5 ranks, the job has 4 processes"), std::string::npos) << wrong;
}

TEST(LoadChecks, WorldSizeDiffersBetweenRanks) {
  auto records = good(3);
  records[1].plan_world_size = 4;
  const std::string reason = check_load_records(records, expect(3));
  EXPECT_NE(reason.find("world size differs"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rank 1 loaded a plan for 4 ranks"), std::string::npos) << reason;
}

TEST(LoadChecks, TopologyDiffersBetweenRanks) {
  auto records = good(4);
  records[3].topology_hash = "ffffffffffffffff";
  const std::string reason = check_load_records(records, expect(4));
  EXPECT_NE(reason.find("topology differs"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rank 3 hold a plan for topology hash ffffffffffffffff"), std::string::npos) << reason;
}

TEST(LoadChecks, TopologyIsNotTheCluster) {
  auto e = expect(4);
  e.topology_hash = "0000000000000001";
  const std::string reason = check_load_records(good(4), e);
  EXPECT_NE(reason.find("the plan is for topology paper-2m-4 (hash 00112233aabbccdd), this cluster's topology hash is "
                        "0000000000000001"),
            std::string::npos)
      << reason;
}

TEST(LoadChecks, PlansDifferWithSameTopology) {
  auto records = good(2);
  records[0].plan_fingerprint = 99;
  const std::string reason = check_load_records(records, expect(2));
  EXPECT_NE(reason.find("plans differ"), std::string::npos) << reason;
}

TEST(LoadChecks, TwoRanksOnOneDevice) {
  auto records = good(4);
  records[3].device = 0;
  records[3].device_bus_id = "0000:01:00.0";
  const std::string reason = check_load_records(records, expect(4));
  EXPECT_NE(reason.find("ranks 2 and 3 both use device 0 (bus id 0000:01:00.0) on host m1"), std::string::npos)
      << reason;
}

TEST(LoadChecks, LocalErrorIsNamedFirst) {
  auto records = good(3);
  records[1].local_error = "plan missing.bin: cannot open";
  records[2].nccl_version = 1;
  const std::string reason = check_load_records(records, expect(3));
  EXPECT_EQ(reason, "the plan cannot be used: rank 1: plan missing.bin: cannot open");
}

TEST(LoadChecks, RecordsSurviveTheGatherEncoding) {
  LoadRecord record = good(2)[1];
  record.local_error = "x";
  const std::vector<char> bytes = encode(record);
  ASSERT_EQ(bytes.size(), encoded_size());
  const LoadRecord back = decode(bytes.data());
  EXPECT_EQ(back.nccl_version, record.nccl_version);
  EXPECT_EQ(back.plan_world_size, record.plan_world_size);
  EXPECT_EQ(back.plan_fingerprint, record.plan_fingerprint);
  EXPECT_EQ(back.topology_hash, record.topology_hash);
  EXPECT_EQ(back.host, record.host);
  EXPECT_EQ(back.device_bus_id, record.device_bus_id);
  EXPECT_EQ(back.device, record.device);
  EXPECT_EQ(back.local_error, record.local_error);
}

}  // namespace
}  // namespace flexplan::gpu
