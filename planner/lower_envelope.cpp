// The lower envelope of cost lines: where each algorithm is the fastest.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "planner/plan_builder.hpp"

namespace flexplan {
namespace {

constexpr double kRelativeTie = 1e-9;

bool no_worse(double a, double b) { return a <= b + std::abs(b) * kRelativeTie; }

// Line i is at least as good as line j at every n >= 0.
bool dominates(const LinearCost& i, const LinearCost& j) {
  return no_worse(i.latency, j.latency) && no_worse(i.per_byte, j.per_byte);
}

}  // namespace

std::vector<EnvelopePiece> lower_envelope(std::span<const LinearCost> lines) {
  if (lines.empty()) throw std::invalid_argument("lower_envelope: no lines");
  // Drop lines an earlier line matches or beats everywhere, so near-equal lines (FlexReduce
  // and BlueConnect on a symmetric tree) go to the earlier algorithm.
  std::vector<size_t> live;
  for (size_t j = 0; j < lines.size(); ++j) {
    bool beaten = false;
    for (size_t i : live) beaten = beaten || dominates(lines[i], lines[j]);
    if (!beaten) live.push_back(j);
  }

  // Start with the lowest line at n = 0 (ties: the flatter, then the earlier).
  size_t current = live.front();
  for (size_t j : live) {
    const auto& a = lines[j];
    const auto& b = lines[current];
    if (a.latency < b.latency || (a.latency == b.latency && a.per_byte < b.per_byte)) current = j;
  }

  std::vector<EnvelopePiece> pieces;
  uint64_t start = 0;
  constexpr double kMaxBytes = static_cast<double>(std::numeric_limits<uint64_t>::max());
  for (;;) {
    // The next line to undercut the current one: the earliest crossing among flatter lines.
    const auto& cur = lines[current];
    std::optional<size_t> next;
    double next_at = 0;
    for (size_t j : live) {
      const auto& line = lines[j];
      if (!(line.per_byte < cur.per_byte)) continue;
      const double at = std::max(0.0, (line.latency - cur.latency) / (cur.per_byte - line.per_byte));
      if (!next || at < next_at || (at == next_at && line.per_byte < lines[*next].per_byte)) {
        next = j;
        next_at = at;
      }
    }
    if (!next || next_at >= kMaxBytes) break;
    const uint64_t boundary = static_cast<uint64_t>(std::ceil(next_at));
    if (boundary > start) {
      pieces.push_back({current, start, boundary});
      start = boundary;
    }
    current = *next;
  }
  pieces.push_back({current, start, std::nullopt});
  return pieces;
}

}  // namespace flexplan
