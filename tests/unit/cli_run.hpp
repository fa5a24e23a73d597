// Running the flexplan program from the tests, as a user would from a shell, and a scratch
// directory per test for the files it reads and writes.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace flexplan::testing {

struct CliRun {
  int exit_code = -1;  // -1 when the program did not exit normally or could not be started
  std::string output;  // what `streams` sends to the pipe: stdout and stderr by default
};

// Runs FLEXPLAN_BINARY with `arguments` (shell words, quoted by the caller). `streams` is a
// shell redirection ("2>&1" or "2>/dev/null"); `cwd`, when given, is the working directory.
inline CliRun run_flexplan(const std::string& arguments, const std::string& streams = "2>&1",
                           const std::string& cwd = "") {
  std::string command = std::string("'") + FLEXPLAN_BINARY + "' " + arguments + " " + streams;
  if (!cwd.empty()) command = "cd '" + cwd + "' && " + command;
  CliRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    run.output = "popen failed";
    return run;
  }
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// A fixture with a fresh directory per test (named after the process and the test, so that
// parallel ctest runs do not collide), removed afterwards.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("flexplan-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& file) const { return (dir_ / file).string(); }

  std::filesystem::path dir_;
};

}  // namespace flexplan::testing
