// Errors of the IR library: a plan file that cannot be read, a schedule that does not compute
// its collective, and a pipeline too large to hold whole.
#pragma once

#include <stdexcept>
#include <string>

namespace flexplan::ir {

// plan.bin or a textual plan is malformed: bad magic, version, checksum, truncation, syntax.
class PlanFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The verifier proved a schedule wrong. The message names schedule, step, op, rank and range.
class VerifyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A compact pipeline whose expansion is too large to hold whole, for the tools that need it
// whole (the text and JSON forms, codegen). The message names the schedule and the sizes.
class TooLargeToExpand : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace flexplan::ir
