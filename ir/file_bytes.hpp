// Reading plan files (internal to the IR library): whole, or a head first, for a caller to check
// before it reads on, so that what a file announces is checked before its bulk is read.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace flexplan::ir::detail {

// An open file read from its start, as far as asked. Errors are PlanFormatErrors naming the
// path and the system's reason.
class FileReader {
 public:
  explicit FileReader(const std::string& path);  // refuses a directory or an unopenable path

  const std::string& path() const { return path_; }
  // The size of a regular file when opened; none for a pipe or a device.
  std::optional<uint64_t> size() const { return size_; }
  // Reads on until `total` bytes have been read or the file ends; all bytes read so far.
  std::span<const uint8_t> read_to(uint64_t total);
  // Reads on to the end of the file; all its bytes.
  std::span<const uint8_t> read_all() { return read_to(UINT64_MAX); }
  // The bytes read so far, moved out.
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::string path_;
  std::ifstream file_;
  std::optional<uint64_t> size_;
  std::vector<uint8_t> bytes_;
  bool ended_ = false;
};

// The whole file.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace flexplan::ir::detail
