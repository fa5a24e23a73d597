// Times parse_topology on big trees written out in full (every learner its own JSON object)
// and the same trees written with "count", each in a fresh child process so that its peak
// memory is its own. Shapes: "flat" (every learner a child of the root), "machines" (machines
// of 8 learners under the root) and "racks" (racks of 32 machines of 8 learners).
// Usage: topology_parse_bench [LEARNERS,...]   (default 100000,1000000)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace {

using Clock = std::chrono::steady_clock;

const char* const kLink = R"("link": {"bandwidth": "100 Gbit/s", "latency": "2 us"})";

std::string learners_json(int count, bool written_out) {
  if (!written_out)
    return fmt::format(R"({{"name": "gpu", "count": {}, {}}})", count, kLink);
  std::string out;
  for (int i = 0; i < count; ++i)
    out += fmt::format(R"({}{{"name": "gpu{}", {}}})", i ? ",\n" : "", i, kLink);
  return out;
}

// The JSON text of `learners` learners in the given shape.
std::string tree_json(const std::string& shape, int learners, bool written_out) {
  std::string children;
  if (shape == "flat") {
    children = learners_json(learners, written_out);
  } else if (shape == "machines") {
    const std::string machine = fmt::format(R"({{"name": "m{{i}}", "count": {}, {}, "children": [{}]}})",
                                            learners / 8, kLink, learners_json(8, false));
    if (!written_out) {
      children = machine;
    } else {
      for (int m = 0; m < learners / 8; ++m)
        children += fmt::format(R"({}{{"name": "m{}", {}, "children": [{}]}})", m ? ",\n" : "", m,
                                kLink, learners_json(8, true));
    }
  } else {  // racks of 32 machines of 8
    const int racks = learners / 256;
    for (int r = 0; r < racks; ++r) {
      std::string machines;
      for (int m = 0; m < 32; ++m) {
        machines += fmt::format(R"({}{{"name": "m{}", {}, "children": [{}]}})", m ? "," : "", m, kLink,
                                learners_json(8, written_out));
      }
      children += fmt::format(R"({}{{"name": "r{}", {}, "children": [{}]}})", r ? ",\n" : "", r,
                              kLink, machines);
    }
  }
  return fmt::format(R"({{"name": "bench", "root": {{"name": "core", "children": [{}]}}}})",
                     children);
}

void run_case(const std::string& shape, int learners, bool written_out) {
  fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    const std::string json = tree_json(shape, learners, written_out);
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    const auto start = Clock::now();
    const flexplan::Topology topology = flexplan::parse_topology(json, "bench.json");
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    fmt::print("{:<9} {:>9} {:<11} {:>8.1f} MiB {:>9.2f} s {:>9.2f} s {:>8} MiB\n", shape,
               topology.num_learners(), written_out ? "written out" : "with count",
               json.size() / 1048576.0, seconds,
               (after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
                   (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6,
               after.ru_maxrss / 1024);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fmt::print("{:<9} {:>9} failed (status {})\n", shape, learners, status);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{100000, 1000000};
  if (argc > 1) {
    sizes.clear();
    std::stringstream list(argv[1]);
    for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::stoi(item));
  }
  fmt::print("{:<9} {:>9} {:<11} {:>12} {:>11} {:>11} {:>12}\n", "shape", "learners", "form",
             "JSON", "parse", "user cpu", "peak RSS");
  for (int learners : sizes) {
    for (const char* shape : {"flat", "machines", "racks"}) {
      run_case(shape, learners, true);
      run_case(shape, learners, false);
    }
  }
  return 0;
}
