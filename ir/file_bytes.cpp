// Reading a whole file into memory, for the plan decoders.
#include "ir/file_bytes.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ir/errors.hpp"

namespace flexplan::ir::detail {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw PlanFormatError(path + ": is a directory, not a plan file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw PlanFormatError(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  // A regular file is read in one go at its size; anything else (a pipe) as it comes.
  const auto size = std::filesystem::is_regular_file(path, error)
                        ? std::filesystem::file_size(path, error)
                        : static_cast<uintmax_t>(-1);
  if (!error && size != static_cast<uintmax_t>(-1)) bytes.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  while (file) {
    file.read(buffer, sizeof buffer);
    bytes.insert(bytes.end(), buffer, buffer + file.gcount());
  }
  if (file.bad()) throw PlanFormatError(path + ": read failed: " + std::strerror(errno));
  return bytes;
}

}  // namespace flexplan::ir::detail
