// The one error type of the runtime. Messages say what failed and where: the operation (its
// sequence number, algorithm, count and type), the plan step and op, the peer rank and its
// learner name, and what was expected of it.
#pragma once

#include <stdexcept>

namespace flexplan {

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace flexplan
