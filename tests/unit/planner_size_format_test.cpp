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

// The one rule (topology/sizes.hpp): fractions that come to whole bytes, a space before the
// unit, and "MB" read as MiB with a warning that says so.
TEST(PlannerSizeFormat, FractionsSpacesAndTheOlderSpelling) {
  EXPECT_EQ(parse_size("1.5M"), 1572864u);
  EXPECT_EQ(parse_size("0.5K"), 512u);
  EXPECT_EQ(parse_size("16 M"), 16u << 20);
  EXPECT_EQ(parse_size(" 16 MiB "), 16u << 20);
  EXPECT_EQ(parse_size("16Mi"), 16u << 20);
  EXPECT_EQ(parse_size("8 B"), 8u);
  EXPECT_EQ(parse_size("18446744073709551615"), UINT64_MAX);
  std::string warning = "stale";
  EXPECT_EQ(parse_size("16M", &warning), 16u << 20);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(parse_size("16MB", &warning), 16u << 20);
  EXPECT_NE(warning.find("\"16MB\" is read as 16 MiB"), std::string::npos) << warning;
  EXPECT_NE(warning.find("write 16M or 16MiB"), std::string::npos) << warning;
  EXPECT_EQ(parse_size("1.5gb", &warning), uint64_t{3} << 29);
  EXPECT_NE(warning.find("1.5 GiB"), std::string::npos) << warning;
}

TEST(PlannerSizeFormat, RejectsWhatIsNotASize) {
  for (const char* text : {"", "K", "12Q", "-5", "1.3K", "0.1", "99999999999999T", "16 MB/s",
                           "1e6", "18446744073709551616", "1..5M", "16 M B"}) {
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
  std::string warning;
  EXPECT_EQ(dtype_size("float32", &warning), 4u);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(dtype_size("float", &warning), 4u);  // the older names, with a warning
  EXPECT_EQ(warning, "data type 'float' is now spelled 'float32'");
  EXPECT_EQ(dtype_size("double"), 8u);
  EXPECT_EQ(dtype_size("half", &warning), 2u);
  EXPECT_EQ(warning, "data type 'half' is now spelled 'float16'");
  EXPECT_EQ(dtype_size("float16"), 2u);
  EXPECT_EQ(dtype_size("float64"), 8u);
  EXPECT_EQ(dtype_size("bfloat16"), 2u);
  EXPECT_EQ(dtype_size("int8"), 1u);
  EXPECT_EQ(dtype_size("uint64"), 8u);
  EXPECT_THROW(dtype_size("complex"), std::invalid_argument);
}

}  // namespace
}  // namespace flexplan
