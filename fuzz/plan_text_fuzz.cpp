// libFuzzer harness for the text form's parser: any input is parsed; an accepted plan must
// pass the checks of fuzz/plan_checks.hpp.
#include <cstdint>
#include <string_view>

#include "fuzz/plan_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flexplan::ir::Plan plan;
  try {
    plan = flexplan::ir::parse_plan_text(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.txt");
  } catch (const flexplan::ir::PlanFormatError&) {
    return 0;
  }
  flexplan::fuzz::check_decoded_plan(plan);
  return 0;
}
