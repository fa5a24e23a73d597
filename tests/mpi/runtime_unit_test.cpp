// Single-process tests of the runtime's pieces that need no peers: 16-bit float conversions,
// the reduction kernels, the tag layout and the options' environment parsing. (The per-rank
// programs the runtime executes are codegen's, tested in tests/unit/codegen_*.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <vector>

#include "codegen/rank_program.hpp"
#include "runtime/errors.hpp"
#include "runtime/half.hpp"
#include "runtime/host_check.hpp"
#include "runtime/network_watch.hpp"
#include "runtime/options.hpp"
#include "runtime/reduce_kernels.hpp"
#include "runtime/tag.hpp"
#include "runtime/ucx_transport.hpp"

namespace flexplan {
namespace {

TEST(Half, Float16RoundTripsEveryValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = half::f16_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half::f16_to_float(half::float_to_f16(f)))) << bits;
    } else {
      EXPECT_EQ(half::float_to_f16(f), h) << "bits " << bits;
    }
  }
}

TEST(Half, Float16RoundsToNearestEven) {
  EXPECT_EQ(half::f16_to_float(half::float_to_f16(1.0f + 0x1p-11f)), 1.0f);  // tie: to even
  EXPECT_EQ(half::f16_to_float(half::float_to_f16(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);
  EXPECT_EQ(half::f16_to_float(half::float_to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(half::f16_to_float(half::float_to_f16(65520.0f))));
  EXPECT_EQ(half::f16_to_float(half::float_to_f16(0x1p-24f)), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(half::f16_to_float(half::float_to_f16(0x1p-26f)), 0.0f);
  EXPECT_EQ(half::float_to_f16(-0.0f), 0x8000);
}

TEST(Half, BFloat16RoundsToNearestEven) {
  for (uint32_t bits = 0; bits < 0x10000; bits += 7) {
    const float f = half::bf16_to_float(static_cast<uint16_t>(bits));
    if (!std::isnan(f)) {
      EXPECT_EQ(half::float_to_bf16(f), bits);
    }
  }
  EXPECT_EQ(half::bf16_to_float(half::float_to_bf16(1.0f + 0x1p-8f)), 1.0f);  // tie: to even
  EXPECT_EQ(half::bf16_to_float(half::float_to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isnan(half::bf16_to_float(half::float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Kernels, IntegerSumAndProdWrapLikeTheType) {
  std::vector<int32_t> a{std::numeric_limits<int32_t>::max(), -7, 3};
  const std::vector<int32_t> b{1, 2, -4};
  kernels::combine(a.data(), a.data(), b.data(), a.size(), DataType::Int32, ReduceOp::Sum);
  EXPECT_EQ(a, (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -5, -1}));
  std::vector<uint8_t> x{200, 16, 3};
  const std::vector<uint8_t> y{2, 16, 5};
  kernels::combine(x.data(), x.data(), y.data(), x.size(), DataType::UInt8, ReduceOp::Prod);
  EXPECT_EQ(x, (std::vector<uint8_t>{144, 0, 15}));
}

TEST(Kernels, MinMaxAndAvgDivision) {
  std::vector<double> a{1.5, -2, 7};
  const std::vector<double> b{0.5, 3, 7};
  std::vector<double> out(3);
  kernels::combine(out.data(), a.data(), b.data(), 3, DataType::Float64, ReduceOp::Min);
  EXPECT_EQ(out, (std::vector<double>{0.5, -2, 7}));
  kernels::combine(out.data(), a.data(), b.data(), 3, DataType::Float64, ReduceOp::Max);
  EXPECT_EQ(out, (std::vector<double>{1.5, 3, 7}));
  std::vector<int64_t> sums{7, -7, 300};
  kernels::divide(sums.data(), sums.size(), DataType::Int64, 2);
  EXPECT_EQ(sums, (std::vector<int64_t>{3, -3, 150}));  // truncation toward zero
  std::vector<uint8_t> small{250};
  kernels::divide(small.data(), 1, DataType::UInt8, 300);  // divisor beyond the type's range
  EXPECT_EQ(small[0], 0);
}

// The kernels' vector loops (one per way the output may alias an input) give, bit for bit, what
// one element at a time does, at lengths that leave a scalar tail, with NaNs and signed zeros
// for min and max.
template <typename T>
void check_kernel_matches_scalar(DataType type) {
  constexpr size_t n = 1027;
  std::mt19937_64 random(7);
  std::vector<T> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      a[i] = static_cast<T>(std::uniform_real_distribution<double>(-4, 4)(random));
      b[i] = static_cast<T>(std::uniform_real_distribution<double>(-4, 4)(random));
    } else {
      a[i] = static_cast<T>(random());
      b[i] = static_cast<T>(random());
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    a[3] = std::numeric_limits<T>::quiet_NaN();
    b[5] = std::numeric_limits<T>::quiet_NaN();
    a[7] = T(-0.0);
    b[7] = T(0.0);
  }
  const auto scalar = [](T x, T y, ReduceOp op) -> T {
    T out{};
    kernels::combine(&out, &x, &y, 1, std::is_same_v<T, float>    ? DataType::Float32
                                      : std::is_same_v<T, double> ? DataType::Float64
                                      : std::is_same_v<T, int32_t> ? DataType::Int32
                                      : std::is_same_v<T, int64_t> ? DataType::Int64
                                                                   : DataType::UInt8,
                     op);
    return out;
  };
  const auto same_bits = [](const std::vector<T>& got, const std::vector<T>& want) {
    return std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0;
  };
  for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
    std::vector<T> want(n), twice(n);
    for (size_t i = 0; i < n; ++i) want[i] = scalar(a[i], b[i], op);
    for (size_t i = 0; i < n; ++i) twice[i] = scalar(a[i], a[i], op);
    std::vector<T> out(n);
    kernels::combine(out.data(), a.data(), b.data(), n, type, op);
    EXPECT_TRUE(same_bits(out, want)) << to_string(type) << " " << to_string(op) << ": apart";
    std::vector<T> into_a = a;
    kernels::combine(into_a.data(), into_a.data(), b.data(), n, type, op);
    EXPECT_TRUE(same_bits(into_a, want)) << to_string(type) << " " << to_string(op) << ": into a";
    std::vector<T> into_b = b;
    kernels::combine(into_b.data(), a.data(), into_b.data(), n, type, op);
    EXPECT_TRUE(same_bits(into_b, want)) << to_string(type) << " " << to_string(op) << ": into b";
    std::vector<T> all = a;
    kernels::combine(all.data(), all.data(), all.data(), n, type, op);
    EXPECT_TRUE(same_bits(all, twice)) << to_string(type) << " " << to_string(op) << ": all one buffer";
  }
}

TEST(Kernels, VectorLoopsMatchOneElementAtATime) {
  check_kernel_matches_scalar<float>(DataType::Float32);
  check_kernel_matches_scalar<double>(DataType::Float64);
  check_kernel_matches_scalar<int32_t>(DataType::Int32);
  check_kernel_matches_scalar<int64_t>(DataType::Int64);
  check_kernel_matches_scalar<uint8_t>(DataType::UInt8);
}

TEST(Kernels, Float16SumRoundsOncePerCombine) {
  std::vector<uint16_t> a{half::float_to_f16(2048.0f)}, b{half::float_to_f16(1.0f)};
  kernels::combine(a.data(), a.data(), b.data(), 1, DataType::Float16, ReduceOp::Sum);
  EXPECT_EQ(half::f16_to_float(a[0]), 2048.0f);  // 2049 is a tie between 2048 and 2050
  std::vector<uint16_t> c{half::float_to_bf16(3.0f)}, d{half::float_to_bf16(0.5f)};
  kernels::combine(c.data(), c.data(), d.data(), 1, DataType::BFloat16, ReduceOp::Prod);
  EXPECT_EQ(half::bf16_to_float(c[0]), 1.5f);
}

TEST(Tags, FieldsDoNotOverlapAndSequenceWraps) {
  const uint64_t t = tag::make(5, tag::kMaxMessages - 1, codegen::kMaxChunksPerRange - 1);
  EXPECT_EQ(t >> 52, 5u);
  EXPECT_EQ((t >> 20) & 0x7fffffff, tag::kMaxMessages - 1);
  EXPECT_EQ(t & tag::kAckBit, 0u);
  EXPECT_EQ(t & 0xfffff, codegen::kMaxChunksPerRange - 1);
  EXPECT_EQ(tag::make(5 + (uint64_t{1} << tag::kSequenceBits), 1, 2), tag::make(5, 1, 2));
  EXPECT_NE(tag::make(5, 1, 2), tag::make(5, 2, 1));
  // No data tag is the abort tag, whatever its sequence number and chunk.
  EXPECT_NE(tag::make(0, tag::kMaxMessages - 1, codegen::kMaxChunksPerRange - 1), tag::abort_tag());
  EXPECT_EQ(tag::abort_tag() >> 20, tag::kMaxMessages);
  // Acks carry the ack bit, which no data or abort tag has; the mask takes every ack of one
  // operation and none of another's.
  const uint64_t a = tag::ack(5, tag::kMaxCookie);
  EXPECT_EQ(a >> 52, 5u);
  EXPECT_NE(a & tag::kAckBit, 0u);
  EXPECT_EQ(tag::cookie_of(a), tag::kMaxCookie);
  EXPECT_EQ(a & tag::kAckMask, tag::ack(5, 0));
  EXPECT_NE(tag::ack(6, 3) & tag::kAckMask, tag::ack(5, 0));
  EXPECT_NE(tag::abort_tag() & tag::kAckMask, tag::ack(0, 0));
  // Two operations in flight are less than 2^12 apart, so their tags differ.
  EXPECT_LE(2 * tag::kMaxAhead, uint64_t{1} << tag::kSequenceBits);
}

// A star reduce's sources take the chunk field's high bits (runtime/tag.hpp): for every count of
// sources up to ir::kMaxStarSources, each source's chunks (at most Task::max_chunks, which the
// chunking rule respects by growing its chunks) get tags of their own, all with the op's number.
TEST(Tags, StarSourcesAndChunksShareTheChunkField) {
  std::mt19937_64 random(39);
  for (const uint64_t sources : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{1000}, uint64_t{65537},
                                 uint64_t{999999}, ir::kMaxStarSources}) {
    const uint64_t slots = codegen::star_source_slots(sources);
    ASSERT_GE(slots, std::max<uint64_t>(sources, 1));
    ASSERT_LT(slots, 2 * std::max<uint64_t>(sources, 1));
    const uint64_t max_chunks = codegen::kMaxChunksPerRange / slots;
    ASSERT_EQ(max_chunks * slots, codegen::kMaxChunksPerRange) << sources;
    // Ranges of every length around the limit are cut into at most max_chunks chunks.
    for (const uint64_t elements : {max_chunks - 1, max_chunks, max_chunks + 1, 3 * max_chunks + 7,
                                    uint64_t{1} << 33, random() % (uint64_t{1} << 40) + 1}) {
      if (elements == 0) continue;
      const auto chunking = codegen::chunk_range(elements, 4, 4, max_chunks);
      EXPECT_LE(chunking.chunks, max_chunks) << sources << " sources, " << elements << " elements";
      EXPECT_GE(chunking.chunks * chunking.chunk_elements, elements);
    }
    // The corners of the field: distinct tags, each naming the op.
    std::set<uint64_t> tags;
    const uint64_t message = tag::kMaxMessages - 1;
    for (const uint64_t source : {uint64_t{0}, slots - 1})
      for (const uint64_t chunk : {uint64_t{0}, max_chunks - 1}) {
        const uint64_t t = tag::make(7, message, source * max_chunks + chunk);
        EXPECT_EQ((t >> tag::kChunkBits) & tag::kMaxMessages, message);
        EXPECT_EQ(t & tag::kAckBit, 0u);
        tags.insert(t);
      }
    EXPECT_EQ(tags.size(), slots == 1 && max_chunks == 1 ? 1u : slots == 1 || max_chunks == 1 ? 2u : 4u);
  }
  EXPECT_THROW(codegen::star_source_slots(ir::kMaxStarSources + 1), std::length_error);
}

// The runtime's transport sends every message eagerly, however long (docs/runtime.md, Eager
// chunks): a send completes once the receiving worker has progressed, before any receive
// is posted for it. Under rendezvous it would wait for that receive. Two workers of this
// process, over shared memory, as the communicator sets them up on one host.
TEST(Transport, LongChunksGoEager) {
  if (std::getenv("UCX_RNDV_THRESH") != nullptr) GTEST_SKIP() << "UCX_RNDV_THRESH is set";
  UcxTransport sender(false, 2, "posix,sysv,self", true);
  UcxTransport receiver(false, 2, "posix,sysv,self", true);
  const std::vector<std::vector<uint8_t>> addresses{sender.address(), receiver.address()};
  sender.connect(addresses, 0, {false, false});
  receiver.connect(addresses, 1, {false, false});
  // The chunk of a range too long for 2^20 chunks of the default size, and a 16 MB one.
  const uint64_t range_bytes = uint64_t{1} << 41;  // 2 TiB of float32
  const auto chunking = codegen::chunk_range(range_bytes / 4, 4, codegen::kDefaultChunkBytes);
  for (const size_t bytes : {size_t{chunking.chunk_elements * 4}, size_t{16} << 20}) {
    std::vector<uint8_t> data(bytes), landed(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
    const uint64_t message_tag = tag::make(1, 0, 0);
    void* send = sender.ucx_send(1, data.data(), bytes, message_tag);
    ASSERT_FALSE(UCS_PTR_IS_ERR(send));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (send != nullptr && ucp_request_check_status(send) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < deadline) {
      sender.progress();
      receiver.progress();
    }
    const bool sent_before_receive = send == nullptr || ucp_request_check_status(send) != UCS_INPROGRESS;
    EXPECT_TRUE(sent_before_receive) << bytes << " bytes: the send waited for its receive (rendezvous)";
    void* recv = receiver.ucx_recv(landed.data(), bytes, message_tag);
    ASSERT_FALSE(UCS_PTR_IS_ERR(recv));
    while (ucp_request_check_status(recv) == UCS_INPROGRESS ||
           (send != nullptr && ucp_request_check_status(send) == UCS_INPROGRESS)) {
      sender.progress();
      receiver.progress();
    }
    EXPECT_EQ(ucp_request_check_status(recv), UCS_OK);
    EXPECT_TRUE(landed == data) << bytes << " bytes";
    ucp_request_free(recv);
    if (send != nullptr) ucp_request_free(send);
  }
}

TEST(Options, EnvironmentOverridesDefaults) {
  setenv("FLEXPLAN_TIMEOUT_MS", "1234", 1);
  setenv("FLEXPLAN_BLOCKING", "1", 1);
  setenv("FLEXPLAN_CHUNK_BYTES", "65536", 1);
  setenv("FLEXPLAN_PEER_FAILURE", "all", 1);
  setenv("FLEXPLAN_SPIN_US", "0", 1);
  const Options options = Options::from_env();
  EXPECT_EQ(options.timeout.count(), 1234);
  EXPECT_TRUE(options.blocking);
  EXPECT_EQ(options.chunk_bytes, 65536u);
  EXPECT_EQ(options.peer_failure, PeerFailureDetection::All);
  EXPECT_EQ(options.spin_before_yield, std::chrono::microseconds(0));
  setenv("FLEXPLAN_SPIN_US", "25", 1);
  EXPECT_EQ(Options::from_env().spin_before_yield, std::chrono::microseconds(25));
  unsetenv("FLEXPLAN_SPIN_US");
  EXPECT_FALSE(Options::from_env().spin_before_yield.has_value()) << "unset: decided by the runtime";
  // Malformed values are recorded, not thrown (creation reports them on every rank), each
  // naming its variable and value; the others still apply.
  setenv("FLEXPLAN_SPIN_US", "-1", 1);
  EXPECT_NO_THROW(Options::from_env());
  EXPECT_THROW(Options::from_env().throw_if_invalid(), RuntimeError);
  setenv("FLEXPLAN_SPIN_US", "25", 1);
  setenv("FLEXPLAN_CHUNK_BYTES", "0", 1);
  setenv("FLEXPLAN_WINDOW", "2000", 1);
  const Options bad = Options::from_env();
  ASSERT_EQ(bad.errors.size(), 2u);
  EXPECT_EQ(bad.errors[0], "FLEXPLAN_CHUNK_BYTES='0': expected a positive integer");
  EXPECT_EQ(bad.errors[1], "FLEXPLAN_WINDOW='2000': at most 1024");
  EXPECT_EQ(bad.chunk_bytes, Options().chunk_bytes) << "a bad value leaves the default";
  EXPECT_EQ(bad.spin_before_yield, std::chrono::microseconds(25));
  unsetenv("FLEXPLAN_WINDOW");
  for (const char* name : {"FLEXPLAN_TIMEOUT_MS", "FLEXPLAN_BLOCKING", "FLEXPLAN_CHUNK_BYTES", "FLEXPLAN_PEER_FAILURE",
                           "FLEXPLAN_SPIN_US"}) {
    unsetenv(name);
  }
  // The fused reads' part: 0 (whole chunks) is a value, not an error.
  EXPECT_EQ(Options().fused_read_bytes, Options::kDefaultFusedReadBytes);
  setenv("FLEXPLAN_FUSED_READ_BYTES", "0", 1);
  EXPECT_EQ(Options::from_env().fused_read_bytes, 0u);
  setenv("FLEXPLAN_FUSED_READ_BYTES", "4096", 1);
  EXPECT_EQ(Options::from_env().fused_read_bytes, 4096u);
  setenv("FLEXPLAN_FUSED_READ_BYTES", "4k", 1);
  const Options bad_part = Options::from_env();
  ASSERT_EQ(bad_part.errors.size(), 1u);
  EXPECT_EQ(bad_part.errors[0], "FLEXPLAN_FUSED_READ_BYTES='4k': expected a positive integer");
  unsetenv("FLEXPLAN_FUSED_READ_BYTES");
  // Overlapping steps: on by default, 0 runs step by step; the window of steps is 1 to 1024.
  EXPECT_TRUE(Options().step_overlap);
  EXPECT_EQ(Options().step_window, 64u);
  setenv("FLEXPLAN_STEP_OVERLAP", "0", 1);
  setenv("FLEXPLAN_STEP_WINDOW", "3", 1);
  EXPECT_FALSE(Options::from_env().step_overlap);
  EXPECT_EQ(Options::from_env().step_window, 3u);
  setenv("FLEXPLAN_STEP_OVERLAP", "sometimes", 1);
  setenv("FLEXPLAN_STEP_WINDOW", "1025", 1);
  const Options bad_steps = Options::from_env();
  ASSERT_EQ(bad_steps.errors.size(), 2u);
  EXPECT_EQ(bad_steps.errors[0], "FLEXPLAN_STEP_OVERLAP='sometimes': expected 0 or 1");
  EXPECT_EQ(bad_steps.errors[1], "FLEXPLAN_STEP_WINDOW='1025': at most 1024");
  EXPECT_TRUE(bad_steps.step_overlap) << "a bad value leaves the default";
  unsetenv("FLEXPLAN_STEP_OVERLAP");
  unsetenv("FLEXPLAN_STEP_WINDOW");
}


// The plan's machines against the job's hosts (runtime/host_check.hpp): equal groupings pass,
// anything else lists both.
TEST(HostCheck, MachinesAgainstHosts) {
  using bootstrap::compare_hosts;
  const std::vector<std::string> names{"sw/m0/g0", "sw/m0/g1", "sw/m1/g0", "sw/m1/g1", "sw/m1/g2"};
  const std::vector<int> members{0, 1, 2, 3, 4};
  EXPECT_EQ(compare_hosts(names, {"a", "a", "b", "b", "b"}, members, "MPI rank"), "");
  // Host names need not be the machines' names; the grouping is what counts.
  EXPECT_EQ(compare_hosts(names, {"x", "x", "y", "y", "y"}, members, "MPI rank"), "");
  const std::string one_host = compare_hosts(names, {"a", "a", "a", "a", "a"}, members, "MPI rank");
  EXPECT_EQ(one_host,
            "the plan expects 2 machines:\n    sw/m0: plan ranks 0-1\n    sw/m1: plan ranks 2-4\n"
            "  the job runs on 1 host:\n    a: plan ranks 0-4 (MPI ranks 0-4)");
  // A machine split over two hosts, and two machines on one host with the right counts.
  EXPECT_NE(compare_hosts(names, {"a", "b", "b", "b", "b"}, members, "MPI rank"), "");
  EXPECT_NE(compare_hosts(names, {"a", "a", "b", "b", "c"}, members, "MPI rank"), "");
  const std::string swapped = compare_hosts(names, {"a", "b", "a", "b", "b"}, {4, 3, 2, 1, 0}, "rank");
  EXPECT_NE(swapped.find("a: plan ranks 0, 2 (ranks 2, 4)"), std::string::npos) << swapped;
  // Learners directly under the root form one machine; a plan without names is not compared.
  EXPECT_EQ(compare_hosts({"root/g0", "root/g1"}, {"h", "h"}, {0, 1}, "rank"), "");
  EXPECT_EQ(compare_hosts({}, {"h", "i"}, {0, 1}, "rank"), "");
  EXPECT_EQ(bootstrap::rank_ranges({7, 0, 1, 2, 5}), "0-2, 5, 7");
  EXPECT_EQ(bootstrap::machine_path("switch/m1/gpu2"), "switch/m1");
}

TEST(HostCheck, OptionFromTheEnvironment) {
  ::setenv("FLEXPLAN_ALLOW_HOST_MISMATCH", "1", 1);
  EXPECT_TRUE(Options::from_env().allow_host_mismatch);
  ::setenv("FLEXPLAN_ALLOW_HOST_MISMATCH", "maybe", 1);
  const Options bad = Options::from_env();
  EXPECT_FALSE(bad.allow_host_mismatch);
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_NE(bad.errors[0].find("FLEXPLAN_ALLOW_HOST_MISMATCH='maybe'"), std::string::npos);
  ::unsetenv("FLEXPLAN_ALLOW_HOST_MISMATCH");
  EXPECT_FALSE(Options().allow_host_mismatch) << "a mismatch is an error by default";
}

// --- following the network (runtime/network_watch.hpp) -------------------------------------------

TEST(Options, FollowingTheNetworkSettings) {
  setenv("FLEXPLAN_REPLAN", "auto", 1);
  setenv("FLEXPLAN_DRIFT_WINDOW", "7", 1);
  setenv("FLEXPLAN_DRIFT_PERCENT", "25", 1);
  setenv("FLEXPLAN_STATS", "1", 1);
  Options options = Options::from_env();
  EXPECT_TRUE(options.errors.empty());
  EXPECT_EQ(options.replan, Replan::Auto);
  EXPECT_EQ(options.drift_window, 7u);
  EXPECT_EQ(options.drift_percent, 25u);
  EXPECT_TRUE(options.stats_report);
  setenv("FLEXPLAN_REPLAN", "sometimes", 1);
  setenv("FLEXPLAN_DRIFT_WINDOW", "1", 1);
  options = Options::from_env();
  EXPECT_EQ(options.errors.size(), 2u);
  EXPECT_EQ(options.replan, Replan::Off) << "a bad value keeps the default";
  EXPECT_EQ(options.drift_window, 20u);
  for (const char* name : {"FLEXPLAN_REPLAN", "FLEXPLAN_DRIFT_WINDOW", "FLEXPLAN_DRIFT_PERCENT", "FLEXPLAN_STATS"})
    unsetenv(name);
  // The hysteresis (docs/runtime.md, Flapping and restoring).
  options = Options::from_env();
  EXPECT_EQ(options.replan_confirm, 2u);
  EXPECT_EQ(options.replan_min_gain, 5u);
  setenv("FLEXPLAN_REPLAN_CONFIRM", "3", 1);
  setenv("FLEXPLAN_REPLAN_MIN_GAIN", "0", 1);
  options = Options::from_env();
  EXPECT_TRUE(options.errors.empty());
  EXPECT_EQ(options.replan_confirm, 3u);
  EXPECT_EQ(options.replan_min_gain, 0u);
  setenv("FLEXPLAN_REPLAN_CONFIRM", "0", 1);
  setenv("FLEXPLAN_REPLAN_MIN_GAIN", "100", 1);
  options = Options::from_env();
  ASSERT_EQ(options.errors.size(), 2u);
  EXPECT_NE(options.errors[0].find("FLEXPLAN_REPLAN_CONFIRM='0'"), std::string::npos) << options.errors[0];
  EXPECT_NE(options.errors[1].find("FLEXPLAN_REPLAN_MIN_GAIN='100'"), std::string::npos) << options.errors[1];
  EXPECT_EQ(options.replan_confirm, 2u);
  unsetenv("FLEXPLAN_REPLAN_CONFIRM");
  unsetenv("FLEXPLAN_REPLAN_MIN_GAIN");
}

RankWindow window(double ratio, double baseline, double call = 0, double base_call = 0, double outside = 0,
                  double base_outside = 0) {
  RankWindow w;
  w.ratio = ratio;
  w.baseline = baseline;
  w.mean_call = call;
  w.baseline_call = base_call;
  w.mean_outside = outside;
  w.baseline_outside = base_outside;
  return w;
}

TEST(Drift, WindowsTravelExactly) {
  RankWindow w = window(1.0 / 3, 2.5e-7, 1e-3, 2e-3, 0.1, 0.2);
  w.links = {{4, 1.0 / 7, 3.25}, {9, 2, 2}};
  const RankWindow back = decode_window(encode_window(w));
  EXPECT_EQ(back.ratio, w.ratio);
  EXPECT_EQ(back.baseline, w.baseline);
  EXPECT_EQ(back.mean_outside, w.mean_outside);
  ASSERT_EQ(back.links.size(), 2u);
  EXPECT_EQ(back.links[0].node, 4);
  EXPECT_EQ(back.links[0].low, 1.0 / 7);
  EXPECT_EQ(back.links[1].high, 2.0);
  EXPECT_THROW(decode_window("0x1p+0 0x1p+0"), std::invalid_argument);
  w.peers = {{3, true, 0.25, 1.0 / 3, 7, {1, 5, 9}}, {0, false, 2e-6, 1e-6, 1, {2}}};
  const RankWindow peers = decode_window(encode_window(w));
  ASSERT_EQ(peers.peers.size(), 2u);
  EXPECT_EQ(peers.peers[0].peer, 3);
  EXPECT_TRUE(peers.peers[0].send);
  EXPECT_EQ(peers.peers[0].baseline, 1.0 / 3);
  EXPECT_EQ(peers.peers[0].transfers, 7u);
  EXPECT_EQ(peers.peers[0].links, (std::vector<int32_t>{1, 5, 9}));
  EXPECT_FALSE(peers.peers[1].send);
  EXPECT_EQ(peers.peers[1].seconds, 2e-6);
}

// Two machines' uplinks 1 and 2 under the root, learner links 3, 4 (machine 1: ranks 0, 1) and
// 5, 6 (machine 2: ranks 2, 3). One rank's view of its transfers with a peer, in a direction.
PeerObservation transfers(int32_t peer, bool send, double seconds, double baseline, std::vector<int32_t> links) {
  return {peer, send, seconds, baseline, 10, std::move(links)};
}

TEST(Drift, PairsBlameTheLinkBothEndsSaw) {
  // Machine 1's uplink slowed: rank 0 -> rank 2 waits 0.5 s more at both ends (its sends backed
  // up, its receives late). Rank 2 -> rank 3 (machine 2 inside) waits too at the receiving end
  // only: rank 2 sent late, waiting on rank 0. Rank 1 -> rank 0 (machine 1 inside): unchanged.
  std::vector<RankWindow> ranks(4, window(2, 1));
  ranks[0].peers = {transfers(2, true, 0.6, 0.1, {1, 2, 3, 5}), transfers(1, false, 0.1, 0.1, {3, 4})};
  ranks[1].peers = {transfers(0, true, 0.01, 0.01, {3, 4})};
  ranks[2].peers = {transfers(0, false, 0.7, 0.2, {1, 2, 3, 5}), transfers(3, true, 0.01, 0.01, {5, 6})};
  ranks[3].peers = {transfers(2, false, 0.6, 0.1, {5, 6})};
  const std::vector<double> bandwidth{0, 50e6, 12.5e6, 1e10, 1e10, 1e10, 1e10};
  auto links = combine_link_estimates(ranks, 0.5, bandwidth);
  // Links 1, 2, 3 and 5 are in series for the one changed pair; 3 and 5 also carry unchanged
  // pairs, and of 1 and 2 the one of less bandwidth (2) explains it with the smaller change. Its
  // factor is the pair's end nearer its baseline: the receiver's, (0.7 + 50 us x 10) / (0.2 +
  // 50 us x 10), against the sender's 6x.
  ASSERT_EQ(links.size(), 1u) << links.size();
  EXPECT_EQ(links.begin()->first, 2);
  EXPECT_NEAR(links.begin()->second, (0.7 + 5e-4) / (0.2 + 5e-4), 1e-9);
  // Never beyond what the steps across the link showed on the rank that saw most.
  ranks[0].links = {{2, 2.0, 2.0}};
  ranks[2].links = {{2, 1.5, 1.5}};
  links = combine_link_estimates(ranks, 0.5, bandwidth);
  EXPECT_EQ(links, (std::map<int32_t, double>{{2, 2.0}}));
  // A late sender alone (only the receiving end waits) blames nothing.
  ranks[0].peers[0] = transfers(2, true, 0.1, 0.1, {1, 2, 3, 5});
  ranks[0].links.clear();
  ranks[2].links.clear();
  EXPECT_TRUE(combine_link_estimates(ranks, 0.5, bandwidth).empty());
}

TEST(Drift, NeedsEnoughRanksBeyondTheThreshold) {
  // Within 50% of the baseline: no drift.
  EXPECT_FALSE(judge_drift({window(1.4, 1), window(1.45, 1), window(1.2, 1), window(1, 1)}, 0.5).drifted);
  // One rank of four beyond it: not enough.
  EXPECT_FALSE(judge_drift({window(3, 1), window(1, 1), window(1, 1), window(1, 1)}, 0.5).drifted);
  // Half the ranks: a drift, its ratio the median of theirs.
  const DriftVerdict two = judge_drift({window(3, 1), window(1, 1), window(5, 1), window(1, 1)}, 0.5);
  EXPECT_TRUE(two.drifted);
  EXPECT_TRUE(two.slower);
  EXPECT_EQ(two.voting, (std::vector<int32_t>{0, 2}));
  EXPECT_DOUBLE_EQ(two.ratio, 4);
  // Faster (a link that came back) counts too.
  const DriftVerdict faster = judge_drift({window(1, 4), window(1, 4), window(1, 4)}, 0.5);
  EXPECT_TRUE(faster.drifted);
  EXPECT_FALSE(faster.slower);
  // A rank without a baseline does not vote.
  EXPECT_FALSE(judge_drift({window(3, 0), window(3, 1), window(1, 1)}, 0.5).drifted);
}

TEST(Drift, OneLateProcessIsNotTheNetwork) {
  // Ranks 0 and 2 wait 10 ms more per call; rank 1 spends 10 ms more outside the runtime.
  const DriftVerdict late = judge_drift({window(20, 1, 10.5e-3, 0.5e-3, 1e-3, 1e-3),
                                         window(1.1, 1, 0.5e-3, 0.5e-3, 11e-3, 1e-3),
                                         window(20, 1, 10.5e-3, 0.5e-3, 1e-3, 1e-3)},
                                        0.5);
  EXPECT_FALSE(late.drifted);
  EXPECT_EQ(late.slow_process, 1);
  // The same wait with nobody's outside time grown: the network.
  const DriftVerdict network = judge_drift({window(20, 1, 10.5e-3, 0.5e-3, 1e-3, 1e-3),
                                            window(20, 1, 10.5e-3, 0.5e-3, 1e-3, 1e-3),
                                            window(20, 1, 10.5e-3, 0.5e-3, 1e-3, 1e-3)},
                                           0.5);
  EXPECT_TRUE(network.drifted);
  EXPECT_EQ(network.slow_process, -1);
}

TEST(Drift, LinkEstimatesTakeTheLeastSlowdownSeen) {
  RankWindow a = window(2, 1), b = window(2, 1);
  a.links = {{1, 4, 6}, {2, 1.0, 5}, {3, 1.1, 1.2}};
  b.links = {{1, 5, 8}, {2, 3, 3}, {4, 0.2, 0.3}};
  const auto links = combine_link_estimates({a, b}, 0.5);
  // Node 1: every step over it was at least 4x slower. Node 2: a step over it ran at the
  // baseline, so it is not slow. Node 3: within the noise band. Node 4: faster everywhere.
  EXPECT_EQ(links, (std::map<int32_t, double>{{1, 4.0}, {4, 0.3}}));
}

TEST(Drift, FasterNamesOnlyALinkBelowItsFileRate) {
  // Machine uplinks 1, 2, 3. Link 1 was found slow and the plan made for it at a quarter of its
  // file rate; now every path between machines runs faster than its baseline, the paths through
  // link 2 the most (the plan for the slow link had loaded them). By time alone link 2 explains
  // most, but nothing is planned above a file rate: only link 1 can have come back.
  RankWindow a = window(0.5, 1), b = window(0.5, 1);
  a.paths = {{{1, 2}, 1.0, 4.0}, {{2, 3}, 1.0, 3.5}};
  b.paths = {{{1, 3}, 1.0, 1.5}};
  const std::vector<double> now{0, 2.5e6, 10e6, 10e6};
  const std::vector<double> file{0, 10e6, 10e6, 10e6};
  EXPECT_EQ(combine_link_estimates({a, b}, 0.5, now).count(2), 1u);  // without the file's rates
  const auto links = combine_link_estimates({a, b}, 0.5, now, file);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links.begin()->first, 1);
  EXPECT_DOUBLE_EQ(links.begin()->second, (1.0 + 1.0) / (4.0 + 1.5));
  // Every link at its file rate: a speed-up changes nothing.
  EXPECT_TRUE(combine_link_estimates({a, b}, 0.5, file, file).empty());
  // Slower is not restricted.
  RankWindow c = window(2, 1);
  c.paths = {{{2, 3}, 4.0, 1.0}};
  EXPECT_EQ(combine_link_estimates({c}, 0.5, file, file).size(), 1u);
}

TEST(Drift, PathsBlameTheFewestLinksThatExplainThem) {
  // Machine uplinks 1, 2, 3; every path between machines crosses two of them. Machine 1's link
  // slowed: the paths 1-2 and 1-3 are 4x and 3x slower, 2-3 at the baseline, and an
  // intra-machine path (learner links 7, 8) slightly slower, within the noise band.
  RankWindow a = window(2, 1), b = window(2, 1);
  a.paths = {{{1, 2}, 4.0, 1.0}, {{7, 8}, 1.1, 1.0}};
  b.paths = {{{1, 3}, 3.0, 1.0}, {{2, 3}, 1.0, 1.0}};
  EXPECT_EQ(combine_link_estimates({a, b}, 0.5), (std::map<int32_t, double>{{1, 3.5}}));
  // A second link is blamed only where it explains a quarter of the first's changed time.
  RankWindow c = window(2, 1);
  c.paths = {{{1, 2}, 9.0, 1.0}, {{5, 6}, 2.0, 1.0}, {{3, 4}, 4.0, 1.0}};
  const auto two = combine_link_estimates({c}, 0.5);
  EXPECT_EQ(two.size(), 2u);
  EXPECT_DOUBLE_EQ(two.at(1), 9.0);  // (ties between 1 and 2: the lower node)
  EXPECT_DOUBLE_EQ(two.at(3), 4.0);
  // Every path back within the band: nothing to change.
  RankWindow steady = window(1, 1);
  steady.paths = {{{1, 2}, 1.1, 1.0}};
  EXPECT_TRUE(combine_link_estimates({steady}, 0.5).empty());
  // Paths travel with the rest of the record.
  const RankWindow back = decode_window(encode_window(c));
  ASSERT_EQ(back.paths.size(), 3u);
  EXPECT_EQ(back.paths[2].links, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(back.paths[2].seconds, 4.0);
}

TEST(Drift, StatsReportNamesWhereTheTimeGoes) {
  CommStats stats;
  stats.timed = true;
  ScheduleStats s;
  s.algorithm = "ring";
  s.calls = 10;
  s.measured = 10e-3;
  s.predicted = 5e-3;
  s.steps = {{0, 2e-3, 2e-3}, {1, 8e-3, 3e-3}};
  stats.schedules.push_back(s);
  stats.events.push_back("flexplan: drift before call #40: ...");
  const std::string text = format_stats(stats);
  EXPECT_NE(text.find("allreduce ring [0 B, inf): 10 calls, 1000.0 us/call measured, 500.0 us predicted (2.00x)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("most time: level 1 80% (2.67x its prediction), step 1 (level 1) 80%, 2.67x its prediction"),
            std::string::npos) << text;
  EXPECT_NE(text.find("drift before call #40"), std::string::npos) << text;
}

}  // namespace
}  // namespace flexplan
