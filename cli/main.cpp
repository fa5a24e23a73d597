// flexplan: topology-aware collective planner. See README.md for the commands.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <new>
#include <stdexcept>

#include <fmt/core.h>

#include "allocator_tuning.hpp"
#include "command.hpp"
#include "flexplan/version.hpp"
#include "ir/errors.hpp"
#include "topology/topology.hpp"

namespace flexplan::cli {

static std::map<std::string, Setup>& registry() {
  static std::map<std::string, Setup> setups;
  return setups;
}

Registration::Registration(const char* name, Setup setup) { registry().emplace(name, setup); }

int& exit_status() {
  static int status = kExitOk;
  return status;
}

}  // namespace flexplan::cli

int main(int argc, char** argv) {
  using namespace flexplan;
  if (cli::may_plan_at_scale(argc, argv)) {
    cli::ask_for_huge_pages(argv);
    cli::keep_freed_memory(/*one_heap=*/!cli::plans_on_threads_alike(argc, argv));
  }
  CLI::App app{"flexplan: plans all-reduce, reduce-scatter, all-gather, broadcast and reduce for "
               "asymmetric cluster trees (FlexReduce and more), proves each plan correct and predicts "
               "its cost."};
  app.set_version_flag("--version", std::string("flexplan ") + kVersion);
  for (auto& [name, setup] : cli::registry()) setup(app);
  // CLI11's own errors (unknown options, missing arguments) read like every other error.
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    std::string text = fmt::format("flexplan: error: {}\n", e.what());
    if (failed && failed->get_help_ptr())
      text += fmt::format("Run with {} for more information.\n", failed->get_help_ptr()->get_name());
    return text;
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : cli::kExitBadInput;
  } catch (const TopologyError& e) {
    fmt::print(stderr, "flexplan: error: topology: {}\n", e.what());
    return cli::kExitBadInput;
  } catch (const ir::PlanFormatError& e) {
    fmt::print(stderr, "flexplan: error: plan: {}\n", e.what());
    return cli::kExitBadInput;
  } catch (const ir::TooLargeToExpand& e) {
    // A sound plan that this tool cannot expand whole (the runtime still runs it).
    fmt::print(stderr, "flexplan: refused: {}\n", e.what());
    return cli::kExitRefused;
  } catch (const ir::VerifyError& e) {
    fmt::print(stderr, "flexplan: error: verification failed: {}\n", e.what());
    return cli::kExitFailed;
  } catch (const std::invalid_argument& e) {
    // The libraries' word for a request the input cannot take (a forced algorithm that does
    // not suit the tree): the user's to change.
    fmt::print(stderr, "flexplan: error: {}\n", e.what());
    return cli::kExitBadInput;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "flexplan: error: out of memory\n");
    return cli::kExitInternal;
  } catch (const std::exception& e) {
    fmt::print(stderr, "flexplan: error: {}\n", e.what());
    return cli::kExitInternal;
  }
  return cli::exit_status();
}
