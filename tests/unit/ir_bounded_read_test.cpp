// Plan files are read in a bounded way (issue 39): the magic and the fixed header first, so that
// a large file that is no plan, or whose header is wrong, is refused having read only its start.
// How much was read is counted by the kernel (/proc/self/io), not timed.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "ir/job_plan.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_load.hpp"
#include "ir/plan_sections.hpp"
#include "ir/plan_text.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

constexpr size_t kVersionAt = 8, kLengthAt = 44, kHeaderSize = 100;
constexpr uint64_t kLarge = 200ull << 20;  // the campaign's 200 MB file

// Bytes this process has read through read() and the like, from /proc/self/io.
uint64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  ADD_FAILURE() << "no rchar in /proc/self/io";
  return 0;
}

// What `load` throws, and how many bytes were read while it ran.
struct Refusal {
  std::string message;
  uint64_t bytes_read = 0;
};
Refusal refusal_of(const std::function<void()>& load) {
  Refusal r;
  const uint64_t before = bytes_read_so_far();
  try {
    load();
    ADD_FAILURE() << "accepted";
  } catch (const PlanFormatError& e) {
    r.message = e.what();
  }
  r.bytes_read = bytes_read_so_far() - before;
  return r;
}

void put_le(std::vector<uint8_t>& bytes, size_t at, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

class IrBoundedRead : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("flexplan-ir-bounded-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `start`, then zeros up to `size` bytes in all: a sparse file, so it costs no disk.
  std::string file_of(const std::string& name, const std::vector<uint8_t>& start, uint64_t size) {
    const std::string path = (dir_ / name).string();
    {
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(start.data()), static_cast<std::streamsize>(start.size()));
    }
    std::filesystem::resize_file(path, size);
    return path;
  }

  std::filesystem::path dir_;
};

// Every way in: the inspect/verify/codegen loader, read_plan_file and the runtime's load.
const std::vector<std::pair<const char*, std::function<void(const std::string&)>>>& loaders() {
  static const std::vector<std::pair<const char*, std::function<void(const std::string&)>>> all = {
      {"load_plan_file", [](const std::string& p) { load_plan_file(p); }},
      {"read_plan_file", [](const std::string& p) { read_plan_file(p); }},
      {"load_job_plan", [](const std::string& p) { load_job_plan(p, 4, 0); }},
  };
  return all;
}

TEST_F(IrBoundedRead, LargeFileOfZerosIsRefusedFromItsStart) {
  const std::string zeros = file_of("zeros.bin", {}, kLarge);
  for (const auto& [name, loader] : loaders()) {
    const auto& load = loader;  // clang 14 lambdas cannot capture a structured binding
    SCOPED_TRACE(name);
    const Refusal r = refusal_of([&] { load(zeros); });
    EXPECT_TRUE(r.message.find("not a flexplan plan") != std::string::npos ||
                r.message.find("bad magic") != std::string::npos)
        << r.message;
    EXPECT_LT(r.bytes_read, 1u << 20) << "read most of a " << kLarge << "-byte file to refuse it";
  }
}

// An endless stream of zeros: only a bounded read ever returns.
TEST_F(IrBoundedRead, EndlessZerosAreRefused) {
  for (const auto& [name, loader] : loaders()) {
    const auto& load = loader;  // clang 14 lambdas cannot capture a structured binding
    SCOPED_TRACE(name);
    const Refusal r = refusal_of([&] { load("/dev/zero"); });
    EXPECT_FALSE(r.message.empty());
  }
}

// A header that is wrong in itself, in front of a large file: refused having read the header.
TEST_F(IrBoundedRead, BadHeaderIsRefusedBeforeThePayload) {
  const std::vector<uint8_t> good = encode_plan(testing::two_range_plan(4));
  std::vector<uint8_t> other_version(good.begin(), good.begin() + kHeaderSize);
  put_le(other_version, kVersionAt, 99, 4);
  std::vector<uint8_t> bad_magic(good.begin(), good.begin() + kHeaderSize);
  bad_magic[3] = 'x';
  struct Case {
    const char* label;
    std::vector<uint8_t> start;
    const char* message;
  };
  const Case cases[] = {
      {"format version", other_version, "byte 8: plan.bin format version 99 is not supported"},
      {"magic", bad_magic, "byte 0: not a flexplan plan.bin (bad magic)"},
  };
  for (const Case& c : cases) {
    const std::string path = file_of(std::string(c.label) + ".bin", c.start, kLarge);
    for (const auto& [name, loader] : loaders()) {
      const auto& load = loader;  // clang 14 lambdas cannot capture a structured binding
      if (std::string(c.label) == "magic" && std::string(name) == "load_plan_file")
        continue;  // no magic: a text plan for this loader, refused as neither form
      SCOPED_TRACE(std::string(c.label) + ", " + name);
      const Refusal r = refusal_of([&] { load(path); });
      EXPECT_NE(r.message.find(c.message), std::string::npos) << r.message;
      EXPECT_LT(r.bytes_read, 1u << 20);
    }
  }
}

// The header's payload length against the file's size: a mismatch either way is refused with
// the decoder's own words, without reading the payload.
TEST_F(IrBoundedRead, PayloadLengthMustMatchTheFileSize) {
  const std::vector<uint8_t> good = encode_plan(testing::two_range_plan(4));
  const uint64_t payload = good.size() - kHeaderSize;
  const std::string longer = file_of("longer.bin", good, kLarge);
  std::vector<uint8_t> huge_length = good;
  put_le(huge_length, kLengthAt, uint64_t{1} << 62, 8);
  detail::reseal_plan(huge_length);  // the header's checksum covers the length
  const std::string claims_more = file_of("claims-more.bin", huge_length, good.size());
  std::vector<uint8_t> max_length = good;
  put_le(max_length, kLengthAt, ~uint64_t{0}, 8);
  detail::reseal_plan(max_length);
  const std::string claims_max = file_of("claims-max.bin", max_length, good.size());
  for (const auto& [name, loader] : loaders()) {
    const auto& load = loader;  // clang 14 lambdas cannot capture a structured binding
    SCOPED_TRACE(name);
    Refusal r = refusal_of([&] { load(longer); });
    EXPECT_NE(r.message.find(fmt::format("byte {}: {} trailing bytes after the {}-byte payload",
                                         good.size(), kLarge - good.size(), payload)),
              std::string::npos)
        << r.message;
    EXPECT_LT(r.bytes_read, 1u << 20);
    r = refusal_of([&] { load(claims_more); });
    EXPECT_NE(r.message.find(fmt::format("truncated: the header announces a {}-byte payload but "
                                         "only {} bytes follow it",
                                         uint64_t{1} << 62, payload)),
              std::string::npos)
        << r.message;
    r = refusal_of([&] { load(claims_max); });
    EXPECT_NE(r.message.find("truncated: the header announces a 18446744073709551615-byte"),
              std::string::npos)
        << r.message;
  }
}

// Through a pipe there is no size to compare: the payload is read as announced and no further
// than one byte past it, and the decoder judges it.
TEST_F(IrBoundedRead, PipesAreReadNoFurtherThanAnnounced) {
  std::signal(SIGPIPE, SIG_IGN);  // the writer may outlive the reader's interest
  const Plan plan = testing::two_range_plan(4);
  const std::vector<uint8_t> good = encode_plan(plan);
  const std::string fifo = (dir_ / "plan.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Writes `bytes` into the FIFO, then `extra` zeros, until the reader closes its end.
  auto serve = [&](std::vector<uint8_t> bytes, uint64_t extra) {
    return std::thread([&fifo, bytes = std::move(bytes), extra] {
      const int fd = ::open(fifo.c_str(), O_WRONLY);
      if (fd < 0) return;
      std::vector<uint8_t> all = bytes;
      all.resize(bytes.size() + extra);
      for (size_t at = 0; at < all.size();) {
        const ssize_t n = ::write(fd, all.data() + at, all.size() - at);
        if (n <= 0) break;
        at += static_cast<size_t>(n);
      }
      ::close(fd);
    });
  };
  std::thread writer = serve(good, 0);
  EXPECT_EQ(read_plan_file(fifo), plan);
  writer.join();

  writer = serve(good, 64 << 20);
  const Refusal r = refusal_of([&] { read_plan_file(fifo); });
  writer.join();
  EXPECT_NE(r.message.find("1 trailing bytes after the"), std::string::npos) << r.message;
  EXPECT_LT(r.bytes_read, 1u << 20);
}

// The text form is still found after comments, however long, and a good plan.bin still loads.
TEST_F(IrBoundedRead, GoodFilesStillLoad) {
  const Plan plan = testing::two_range_plan(4);
  const std::string text = (dir_ / "plan.txt").string();
  std::ofstream(text) << "# " << std::string(100000, 'c') << "\n\n   # another\n"
                      << print_plan_text(plan);
  EXPECT_EQ(load_plan_file(text), plan);
  const std::string binary = (dir_ / "plan.bin").string();
  write_plan_file(binary, plan);
  EXPECT_EQ(load_plan_file(binary), plan);
  EXPECT_EQ(read_plan_file(binary), plan);
  EXPECT_EQ(load_job_plan(binary, 4, 1).plan, plan);
  // Short files keep their messages.
  const std::string empty = file_of("empty.bin", {}, 0);
  EXPECT_NE(refusal_of([&] { load_plan_file(empty); }).message.find("the file is empty"),
            std::string::npos);
  const std::vector<uint8_t> good = encode_plan(plan);
  const std::string cut = file_of("cut.bin", {good.begin(), good.begin() + 30}, 30);
  EXPECT_NE(refusal_of([&] { read_plan_file(cut); }).message.find("truncated: 30 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace flexplan::ir
