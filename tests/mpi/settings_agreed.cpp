// Creates a communicator with the default Options (Options::from_env(), as a direct API user
// does) and prints on every rank what creation said: settings_agreed.sh checks that a bad
// FLEXPLAN_* value on some ranks fails every rank, naming them, instead of hanging the others.
//   settings_agreed PLAN [path|memory]
#include <mpi.h>

#include <string>

#include <fmt/format.h>

#include "ir/plan_binary.hpp"
#include "runtime/communicator.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string plan_path = argc > 1 ? argv[1] : "";
  const bool in_memory = argc > 2 && std::string(argv[2]) == "memory";
  int status = 0;
  try {
    // Both constructors take their Options from the default argument.
    if (in_memory) {
      flexplan::Communicator comm(flexplan::ir::read_plan_file(plan_path), MPI_COMM_WORLD);
    } else {
      flexplan::Communicator comm(plan_path, MPI_COMM_WORLD);
    }
    fmt::print("settings-agreed: rank {} created the communicator\n", rank);
  } catch (const flexplan::RuntimeError& e) {
    // One line per rank, so that the ranks' reports cannot interleave within a message.
    std::string message = e.what();
    for (char& c : message) c = c == '\n' ? '|' : c;
    fmt::print("settings-agreed: rank {} caught: {}\n", rank, message);
    status = dynamic_cast<const flexplan::InputError*>(&e) != nullptr ? 2 : 3;
  }
  std::fflush(stdout);
  MPI_Finalize();
  return status;
}
