// Bandwidth and latency figures: every unit family, the bit/byte case distinction, canonical
// values independent of spelling, and the errors.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "topology/topology.hpp"

namespace flexplan {
namespace {

// The message of the std::invalid_argument that `parse` throws for `text`.
template <typename Parse>
std::string error_of(Parse parse, const std::string& text) {
  try {
    parse(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "\"" << text << "\" was accepted";
  return "";
}

TEST(TopologyUnits, BitRatesInEverySpelling) {
  for (const char* text : {"10 Gbit/s", "10 Gbits/s", "10 Gbps", "10 Gb/s", "10Gbit/s",
                           "10000 Mbit/s", "10000000 Kbit/s", "10000000 kbit/s",
                           "10000000000 bit/s", "0.01 Tbit/s", "1e1 Gbps", " 10 Gb/s "})
    EXPECT_DOUBLE_EQ(parse_bandwidth(text), 1.25e9) << text;
}

TEST(TopologyUnits, ByteRatesInEverySpelling) {
  EXPECT_EQ(parse_bandwidth("12 GB/s"), 12e9);
  EXPECT_EQ(parse_bandwidth("12 GBps"), 12e9);
  EXPECT_EQ(parse_bandwidth("12000 MB/s"), 12e9);
  EXPECT_EQ(parse_bandwidth("12000000 kB/s"), 12e9);
  EXPECT_EQ(parse_bandwidth("12000000 KB/s"), 12e9);
  EXPECT_EQ(parse_bandwidth("0.012 TB/s"), 12e9);
  EXPECT_EQ(parse_bandwidth("512 B/s"), 512);
  EXPECT_EQ(parse_bandwidth("1 KiB/s"), 1024);
  EXPECT_EQ(parse_bandwidth("1 MiB/s"), 1024.0 * 1024);
  EXPECT_EQ(parse_bandwidth("2 GiB/s"), 2.0 * 1024 * 1024 * 1024);
}

TEST(TopologyUnits, BitsAndBytesDifferByCase) {
  EXPECT_EQ(parse_bandwidth("1 Gb/s") * 8, parse_bandwidth("1 GB/s"));
  EXPECT_EQ(parse_bandwidth("1 Gbps") * 8, parse_bandwidth("1 GBps"));
}

TEST(TopologyUnits, SameQuantityGivesIdenticalDoubles) {
  // Bit-identical, not merely close: the content hash reads the IEEE bits.
  EXPECT_EQ(parse_bandwidth("1 Gbit/s"), parse_bandwidth("125 MB/s"));
  EXPECT_EQ(parse_bandwidth("1.1 GB/s"), parse_bandwidth("1100 MB/s"));
  EXPECT_EQ(parse_bandwidth("0.3 GB/s"), parse_bandwidth("300 MB/s"));
  EXPECT_EQ(parse_bandwidth("2.4 Gbit/s"), parse_bandwidth("300 MB/s"));
  EXPECT_EQ(parse_latency("50 us"), parse_latency("0.05 ms"));
  EXPECT_EQ(parse_latency("0.3 us"), parse_latency("300 ns"));
  EXPECT_EQ(parse_latency("1.1 ms"), parse_latency("1100 us"));
}

TEST(TopologyUnits, Latencies) {
  EXPECT_EQ(parse_latency("50 us"), 50e-6);
  EXPECT_EQ(parse_latency("50 \u00b5s"), 50e-6);
  EXPECT_EQ(parse_latency("800 ns"), 800e-9);
  EXPECT_EQ(parse_latency("2 ms"), 2e-3);
  EXPECT_EQ(parse_latency("1.5 s"), 1.5);
  EXPECT_EQ(parse_latency("0 us"), 0.0);
  EXPECT_FALSE(std::signbit(parse_latency("-0 us"))) << "negative zero must become zero";
}

TEST(TopologyUnits, BandwidthErrorsNameTheProblem) {
  EXPECT_EQ(error_of(parse_bandwidth, "10").rfind("\"10\" has no unit", 0), 0u);
  EXPECT_NE(error_of(parse_bandwidth, "").find("empty"), std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "fast").find("does not start with a number"),
            std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "0 GB/s").find("is zero"), std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "-1 GB/s").find("is negative"), std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "inf GB/s").find("not finite"), std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "nan GB/s").find("not finite"), std::string::npos);
  // Finite as written, too large for a double in bytes/s: out of range, not "not finite".
  EXPECT_NE(error_of(parse_bandwidth, "1e400 GB/s").find("is above 1000 Tbit/s"), std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "1e-400 GB/s").find("is zero"), std::string::npos);
  const std::string tiny_mantissa = "0." + std::string(400, '0') + "1e10 GB/s";
  EXPECT_NE(error_of(parse_bandwidth, tiny_mantissa).find("is zero"), std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "100000e305 B/s").find("is above 1000 Tbit/s"),
            std::string::npos);
  const std::string wrong_case = error_of(parse_bandwidth, "10 gb/s");
  EXPECT_NE(wrong_case.find("unknown bandwidth unit \"gb/s\""), std::string::npos) << wrong_case;
  EXPECT_NE(wrong_case.find("Gb/s"), std::string::npos) << wrong_case;
  EXPECT_NE(wrong_case.find("GB/s"), std::string::npos) << wrong_case;
  EXPECT_NE(error_of(parse_bandwidth, "10 furlongs").find("unknown bandwidth unit"),
            std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "10 us").find("unknown bandwidth unit"), std::string::npos);
  EXPECT_NE(error_of(parse_bandwidth, "1.2.3 GB/s").find("unknown bandwidth unit"),
            std::string::npos);
}

// Issue 39: "1e308 GB/s" is a finite figure whose bytes/s overflow a double; it used to be
// called "not finite". It is out of range, and the message gives the limit.
TEST(TopologyUnits, FiguresTooLargeForADoubleAreOutOfRangeNotInfinite) {
  for (const char* text : {"1e308 GB/s", "1e308 Tbit/s", "1.7e308 B/s", "9e307 TiB/s"}) {
    const std::string message = error_of(parse_bandwidth, text);
    EXPECT_EQ(message, fmt::format("\"{}\" is above 1000 Tbit/s, the largest bandwidth flexplan "
                                   "accepts", text));
  }
  EXPECT_NE(error_of(parse_bandwidth, "-1e308 GB/s").find("is negative"), std::string::npos);
  for (const char* text : {"1e308 ms", "1e400 s"}) {
    const std::string message = error_of(parse_latency, text);
    EXPECT_EQ(message, fmt::format("\"{}\" is above 100 s, the largest latency flexplan accepts",
                                   text));
  }
  // Written infinities are still not finite.
  EXPECT_NE(error_of(parse_bandwidth, "inf GB/s").find("not finite"), std::string::npos);
}

// Figures come from the command line too (--reduce-bandwidth, whatif variations): bytes that
// are not UTF-8, and control characters, are escaped in the message, never echoed raw.
TEST(TopologyUnits, ErrorsEscapeRawBytes) {
  const std::string message = error_of(parse_bandwidth, "10 G\xff\xfe" "B/s\x1b[31m");
  EXPECT_EQ(message.find('\xff'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_NE(message.find("\"10 G\\xFF\\xFEB/s\\x1B[31m\": unknown bandwidth unit"),
            std::string::npos)
      << message;
  const std::string bidi = error_of(parse_latency, "5 \u202eus");
  EXPECT_NE(bidi.find("\"5 \\u202Eus\""), std::string::npos) << bidi;
}

TEST(TopologyUnits, LatencyErrorsNameTheProblem) {
  EXPECT_EQ(error_of(parse_latency, "5").rfind("\"5\" has no unit", 0), 0u);
  EXPECT_NE(error_of(parse_latency, "-5 us").find("is negative"), std::string::npos);
  EXPECT_NE(error_of(parse_latency, "inf us").find("not finite"), std::string::npos);
  EXPECT_NE(error_of(parse_latency, "5 GB/s").find("unknown latency unit"), std::string::npos);
  EXPECT_NE(error_of(parse_latency, "5 Us").find("unknown latency unit"), std::string::npos);
}

// Figures outside what any link has are refused, so that every prediction stays a finite,
// readable number: bandwidth from 1 kbit/s to 1 Pbit/s, latency 0 or from 1 ns to 100 s.
TEST(TopologyUnits, FiguresMustBeInTheirDocumentedRanges) {
  EXPECT_EQ(parse_bandwidth("1 kbit/s"), 125);
  EXPECT_EQ(parse_bandwidth("125 B/s"), 125);
  EXPECT_EQ(parse_bandwidth("1000 Tbit/s"), 1.25e14);
  EXPECT_EQ(parse_latency("100 s"), 100);
  EXPECT_EQ(parse_latency("1 ns"), 1e-9);
  EXPECT_EQ(parse_latency("0 s"), 0);
  for (const char* text : {"1e-320 B/s", "124 B/s", "0.9 kbit/s", "1 bit/s"}) {
    const std::string message = error_of(parse_bandwidth, text);
    EXPECT_NE(message.find("is below 1 kbit/s, the smallest bandwidth flexplan accepts"),
              std::string::npos)
        << message;
  }
  for (const char* text : {"1001 Tbit/s", "1e20 GB/s", "126 TB/s"}) {
    const std::string message = error_of(parse_bandwidth, text);
    EXPECT_NE(message.find("is above 1000 Tbit/s, the largest bandwidth flexplan accepts"),
              std::string::npos)
        << message;
  }
  for (const char* text : {"1e308 s", "101 s", "1e12 us"}) {
    const std::string message = error_of(parse_latency, text);
    EXPECT_NE(message.find("is above 100 s, the largest latency flexplan accepts"),
              std::string::npos)
        << message;
  }
  for (const char* text : {"1e-320 s", "0.5 ns"}) {
    const std::string message = error_of(parse_latency, text);
    EXPECT_NE(message.find("is below 1 ns, the smallest nonzero latency flexplan accepts (write "
                           "0 for none)"),
              std::string::npos)
        << message;
  }
}

TEST(TopologyUnits, FormatPicksTheRounderForm) {
  EXPECT_EQ(format_bandwidth(parse_bandwidth("10 Gbit/s")), "10 Gbit/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("25 Gbit/s")), "25 Gbit/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("1 Gbit/s")), "1 Gbit/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("12 GB/s")), "12 GB/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("150 GB/s")), "150 GB/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("1.25 GB/s")), "10 Gbit/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("12.3 GB/s")), "12.3 GB/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("400 Gbit/s")), "400 Gbit/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("40 Gbit/s")), "40 Gbit/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("1 GB/s")), "1 GB/s");
  EXPECT_EQ(format_bandwidth(parse_bandwidth("100 GB/s")), "100 GB/s");
  EXPECT_EQ(format_latency(parse_latency("50 us")), "50 us");
  EXPECT_EQ(format_latency(parse_latency("800 ns")), "800 ns");
  EXPECT_EQ(format_latency(parse_latency("2.5 ms")), "2.5 ms");
  EXPECT_EQ(format_latency(parse_latency("3 s")), "3 s");
  EXPECT_EQ(format_latency(0), "0 s");
}

TEST(TopologyUnits, FormattedFiguresParseBack) {
  for (const char* text : {"10 Gbit/s", "3.5 GB/s", "100 Gbit/s", "7 kB/s", "1 KiB/s", "2 TB/s"}) {
    const double value = parse_bandwidth(text);
    EXPECT_EQ(parse_bandwidth(format_bandwidth(value)), value) << text;
  }
  for (const char* text : {"1 ns", "50 us", "0.5 ms", "12 s"}) {
    const double value = parse_latency(text);
    EXPECT_EQ(parse_latency(format_latency(value)), value) << text;
  }
}

}  // namespace
}  // namespace flexplan
