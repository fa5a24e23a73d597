// Reading a whole file (internal to the IR library).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flexplan::ir::detail {

// Throws PlanFormatError naming the path and the system's reason.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace flexplan::ir::detail
