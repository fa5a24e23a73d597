// `flexplan topo import`: the subcommand's options and its run (cli/topo_import.cpp); cmd_topo.cpp
// adds it beside `topo show`.
#pragma once

#include <CLI/CLI.hpp>

namespace flexplan::cli {

void add_topo_import(CLI::App& topo);

}  // namespace flexplan::cli
