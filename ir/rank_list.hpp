// RankList: an op's group of ranks, stored inline up to four members and on the heap beyond.
// Most groups of a large plan are pairs (recursive halving, trees, rings), and a plan of millions
// of ops would otherwise make one heap block per op when it is built, decoded or copied.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

namespace flexplan::ir {

class RankList {
 public:
  using value_type = int32_t;
  using size_type = size_t;
  using iterator = int32_t*;
  using const_iterator = const int32_t*;
  using reference = int32_t&;
  using const_reference = const int32_t&;

  RankList() noexcept = default;
  RankList(std::initializer_list<int32_t> ranks) { append(ranks.begin(), ranks.end()); }
  template <std::forward_iterator It>
  RankList(It first, It last) {
    append(first, last);
  }
  // Implicit, as the planner builds groups in vectors and hands them over.
  RankList(const std::vector<int32_t>& ranks) { append(ranks.begin(), ranks.end()); }
  RankList(const RankList& other) { append(other.begin(), other.end()); }
  RankList(RankList&& other) noexcept { take(other); }
  RankList& operator=(const RankList& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  RankList& operator=(RankList&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  RankList& operator=(std::initializer_list<int32_t> ranks) {
    clear();
    append(ranks.begin(), ranks.end());
    return *this;
  }
  ~RankList() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int32_t* data() { return data_; }
  const int32_t* data() const { return data_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  int32_t& operator[](size_t i) { return data()[i]; }
  int32_t operator[](size_t i) const { return data()[i]; }
  int32_t& front() { return data()[0]; }
  int32_t front() const { return data()[0]; }
  int32_t& back() { return data()[size_ - 1]; }
  int32_t back() const { return data()[size_ - 1]; }
  operator std::span<const int32_t>() const { return {data(), size_}; }
  std::vector<int32_t> to_vector() const { return {begin(), end()}; }

  void reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    if (capacity > kMaxSize) throw std::length_error("flexplan: a group of 2^32 ranks or more");
    int32_t* grown = new int32_t[capacity];
    if (size_ > 0) std::memcpy(grown, data(), size_ * sizeof(int32_t));
    if (on_heap()) delete[] data_;
    data_ = grown;
    capacity_ = static_cast<uint32_t>(capacity);
  }
  // New members are 0, as std::vector's.
  void resize(size_t size) {
    reserve(size);
    if (size > size_) std::fill(data() + size_, data() + size, 0);
    size_ = static_cast<uint32_t>(size);
  }
  void clear() { size_ = 0; }
  void push_back(int32_t rank) {
    if (size_ == capacity_) reserve(grown(size_ + 1));
    data()[size_++] = rank;
  }
  void pop_back() { --size_; }
  // [first, last) must not point into this list.
  template <std::forward_iterator It>
  iterator insert(const_iterator at, It first, It last) {
    const size_t offset = static_cast<size_t>(at - data());
    const size_t count = static_cast<size_t>(std::distance(first, last));
    if (size_ + count > capacity_) reserve(grown(size_ + count));
    int32_t* place = data() + offset;
    std::memmove(place + count, place, (size_ - offset) * sizeof(int32_t));
    std::copy(first, last, place);
    size_ += static_cast<uint32_t>(count);
    return place;
  }
  iterator insert(const_iterator at, int32_t rank) { return insert(at, &rank, &rank + 1); }
  iterator erase(const_iterator at) {
    int32_t* place = data() + (at - data());
    std::memmove(place, place + 1, (end() - place - 1) * sizeof(int32_t));
    --size_;
    return place;
  }

  friend bool operator==(const RankList& a, const RankList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr uint32_t kInline = 4;
  static constexpr size_t kMaxSize = std::numeric_limits<uint32_t>::max();

  // Capacity for `needed` members: doubling, but never past kMaxSize while `needed` fits.
  size_t grown(size_t needed) const {
    return std::max(needed, std::min(size_t{capacity_} * 2, kMaxSize));
  }

  bool on_heap() const { return capacity_ > kInline; }
  template <typename It>
  void append(It first, It last) {
    insert(end(), first, last);
  }
  void release() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = kInline;
    size_ = 0;
  }
  // Leaves `other` empty and inline.
  void take(RankList& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.on_heap()) {
      data_ = other.data_;
    } else {
      std::memcpy(inline_, other.inline_, sizeof inline_);
      data_ = inline_;
    }
    other.data_ = other.inline_;
    other.size_ = 0;
    other.capacity_ = kInline;
  }

  // data_ points at inline_ until the list outgrows it, so that reading a member costs what it
  // does in a vector (no branch on where the members are).
  int32_t* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;
  int32_t inline_[kInline] = {};
};

}  // namespace flexplan::ir
