// Single-process tests of the runtime's pieces that need no peers: 16-bit float conversions,
// the reduction kernels, the tag layout and the options' environment parsing. (The per-rank
// programs the runtime executes are codegen's, tested in tests/unit/codegen_*.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "runtime/errors.hpp"
#include "runtime/half.hpp"
#include "runtime/options.hpp"
#include "runtime/reduce_kernels.hpp"
#include "runtime/tag.hpp"

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

TEST(Kernels, Float16SumRoundsOncePerCombine) {
  std::vector<uint16_t> a{half::float_to_f16(2048.0f)}, b{half::float_to_f16(1.0f)};
  kernels::combine(a.data(), a.data(), b.data(), 1, DataType::Float16, ReduceOp::Sum);
  EXPECT_EQ(half::f16_to_float(a[0]), 2048.0f);  // 2049 is a tie between 2048 and 2050
  std::vector<uint16_t> c{half::float_to_bf16(3.0f)}, d{half::float_to_bf16(0.5f)};
  kernels::combine(c.data(), c.data(), d.data(), 1, DataType::BFloat16, ReduceOp::Prod);
  EXPECT_EQ(half::bf16_to_float(c[0]), 1.5f);
}

TEST(Tags, FieldsDoNotOverlapAndSequenceWraps) {
  const uint64_t t = tag::make(5, tag::kMaxSteps - 1, tag::kMaxOps - 1, tag::kMaxChunks - 1);
  EXPECT_EQ(t >> 48, 5u);
  EXPECT_EQ((t >> 36) & 0xfff, tag::kMaxSteps - 1);
  EXPECT_EQ((t >> 20) & 0xffff, tag::kMaxOps - 1);
  EXPECT_EQ(t & 0xfffff, tag::kMaxChunks - 1);
  EXPECT_EQ(tag::make(5 + (uint64_t{1} << tag::kSequenceBits), 1, 2, 3), tag::make(5, 1, 2, 3));
  EXPECT_NE(tag::make(5, 1, 2, 3), tag::make(5, 1, 3, 2));
}

TEST(Options, EnvironmentOverridesDefaults) {
  setenv("FLEXPLAN_TIMEOUT_MS", "1234", 1);
  setenv("FLEXPLAN_BLOCKING", "1", 1);
  setenv("FLEXPLAN_CHUNK_BYTES", "65536", 1);
  setenv("FLEXPLAN_PEER_FAILURE", "all", 1);
  const Options options = Options::from_env();
  EXPECT_EQ(options.timeout.count(), 1234);
  EXPECT_TRUE(options.blocking);
  EXPECT_EQ(options.chunk_bytes, 65536u);
  EXPECT_EQ(options.peer_failure, PeerFailureDetection::All);
  setenv("FLEXPLAN_CHUNK_BYTES", "0", 1);
  EXPECT_THROW(Options::from_env(), RuntimeError);
  for (const char* name : {"FLEXPLAN_TIMEOUT_MS", "FLEXPLAN_BLOCKING", "FLEXPLAN_CHUNK_BYTES", "FLEXPLAN_PEER_FAILURE"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace flexplan
