// The sweep as an HTML page with SVG plots and the tables (`flexplan whatif --report DIR`):
// time against the varied parameters per algorithm, the stacked step time (compute, exposed
// communication) with a workload, the busiest link's utilization, and one row per point. The
// page is self-contained: no scripts, no external resources.
#pragma once

#include <string>

#include "whatif/sweep.hpp"

namespace flexplan::whatif {

std::string html_report(const Sweep&);
// Writes DIR/index.html (creating DIR) and returns its path; throws std::runtime_error when the
// file cannot be written.
std::string write_html_report(const Sweep&, const std::string& dir);

}  // namespace flexplan::whatif
