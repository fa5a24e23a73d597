#include "runtime/options.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "runtime/errors.hpp"

namespace flexplan {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

uint64_t parse_positive(const char* name, std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0) {
    throw InputError(fmt::format("{}='{}': expected a positive integer", name, text));
  }
  return value;
}

bool parse_flag(const char* name, std::string_view text) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  throw InputError(fmt::format("{}='{}': expected 0 or 1", name, text));
}

}  // namespace

Options Options::from_env() {
  Options options;
  if (const char* v = env("FLEXPLAN_TIMEOUT_MS")) {
    options.timeout = std::chrono::milliseconds(parse_positive("FLEXPLAN_TIMEOUT_MS", v));
  }
  if (const char* v = env("FLEXPLAN_BLOCKING")) options.blocking = parse_flag("FLEXPLAN_BLOCKING", v);
  if (const char* v = env("FLEXPLAN_YIELD_US")) {
    // 0 is allowed: sleep at once.
    options.yield_before_sleep = std::chrono::microseconds(
        std::string_view(v) == "0" ? 0 : parse_positive("FLEXPLAN_YIELD_US", v));
  }
  if (const char* v = env("FLEXPLAN_SPIN_US")) {
    // 0 is allowed: yield at once.
    options.spin_before_yield.emplace(
        std::string_view(v) == "0" ? 0 : parse_positive("FLEXPLAN_SPIN_US", v));
  }
  if (const char* v = env("FLEXPLAN_CHUNK_BYTES")) {
    options.chunk_bytes = parse_positive("FLEXPLAN_CHUNK_BYTES", v);
  }
  if (const char* v = env("FLEXPLAN_WINDOW")) {
    const uint64_t window = parse_positive("FLEXPLAN_WINDOW", v);
    if (window > 1024) throw InputError(fmt::format("FLEXPLAN_WINDOW={}: at most 1024", window));
    options.window = static_cast<unsigned>(window);
  }
  if (const char* v = env("FLEXPLAN_RANK_MAPPING")) {
    const std::string_view text = v;
    if (text == "mpi") {
      options.rank_mapping = RankMapping::MpiRank;
    } else if (text == "name") {
      options.rank_mapping = RankMapping::Name;
    } else {
      throw InputError(fmt::format("FLEXPLAN_RANK_MAPPING='{}': expected 'mpi' or 'name'", text));
    }
  }
  if (const char* v = env("FLEXPLAN_LEARNER_NAME")) options.learner_name = v;
  if (const char* v = env("FLEXPLAN_PROGRAM_LIBRARY")) options.program_library = v;
  if (const char* v = env("FLEXPLAN_PEER_FAILURE")) {
    const std::string_view text = v;
    if (text == "remote") {
      options.peer_failure = PeerFailureDetection::Remote;
    } else if (text == "all") {
      options.peer_failure = PeerFailureDetection::All;
    } else if (text == "none") {
      options.peer_failure = PeerFailureDetection::None;
    } else {
      throw InputError(fmt::format("FLEXPLAN_PEER_FAILURE='{}': expected remote, all or none", text));
    }
  }
  if (const char* v = env("FLEXPLAN_SINGLE_COPY")) {
    const std::string_view text = v;
    if (text == "auto") {
      options.single_copy = SingleCopy::Auto;
    } else if (text == "on" || text == "1") {
      options.single_copy = SingleCopy::On;
    } else if (text == "off" || text == "0") {
      options.single_copy = SingleCopy::Off;
    } else {
      throw InputError(fmt::format("FLEXPLAN_SINGLE_COPY='{}': expected auto, on or off", text));
    }
  }
  if (const char* v = env("FLEXPLAN_SINGLE_COPY_MIN_BYTES")) {
    options.single_copy_min_bytes = parse_positive("FLEXPLAN_SINGLE_COPY_MIN_BYTES", v);
  }
  return options;
}

}  // namespace flexplan
