// Runs the plans kept in text form under tests/ir/: each file holds cases separated by
// "# -----" lines. A case with "# expected-verify-error: TEXT" or "# expected-format-error: TEXT"
// lines must fail that way with every TEXT in the message; a case with neither must parse and
// verify. Line numbers in messages are the file's, so a case reads like the file it is in.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/errors.hpp"
#include "ir/plan_text.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {
namespace {

struct TextCase {
  std::string file;
  size_t first_line = 1;  // 1-based line of the case's first line in its file
  std::string text;       // preceded by blank lines so that line numbers match the file
  std::vector<std::string> verify_errors, format_errors;
};

std::vector<TextCase> read_cases(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<TextCase> cases;
  TextCase current{path.filename().string(), 1, "", {}, {}};
  size_t line_number = 0;
  auto directive = [](const std::string& line, const std::string& name, std::string& value) {
    const std::string prefix = "# " + name + ": ";
    if (line.rfind(prefix, 0) != 0) return false;
    value = line.substr(prefix.size());
    return true;
  };
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.rfind("# -----", 0) == 0) {
      cases.push_back(current);
      current = TextCase{path.filename().string(), line_number + 1,
                         std::string(line_number, '\n'), {}, {}};
      continue;
    }
    std::string value;
    if (directive(line, "expected-verify-error", value)) current.verify_errors.push_back(value);
    if (directive(line, "expected-format-error", value)) current.format_errors.push_back(value);
    current.text += line + "\n";
  }
  cases.push_back(current);
  return cases;
}

std::vector<std::filesystem::path> case_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(FLEXPLAN_SOURCE_DIR) / "tests/ir"))
    if (entry.path().extension() == ".plan") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(IrTextCases, EveryCaseFailsOrPassesAsWritten) {
  const auto files = case_files();
  ASSERT_GE(files.size(), 3u);
  size_t run = 0;
  for (const auto& path : files) {
    for (const TextCase& c : read_cases(path)) {
      const std::string where = c.file + ":" + std::to_string(c.first_line);
      std::string verify_message, format_message;
      try {
        verify_plan(parse_plan_text(c.text, c.file));
      } catch (const PlanFormatError& e) {
        format_message = e.what();
      } catch (const VerifyError& e) {
        verify_message = e.what();
      }
      ++run;
      if (c.verify_errors.empty() && c.format_errors.empty()) {
        EXPECT_EQ(format_message + verify_message, "") << where << ": must verify";
        continue;
      }
      const bool wants_format = !c.format_errors.empty();
      const std::string& message = wants_format ? format_message : verify_message;
      ASSERT_FALSE(message.empty())
          << where << ": expected a " << (wants_format ? "format" : "verify")
          << " error, got: " << (format_message + verify_message);
      for (const auto& part : wants_format ? c.format_errors : c.verify_errors)
        EXPECT_NE(message.find(part), std::string::npos)
            << where << ": message lacks '" << part << "':\n  " << message;
    }
  }
  EXPECT_GE(run, 20u);
}

}  // namespace
}  // namespace flexplan::ir
