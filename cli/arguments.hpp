// The argument spellings every command shares (README, "The commands"): sizes by the one rule
// of topology/sizes.hpp, data types by one set of names, --format, warnings for the older
// spellings that still work, and comma lists.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "planner/size_format.hpp"
#include "topology/sizes.hpp"

namespace flexplan::cli {

// "flexplan: warning: ..." on stderr: an older spelling that still works.
inline void warn(std::string_view what) { fmt::print(stderr, "flexplan: warning: {}\n", what); }

// A size given to `option` ("-b", "--at"): warns about "16MB", and throws CLI::ValidationError
// (exit 2, prefixed) naming the option on a bad one.
inline uint64_t size_argument(std::string_view text, std::string_view option) {
  std::string warning;
  uint64_t bytes = 0;
  try {
    bytes = parse_size(text, &warning);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(fmt::format("{}: {}", option, e.what()));
  }
  if (!warning.empty()) warn(fmt::format("{}: {}", option, warning));
  return bytes;
}

// The element size of a -t/--dtype name, warning about the older names.
inline size_t dtype_argument(std::string_view text) {
  std::string warning;
  size_t size = 0;
  try {
    size = dtype_size(text, &warning);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(fmt::format("-t/--dtype: {}", e.what()));
  }
  if (!warning.empty()) warn(fmt::format("-t/--dtype: {}", warning));
  return size;
}

// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> comma_list(std::string_view text) {
  std::vector<std::string> words;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) words.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return words;
}

// The sizes -b/-e/-f ask for: min, min * f, ... up to max, as nccl-tests steps them.
inline std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor) {
  if (min_bytes == 0) throw CLI::ValidationError("-b/--minbytes must be at least 1 byte");
  if (max_bytes < min_bytes)
    throw CLI::ValidationError(fmt::format("-e/--maxbytes ({} B) is below -b/--minbytes ({} B)",
                                           max_bytes, min_bytes));
  if (factor < 2) throw CLI::ValidationError("-f/--stepfactor must be at least 2");
  std::vector<uint64_t> sizes;
  for (uint64_t bytes = min_bytes;; bytes *= factor) {
    sizes.push_back(bytes);
    if (bytes > max_bytes / factor) break;  // the next size would pass the end
  }
  return sizes;
}

// --format with the given choices (text first: the default).
inline CLI::Option* add_format_option(CLI::App& app, std::string& format,
                                      std::initializer_list<std::string> choices = {"text", "json"}) {
  std::string names;
  for (const std::string& c : choices) names += (names.empty() ? "" : " or ") + c;
  return app.add_option("--format", format, "output form: " + names)
      ->check(CLI::IsMember(std::vector<std::string>(choices)))
      ->capture_default_str();
}

}  // namespace flexplan::cli
