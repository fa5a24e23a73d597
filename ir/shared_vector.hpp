// A vector that copies of it share until one of them changes it (copy on write). A schedule's
// steps are held so: the pipelines the planner writes of one base, and the schedules plan.bin
// names an earlier one's steps for, hold one copy of the steps in memory, and comparing two
// that share them costs nothing.
//
// Reading is through const access only. Changing goes through edit() (or the few changing
// members below, which call it), which first copies the elements when another holder shares
// them: a change is never seen by the other holders, and a loop that only reads never copies.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

namespace flexplan::ir {

template <typename T>
class SharedVector {
 public:
  using value_type = T;
  using size_type = size_t;
  using const_iterator = typename std::vector<T>::const_iterator;
  using iterator = const_iterator;  // reading only: edit() for the elements themselves

  SharedVector() = default;
  SharedVector(std::vector<T> values)  // NOLINT: a vector converts, as it did before sharing
      : data_(values.empty() ? nullptr : std::make_shared<std::vector<T>>(std::move(values))) {}
  SharedVector(std::initializer_list<T> values) : SharedVector(std::vector<T>(values)) {}

  // Reading.
  const std::vector<T>& get() const { return data_ ? *data_ : empty_vector(); }
  operator const std::vector<T>&() const { return get(); }  // NOLINT
  size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }
  const_iterator begin() const { return get().begin(); }
  const_iterator end() const { return get().end(); }
  const_iterator cbegin() const { return get().begin(); }
  const_iterator cend() const { return get().end(); }
  const T& operator[](size_t i) const { return get()[i]; }
  const T& at(size_t i) const { return get().at(i); }
  const T& front() const { return get().front(); }
  const T& back() const { return get().back(); }
  // Whether both hold the same elements in memory (then they are equal).
  bool shares(const SharedVector& other) const { return data_ != nullptr && data_ == other.data_; }

  // Changing: the elements, this holder's own from here on.
  std::vector<T>& edit() {
    if (!data_)
      data_ = std::make_shared<std::vector<T>>();
    else if (data_.use_count() > 1)
      data_ = std::make_shared<std::vector<T>>(*data_);
    return *data_;
  }
  void push_back(T value) { edit().push_back(std::move(value)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    return edit().emplace_back(std::forward<Args>(args)...);
  }
  void pop_back() { edit().pop_back(); }
  void resize(size_t n) { edit().resize(n); }
  void reserve(size_t n) { edit().reserve(n); }
  void clear() { data_.reset(); }
  template <typename Iterator>
  void insert(const_iterator at, Iterator first, Iterator last) {
    const auto index = at - begin();
    auto& values = edit();
    values.insert(values.begin() + index, first, last);
  }
  void erase(const_iterator first, const_iterator last) {
    const auto from = first - begin(), to = last - begin();
    auto& values = edit();
    values.erase(values.begin() + from, values.begin() + to);
  }

  friend bool operator==(const SharedVector& a, const SharedVector& b) {
    return a.data_ == b.data_ || a.get() == b.get();
  }

 private:
  static const std::vector<T>& empty_vector() {
    static const std::vector<T> none;
    return none;
  }
  std::shared_ptr<std::vector<T>> data_;  // null when empty
};

}  // namespace flexplan::ir
