// Slurm hostlist expressions ("node[01-16,20]", "rack[0-1]-gpu[1-4]", "a1,b[2-3] c4"): expanded
// to host names, as Slurm's topology.conf, slurm.conf and job environments write them.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace flexplan {

// A malformed expression; `position()` is the byte offset of the problem in it.
class HostlistError : public std::invalid_argument {
 public:
  HostlistError(size_t position, const std::string& what)
      : std::invalid_argument(what), position_(position) {}
  size_t position() const { return position_; }

 private:
  size_t position_;
};

// The most names one expression may expand to by default: more than any cluster has, and small
// enough that a typo such as node[1-99999999] is refused before it is spelled out.
inline constexpr size_t kMaxHostlistNames = 1'000'000;

// Expands `expression` in Slurm's forms:
//  - names separated by commas or whitespace: "a1,a2 a3" (empty entries are skipped);
//  - a bracketed list of numbers and ranges after a prefix: "tux[0-5,12,20-25]";
//  - zero padding taken from the lower bound: "node[01-16]" gives node01 ... node16;
//  - text after the brackets and several bracketed lists in one name, every combination in
//    order with the last list varying fastest: "rack[1-2]-node[1-3]-ib";
//  - the rectangular prism of 3-D systems, two equal-length digit strings joined by "x": each
//    digit position is a range, "bgl[123x234]" gives bgl123, bgl124, bgl133, ... bgl234.
// Names keep their order; a name given twice is kept twice (callers decide). Throws
// HostlistError for an unclosed or nested bracket, an empty list or range, a bound that is not
// a number, a range whose end is below its start, or more than `max_names` names.
std::vector<std::string> expand_hostlist(std::string_view expression,
                                         size_t max_names = kMaxHostlistNames);

// Whether `name` is one of the names `expression` expands to (throws as expand_hostlist).
bool hostlist_contains(std::string_view expression, std::string_view name);

}  // namespace flexplan
