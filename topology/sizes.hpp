// Message sizes as every command and flexbench read them: one rule, K/M/G/T binary as
// nccl-tests reads them ("64K" is 65536 bytes); rates are decimal and live with the bandwidths
// (topology.hpp: "1 MB/s" is 10^6 bytes/s). docs/topology.md, "Sizes", states the rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flexplan {

// "65536", "64K", "1.5M", "16 M", "2GiB", "100B" -> bytes. K, M, G, T (either case) and KiB,
// MiB, GiB, TiB are powers of 1024; a space before the unit is allowed; a fraction must come to
// whole bytes ("1.5K" is 1536, "1.3K" is refused). "16MB" is read as 16 MiB, as the older
// spelling always was, and `warning` (when given) says so; it is left empty otherwise.
// Throws std::invalid_argument naming the text.
uint64_t parse_size(std::string_view text, std::string* warning = nullptr);

}  // namespace flexplan
