#include "ir/plan_load.hpp"

#include <string_view>

#include "ir/errors.hpp"
#include "ir/file_bytes.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_text.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

Plan load_plan_file(const std::string& path, LoadCheck check) {
  const std::vector<uint8_t> bytes = detail::read_file_bytes(path);
  if (bytes.empty()) throw PlanFormatError(path + ": the file is empty");
  Plan plan =
      has_plan_magic(bytes)
          ? decode_plan_unverified(bytes, path)
          : parse_plan_text(
                std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
  if (check == LoadCheck::Verify) verify_plan(plan);
  return plan;
}

}  // namespace flexplan::ir
