// Sizes, times and data types as the planning commands read and print them.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "planner/size_format.hpp"

namespace flexplan {
namespace {

TEST(PlannerSizeFormat, ParsesBinaryMultiples) {
  EXPECT_EQ(parse_size("65536"), 65536u);
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("64k"), 65536u);
  EXPECT_EQ(parse_size("64KiB"), 65536u);
  EXPECT_EQ(parse_size("64KB"), 65536u);
  EXPECT_EQ(parse_size("512M"), 512u << 20);
  EXPECT_EQ(parse_size("2G"), uint64_t{2} << 30);
  EXPECT_EQ(parse_size("1T"), uint64_t{1} << 40);
  EXPECT_EQ(parse_size("100B"), 100u);
}

TEST(PlannerSizeFormat, RejectsWhatIsNotASize) {
  for (const char* text : {"", "K", "12Q", "-5", "1.5M", "99999999999999T"}) {
    try {
      parse_size(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + text + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(PlannerSizeFormat, PrintsThreeSignificantDigits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(37 * 1024), "37 KiB");
  EXPECT_EQ(format_bytes(1.5 * 1024 * 1024), "1.5 MiB");
  EXPECT_EQ(format_seconds(260e-6), "260 us");
  EXPECT_EQ(format_seconds(4.567e-3), "4.57 ms");
  EXPECT_EQ(format_seconds(850e-9), "850 ns");
  EXPECT_EQ(format_seconds(2.5), "2.5 s");
  EXPECT_EQ(format_gbps(1.25e9), "1.25 GB/s");
  EXPECT_EQ(format_gbps(0.078125e9), "0.0781 GB/s");
  EXPECT_EQ(format_gbps(12e9), "12 GB/s");
  EXPECT_EQ(format_gbps(1250e9), "1250 GB/s");
  EXPECT_EQ(format_gbps(999.7e9), "1000 GB/s");
}

TEST(PlannerSizeFormat, DataTypeSizes) {
  EXPECT_EQ(dtype_size("float"), 4u);
  EXPECT_EQ(dtype_size("float32"), 4u);
  EXPECT_EQ(dtype_size("double"), 8u);
  EXPECT_EQ(dtype_size("half"), 2u);
  EXPECT_EQ(dtype_size("bfloat16"), 2u);
  EXPECT_EQ(dtype_size("int8"), 1u);
  EXPECT_EQ(dtype_size("uint64"), 8u);
  EXPECT_THROW(dtype_size("complex"), std::invalid_argument);
}

}  // namespace
}  // namespace flexplan
