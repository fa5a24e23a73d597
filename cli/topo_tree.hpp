// Pieces of `flexplan topo show` (cli/cmd_topo.cpp): the folded tree, and the wording the
// tree and the other sections share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "topology/topology.hpp"

namespace flexplan::cli {

// "1 learner", "3 learners", "2 children".
std::string plural(size_t n, std::string_view word);
// "10 Gbit/s, 50 us"
std::string link_text(const Link& link);

// Prints the tree with identical sibling subtrees folded ("m[0..15] x16"), at most `max_lines`
// lines of it (0: all), then how many were left out.
void print_folded_tree(const Topology& topo, int max_lines);

}  // namespace flexplan::cli
