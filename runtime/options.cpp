// Options::from_env: the FLEXPLAN_* variables parsed, each bad one recorded rather than thrown.
#include "runtime/options.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// A window's size: a positive integer no larger than 1024 (a bound on what is in flight).
unsigned parse_window(const char* name, std::string_view text) {
  const uint64_t value = parse_positive(name, text);
  if (value > 1024) throw InputError(fmt::format("{}='{}': at most 1024", name, text));
  return static_cast<unsigned>(value);
}

bool parse_flag(const char* name, std::string_view text) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  throw InputError(fmt::format("{}='{}': expected 0 or 1", name, text));
}

// Applies `name`'s value if it is set; a malformed one leaves the default and is recorded, so
// that one bad variable does not hide the others.
template <typename Apply>
void take(Options& options, const char* name, Apply apply) {
  const char* value = env(name);
  if (!value) return;
  try {
    apply(std::string_view(value));
  } catch (const InputError& e) {
    options.errors.emplace_back(e.what());
  }
}

}  // namespace

Options Options::from_env() {
  Options options;
  take(options, "FLEXPLAN_TIMEOUT_MS", [&](std::string_view v) {
    options.timeout = std::chrono::milliseconds(parse_positive("FLEXPLAN_TIMEOUT_MS", v));
  });
  take(options, "FLEXPLAN_ALLOW_HOST_MISMATCH", [&](std::string_view v) {
    options.allow_host_mismatch = parse_flag("FLEXPLAN_ALLOW_HOST_MISMATCH", v);
  });
  take(options, "FLEXPLAN_BLOCKING", [&](std::string_view v) { options.blocking = parse_flag("FLEXPLAN_BLOCKING", v); });
  take(options, "FLEXPLAN_YIELD_US", [&](std::string_view v) {
    // 0 is allowed: sleep at once.
    options.yield_before_sleep = std::chrono::microseconds(v == "0" ? 0 : parse_positive("FLEXPLAN_YIELD_US", v));
  });
  take(options, "FLEXPLAN_SPIN_US", [&](std::string_view v) {
    // 0 is allowed: yield at once.
    options.spin_before_yield.emplace(v == "0" ? 0 : parse_positive("FLEXPLAN_SPIN_US", v));
  });
  take(options, "FLEXPLAN_CHUNK_BYTES", [&](std::string_view v) {
    options.chunk_bytes = parse_positive("FLEXPLAN_CHUNK_BYTES", v);
  });
  take(options, "FLEXPLAN_WINDOW", [&](std::string_view v) {
    options.window = parse_window("FLEXPLAN_WINDOW", v);
  });
  take(options, "FLEXPLAN_STEP_OVERLAP", [&](std::string_view v) {
    options.step_overlap = parse_flag("FLEXPLAN_STEP_OVERLAP", v);
  });
  take(options, "FLEXPLAN_STEP_WINDOW", [&](std::string_view v) {
    options.step_window = parse_window("FLEXPLAN_STEP_WINDOW", v);
  });
  take(options, "FLEXPLAN_RANK_MAPPING", [&](std::string_view v) {
    if (v == "mpi") {
      options.rank_mapping = RankMapping::MpiRank;
    } else if (v == "name") {
      options.rank_mapping = RankMapping::Name;
    } else {
      throw InputError(fmt::format("FLEXPLAN_RANK_MAPPING='{}': expected 'mpi' or 'name'", v));
    }
  });
  if (const char* v = env("FLEXPLAN_LEARNER_NAME")) options.learner_name = v;
  if (const char* v = env("FLEXPLAN_PROGRAM_LIBRARY")) options.program_library = v;
  take(options, "FLEXPLAN_PEER_FAILURE", [&](std::string_view v) {
    if (v == "remote") {
      options.peer_failure = PeerFailureDetection::Remote;
    } else if (v == "all") {
      options.peer_failure = PeerFailureDetection::All;
    } else if (v == "none") {
      options.peer_failure = PeerFailureDetection::None;
    } else {
      throw InputError(fmt::format("FLEXPLAN_PEER_FAILURE='{}': expected remote, all or none", v));
    }
  });
  take(options, "FLEXPLAN_SINGLE_COPY", [&](std::string_view v) {
    if (v == "auto") {
      options.single_copy = SingleCopy::Auto;
    } else if (v == "on" || v == "1") {
      options.single_copy = SingleCopy::On;
    } else if (v == "off" || v == "0") {
      options.single_copy = SingleCopy::Off;
    } else {
      throw InputError(fmt::format("FLEXPLAN_SINGLE_COPY='{}': expected auto, on or off", v));
    }
  });
  take(options, "FLEXPLAN_SINGLE_COPY_MIN_BYTES", [&](std::string_view v) {
    options.single_copy_min_bytes = parse_positive("FLEXPLAN_SINGLE_COPY_MIN_BYTES", v);
  });
  take(options, "FLEXPLAN_FUSED_READ_BYTES", [&](std::string_view v) {
    // 0 is allowed: whole chunks.
    options.fused_read_bytes = v == "0" ? 0 : parse_positive("FLEXPLAN_FUSED_READ_BYTES", v);
  });
  take(options, "FLEXPLAN_STATS", [&](std::string_view v) { options.stats_report = parse_flag("FLEXPLAN_STATS", v); });
  if (const char* v = env("FLEXPLAN_TOPOLOGY")) options.topology_path = v;
  if (const char* v = env("FLEXPLAN_REPLAN_OUT")) options.replan_out = v;
  take(options, "FLEXPLAN_REPLAN", [&](std::string_view v) {
    if (v == "off" || v == "0") {
      options.replan = Replan::Off;
    } else if (v == "detect") {
      options.replan = Replan::Detect;
    } else if (v == "auto") {
      options.replan = Replan::Auto;
    } else {
      throw InputError(fmt::format("FLEXPLAN_REPLAN='{}': expected off, detect or auto", v));
    }
  });
  take(options, "FLEXPLAN_DRIFT_WINDOW", [&](std::string_view v) {
    const uint64_t window = parse_positive("FLEXPLAN_DRIFT_WINDOW", v);
    if (window < 2 || window > 1'000'000)
      throw InputError(fmt::format("FLEXPLAN_DRIFT_WINDOW='{}': expected 2 to 1000000 calls", v));
    options.drift_window = static_cast<unsigned>(window);
  });
  take(options, "FLEXPLAN_DRIFT_PERCENT", [&](std::string_view v) {
    const uint64_t percent = parse_positive("FLEXPLAN_DRIFT_PERCENT", v);
    if (percent > 10'000) throw InputError(fmt::format("FLEXPLAN_DRIFT_PERCENT='{}': at most 10000", v));
    options.drift_percent = static_cast<unsigned>(percent);
  });
  take(options, "FLEXPLAN_REPLAN_CONFIRM", [&](std::string_view v) {
    const uint64_t checks = parse_positive("FLEXPLAN_REPLAN_CONFIRM", v);
    if (checks > 100) throw InputError(fmt::format("FLEXPLAN_REPLAN_CONFIRM='{}': expected 1 to 100 checks", v));
    options.replan_confirm = static_cast<unsigned>(checks);
  });
  take(options, "FLEXPLAN_REPLAN_MIN_GAIN", [&](std::string_view v) {
    uint64_t percent = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), percent);
    if (ec != std::errc() || end != v.data() + v.size() || percent > 99)
      throw InputError(fmt::format("FLEXPLAN_REPLAN_MIN_GAIN='{}': expected a percent from 0 to 99", v));
    options.replan_min_gain = static_cast<unsigned>(percent);
  });
  return options;
}

void Options::throw_if_invalid() const {
  if (!errors.empty()) throw InputError(fmt::format("{}", fmt::join(errors, "; ")));
}

}  // namespace flexplan
