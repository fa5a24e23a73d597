#include "ir/file_bytes.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ir/errors.hpp"

namespace flexplan::ir::detail {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw PlanFormatError(path + ": is a directory, not a plan file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw PlanFormatError(path + ": cannot open: " + std::strerror(errno));
  try {
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    throw PlanFormatError(path + ": read failed: " + e.what());
  }
}

}  // namespace flexplan::ir::detail
