#include "store_group.hpp"

#include <exception>

#include <fmt/format.h>

#include "runtime/errors.hpp"

namespace flexplan::torch_backend {

StoreGroup::StoreGroup(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                       std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout) {}

std::vector<std::string> StoreGroup::allgather(const std::string& mine) {
  const int round = rounds_++;
  auto key = [&](int r) { return fmt::format("flexplan/exchange/{}/{}", round, r); };
  std::vector<std::string> out(static_cast<size_t>(size_));
  try {
    // One byte before the data: torch 1.13's store answers the read of an empty value 200 ms
    // late (its reply's length goes out with MSG_MORE and nothing follows to push it; seen
    // with strace), and the probe's broadcasts and barriers send many empty parts.
    std::vector<uint8_t> value;
    value.reserve(mine.size() + 1);
    value.push_back('.');
    value.insert(value.end(), mine.begin(), mine.end());
    store_->set(key(rank_), value);
  } catch (const std::exception& e) {
    throw RuntimeError(fmt::format("flexplan: rank {} could not write to the store: {}", rank_, e.what()));
  }
  for (int r = 0; r < size_; ++r) {
    try {
      // wait() names the timeout; get() alone would use the store's own.
      store_->wait({key(r)}, timeout_);
      const auto bytes = store_->get(key(r));
      if (bytes.empty()) throw RuntimeError(fmt::format("rank {}'s part is empty (another flexplan version?)", r));
      out[static_cast<size_t>(r)].assign(bytes.begin() + 1, bytes.end());
    } catch (const std::exception& e) {
      throw RuntimeError(fmt::format(
          "flexplan: rank {} waited {} ms in vain for rank {} to join exchange {} through the store "
          "(did it die, or never start?): {}",
          rank_, timeout_.count(), r, round, e.what()));
    }
  }
  // Everyone has read everything before anyone goes on: a rank that then fails and exits may
  // take the store with it (rank 0 hosts it under init_process_group's env://), and a peer
  // still reading would get a broken connection instead of the same error. This rank has its
  // data already, so a store that fails now changes nothing here (the last to arrive may see the
  // store's host leave as it arrives).
  try {
    const auto done = fmt::format("flexplan/exchange/{}/done", round);
    if (store_->add(done + "/count", 1) == size_) {
      store_->set(done, std::vector<uint8_t>{1});
    } else {
      store_->wait({done}, timeout_);
    }
  } catch (const std::exception&) {
  }
  return out;
}

void StoreGroup::barrier_start() {
  try {
    store_->add(fmt::format("flexplan/barrier/{}", barriers_), 1);
  } catch (const std::exception&) {
    barrier_failed_ = true;  // barrier_done reports it done: the caller's timeout stays the bound
  }
}

bool StoreGroup::barrier_done() {
  if (barrier_failed_) return true;
  try {
    if (store_->add(fmt::format("flexplan/barrier/{}", barriers_), 0) < size_) return false;
  } catch (const std::exception&) {
    // The store is gone (its host process ended): nobody is left to wait for.
  }
  ++barriers_;
  return true;
}

std::string StoreGroup::launch_hint(int n) const {
  return fmt::format("launch {} processes, e.g. torchrun --nproc_per_node {}", n, n);
}

}  // namespace flexplan::torch_backend
