// Errors of the IR library: a plan file that cannot be read, and a schedule that does not
// compute its collective.
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

}  // namespace flexplan::ir
