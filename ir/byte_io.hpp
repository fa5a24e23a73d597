// Little-endian fixed-width and LEB128 varint coding for plan.bin (internal to the IR library).
// The reader checks every length against the bytes that remain before using it, and its errors
// name the source and the byte offset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ir/errors.hpp"
#include "ir/utf8.hpp"

namespace flexplan::ir::detail {

class ByteWriter {
 public:
  void fixed32(uint32_t value) { fixed(value, 4); }
  void fixed64(uint64_t value) { fixed(value, 8); }
  void bytes(const void* data, size_t size) {
    std::memcpy(room(size), data, size);
    size_ += size;
  }
  void varint(uint64_t value) {
    uint8_t* p = room(10);
    while (value >= 0x80) {
      *p++ = static_cast<uint8_t>(value | 0x80);
      value >>= 7;
    }
    *p++ = static_cast<uint8_t>(value);
    size_ = static_cast<size_t>(p - out_.data());
  }
  // Zigzag, so that small negative numbers stay short.
  void signed_varint(int64_t value) {
    varint((static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
  }
  void string(const std::string& text) {
    varint(text.size());
    bytes(text.data(), text.size());
  }
  size_t size() const { return size_; }
  // Room for `bytes` in all without growing (and copying) on the way.
  void reserve(size_t bytes) { out_.reserve(bytes); }
  // What has been written, in place (valid until the next write).
  std::span<const uint8_t> written() const { return {out_.data(), size_}; }
  // What has been written.
  std::vector<uint8_t>& buffer() {
    out_.resize(size_);
    return out_;
  }

 private:
  // At least `size` writable bytes at the end of what has been written. The vector runs ahead
  // of size_ so that small writes go through a pointer, not one push_back per byte.
  uint8_t* room(size_t size) {
    if (out_.size() - size_ < size) {
      // Within what was reserved, by an eighth at a time (growing there copies nothing, and what
      // is zeroed ahead is memory touched: doubling zeroed hundreds of MiB never written at a
      // million learners); past it, doubling.
      const size_t grown = out_.capacity() > out_.size()
                               ? std::min(out_.size() + out_.size() / 8, out_.capacity())
                               : 2 * out_.size();
      out_.resize(std::max(grown, size_ + size + 4096));
    }
    return out_.data() + size_;
  }
  void fixed(uint64_t value, int width) {
    uint8_t* p = room(8);
    for (int i = 0; i < width; ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
    size_ += static_cast<size_t>(width);
  }
  std::vector<uint8_t> out_;
  size_t size_ = 0;
};

class ByteReader {
 public:
  // `base` is the offset of bytes[0] within the file, so errors give file offsets.
  ByteReader(std::span<const uint8_t> bytes, const std::string& source, size_t base = 0)
      : bytes_(bytes), source_(source), base_(base) {}

  size_t offset() const { return base_ + pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  [[noreturn]] void fail(const std::string& what) const { fail_at(offset(), what); }
  [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
    throw PlanFormatError(source_ + ": byte " + std::to_string(offset) + ": " + what);
  }

  uint32_t fixed32(const char* what) { return static_cast<uint32_t>(fixed(4, what)); }
  uint64_t fixed64(const char* what) { return fixed(8, what); }
  std::span<const uint8_t> bytes(size_t size, const char* what) {
    need(size, what);
    auto view = bytes_.subspan(pos_, size);
    pos_ += size;
    return view;
  }

  // Most of a plan's varints are one byte (small deltas and counts): that case stays inline and
  // the rest is a call.
  uint64_t varint(const char* what) {
    if (pos_ < bytes_.size() && bytes_[pos_] < 0x80) [[likely]]
      return bytes_[pos_++];
    return long_varint(what);
  }

  int64_t signed_varint(const char* what) {
    const uint64_t zigzag = varint(what);
    return static_cast<int64_t>(zigzag >> 1) ^ -static_cast<int64_t>(zigzag & 1);
  }
  // A signed varint that must fit in 32 bits (a level, an offset).
  int32_t signed_varint32(const char* what) {
    const size_t start = offset();
    const int64_t value = signed_varint(what);
    if (value < INT32_MIN || value > INT32_MAX)
      fail_at(start, std::string(what) + " " + std::to_string(value) + " does not fit in 32 bits");
    return static_cast<int32_t>(value);
  }
  // A varint that must be <= limit (a count, an index, an enum).
  uint64_t varint_at_most(uint64_t limit, const char* what) {
    const size_t start = offset();
    const uint64_t value = varint(what);
    if (value > limit) {
      fail_at(start, std::string(what) + " " + std::to_string(value) + " exceeds " +
                         std::to_string(limit));
    }
    return value;
  }
  // A count of items that take at least `min_item_bytes` each: never more than can remain, so
  // no allocation is sized from an unchecked length.
  size_t count(size_t min_item_bytes, const char* what) {
    const size_t start = offset();
    const uint64_t value = varint(what);
    // value * min_item_bytes > remaining(), without a division or an overflow.
    if (value > remaining() || value * min_item_bytes > remaining()) {
      fail_at(start, std::string(what) + " " + std::to_string(value) + " exceeds what the " +
                         std::to_string(remaining()) + " remaining bytes can hold");
    }
    return static_cast<size_t>(value);
  }
  std::string string(const char* what) {
    const size_t size = count(1, what);
    auto view = bytes(size, what);
    return std::string(view.begin(), view.end());
  }
  // A string that must be UTF-8; an error names the offset where its bytes start.
  std::string utf8_string(const std::string& what) {
    const size_t size = count(1, what.c_str());
    const size_t start = offset();
    auto view = bytes(size, what.c_str());
    std::string text(view.begin(), view.end());
    if (const auto bad = invalid_utf8_at(text)) {
      fail_at(start, what + " is not valid UTF-8 (byte " + hex_byte(text[*bad]) + " at offset " +
                         std::to_string(*bad) + ")");
    }
    return text;
  }

 private:
  // varint's other cases: longer than a byte, or near the end of the input.
  [[gnu::noinline]] uint64_t long_varint(const char* what) {
    if (remaining() >= 10) {
      // Fast path: no end of input within the longest varint.
      const uint8_t* p = bytes_.data() + pos_;
      uint64_t value = 0;
      for (int shift = 0; shift < 63; shift += 7) {
        const uint8_t byte = *p++;
        value |= static_cast<uint64_t>(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
          pos_ = static_cast<size_t>(p - bytes_.data());
          return value;
        }
      }
      if (*p > 1) fail(std::string(what) + " does not fit in 64 bits");
      pos_ = static_cast<size_t>(p + 1 - bytes_.data());
      return value | static_cast<uint64_t>(*p) << 63;
    }
    const size_t start = offset();
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ == bytes_.size()) fail(std::string("truncated in ") + what);
      const uint8_t byte = bytes_[pos_++];
      if (shift == 63 && byte > 1) fail_at(start, std::string(what) + " does not fit in 64 bits");
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
  }

  void need(size_t size, const char* what) const {
    if (remaining() < size) {
      fail(std::string("truncated in ") + what + " (needs " + std::to_string(size) + " bytes, " +
           std::to_string(remaining()) + " remain)");
    }
  }
  uint64_t fixed(int width, const char* what) {
    need(static_cast<size_t>(width), what);
    uint64_t value = 0;
    for (int i = 0; i < width; ++i) value |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += static_cast<size_t>(width);
    return value;
  }

  static std::string hex_byte(char c) {
    constexpr char kDigits[] = "0123456789abcdef";
    const auto u = static_cast<uint8_t>(c);
    return std::string("0x") + kDigits[u >> 4] + kDigits[u & 15];
  }

  std::span<const uint8_t> bytes_;
  const std::string& source_;
  size_t base_;
  size_t pos_ = 0;
};

// FNV-1a, 64-bit: the plan.bin checksum.
inline uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t hash = 0xcbf29ce484222325ULL) {
  for (uint8_t byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// Two FNV-1a 64 hashes of the same bytes from two starting values, in one pass: the two
// multiply chains are independent, so this costs about what one hash does.
inline std::pair<uint64_t, uint64_t> fnv1a64_twice(std::span<const uint8_t> bytes, uint64_t a,
                                                   uint64_t b) {
  for (uint8_t byte : bytes) {
    a = (a ^ byte) * 0x100000001b3ULL;
    b = (b ^ byte) * 0x100000001b3ULL;
  }
  return {a, b};
}

}  // namespace flexplan::ir::detail
