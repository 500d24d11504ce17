#pragma once
// The manifest: everything needed to tell where, how and with what a result was produced.
// Written into every result file (see docs/results-format.md for the keys).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/metrics/experiment.h"

namespace d5 {

// The command line and start time of this process; the CLI sets them first thing.
void set_invocation(int argc, const char* const* argv);
const std::vector<std::string>& invocation_command_line();
const std::string& invocation_start_time_utc();

// Lists the backends registered so far; the CLI registers the built-in ones first.
nlohmann::json make_manifest(const ExperimentSettings& settings);

}  // namespace d5
