// The runtime's errors. Messages say what failed and where: the operation (its sequence
// number, algorithm, count and type), the plan step and op, the peer rank and its learner name,
// and what was expected of it.
#pragma once

#include <stdexcept>

namespace flexplan {

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a communicator was given is wrong: the plan (missing, corrupt, unverifiable, for another
// world size, different on different ranks), the options (a malformed FLEXPLAN_* variable,
// chunk sizes that differ) or the rank mapping. Retrying will not help; tools exit 2 for it, as
// for any malformed input.
class InputError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

}  // namespace flexplan
