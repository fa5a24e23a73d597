// Reading plan files into memory, from the start and only as far as the caller asks.
#include "ir/file_bytes.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ir/errors.hpp"

namespace flexplan::ir::detail {

FileReader::FileReader(const std::string& path) : path_(path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw PlanFormatError(path + ": is a directory, not a plan file");
  file_.open(path, std::ios::binary);
  if (!file_) throw PlanFormatError(path + ": cannot open: " + std::strerror(errno));
  if (std::filesystem::is_regular_file(path, error)) {
    const uintmax_t size = std::filesystem::file_size(path, error);
    if (!error) size_ = size;
  }
}

std::span<const uint8_t> FileReader::read_to(uint64_t total) {
  // A regular file is read at its size, capped at what is asked; anything else (a pipe) as it
  // comes. What a header announces is never reserved unchecked.
  if (size_ && bytes_.size() < total)
    bytes_.reserve(static_cast<size_t>(std::min<uint64_t>(total, *size_)));
  char buffer[1 << 16];
  while (!ended_ && bytes_.size() < total) {
    const uint64_t wanted = std::min<uint64_t>(sizeof buffer, total - bytes_.size());
    file_.read(buffer, static_cast<std::streamsize>(wanted));
    bytes_.insert(bytes_.end(), buffer, buffer + file_.gcount());
    if (!file_) {
      if (file_.bad()) throw PlanFormatError(path_ + ": read failed: " + std::strerror(errno));
      ended_ = true;
    }
  }
  return bytes_;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  FileReader file(path);
  file.read_all();
  return file.take();
}

}  // namespace flexplan::ir::detail
