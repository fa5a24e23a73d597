// RankList (ir/rank_list.hpp): behaves as a vector of ranks through growth past its inline
// members, copies, moves and edits, and keeps short groups inside the object.
#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "ir/rank_list.hpp"

namespace flexplan::ir {
namespace {

bool stored_inside(const RankList& list) {
  const auto* at = reinterpret_cast<const char*>(list.data());
  const auto* object = reinterpret_cast<const char*>(&list);
  const std::less<const char*> before;  // a total order, unlike < on unrelated pointers
  return !before(at, object) && before(at, object + sizeof list);
}

std::vector<int32_t> iota(int32_t count) {
  std::vector<int32_t> ranks;
  for (int32_t r = 0; r < count; ++r) ranks.push_back(r * 7);
  return ranks;
}

TEST(RankList, GrowsFromInlineToHeapKeepingItsMembers) {
  RankList list;
  EXPECT_TRUE(list.empty());
  for (int32_t count = 1; count <= 40; ++count) {
    list.push_back((count - 1) * 7);
    ASSERT_EQ(list.to_vector(), iota(count)) << count;
    EXPECT_EQ(stored_inside(list), count <= 4) << count;
  }
  EXPECT_EQ(list.front(), 0);
  EXPECT_EQ(list.back(), 39 * 7);
}

TEST(RankList, CopiesAndMovesAtEverySize) {
  for (int32_t count : {0, 1, 2, 4, 5, 9, 33}) {
    const RankList original(iota(count));
    RankList copy = original;
    EXPECT_EQ(copy, original);
    copy.push_back(-1);  // the copy owns its members
    EXPECT_EQ(original.to_vector(), iota(count));

    RankList moved = std::move(copy);
    EXPECT_EQ(moved.size(), static_cast<size_t>(count) + 1);
    EXPECT_EQ(moved.back(), -1);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
    copy.push_back(3);          // and usable
    EXPECT_EQ(copy.to_vector(), std::vector<int32_t>{3});

    RankList assigned{1, 2, 3, 4, 5, 6};
    assigned = moved;
    EXPECT_EQ(assigned, moved);
    assigned = std::move(moved);
    EXPECT_EQ(assigned.back(), -1);
    const RankList& same = assigned;
    assigned = same;  // self-assignment keeps the members
    EXPECT_EQ(assigned.size(), static_cast<size_t>(count) + 1);
  }
}

TEST(RankList, EditsAsAVectorWould) {
  for (int32_t count : {0, 1, 3, 4, 8}) {
    for (int32_t at = 0; at <= count; ++at) {
      std::vector<int32_t> expected = iota(count);
      RankList list(expected);
      expected.insert(expected.begin() + at, 99);
      list.insert(list.begin() + at, 99);
      ASSERT_EQ(list.to_vector(), expected) << count << " insert at " << at;
      const std::vector<int32_t> more{5, 6, 7};
      expected.insert(expected.begin() + at, more.begin(), more.end());
      list.insert(list.begin() + at, more.begin(), more.end());
      ASSERT_EQ(list.to_vector(), expected) << count << " insert 3 at " << at;
      expected.erase(expected.begin() + at);
      list.erase(list.begin() + at);
      ASSERT_EQ(list.to_vector(), expected) << count << " erase at " << at;
    }
  }
  RankList list{4, 5};
  list.resize(6);
  EXPECT_EQ(list.to_vector(), (std::vector<int32_t>{4, 5, 0, 0, 0, 0}));
  list.resize(1);
  list.pop_back();
  EXPECT_TRUE(list.empty());
  list = {8, 9};
  EXPECT_EQ(list, (RankList{8, 9}));
  EXPECT_FALSE(list == (RankList{8, 9, 10}));
  EXPECT_FALSE(list == (RankList{9, 8}));
}

}  // namespace
}  // namespace flexplan::ir
