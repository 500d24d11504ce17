#include "cli_common.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include <algorithm>

#include <fmt/ranges.h>

#include "deep500/core/build_info.h"
#include "deep500/metrics/atomic_file.h"
#include "deep500/net/graph_executor.h"
#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"
#include "deep500/metrics/reporter.h"

namespace d5::cli {

void add_verdict_options(CLI::App& cmd, CompareOptions& opts) {
  cmd.add_option("--alpha", opts.alpha, "Significance level of the Mann-Whitney U test")
      ->check(CLI::Range(1e-6, 0.5))
      ->default_val(0.05);
  cmd.add_option("--tolerance", opts.tolerance,
                 "Relative difference that counts as the same (0.05: ratios within [1/1.05, 1.05])")
      ->check(CLI::Range(0.0, 10.0))
      ->default_val(0.05);
}

void add_output_options(CLI::App& cmd, OutputOptions& opts) {
  cmd.add_option("--format", opts.format, "Output format")
      ->check(CLI::IsMember({"console", "json"}))
      ->default_val("console");
  cmd.add_option("-o,--output", opts.output, "Write the output to FILE (atomically) instead of stdout");
}

namespace {
void write_out(const std::string& text, const OutputOptions& opts) {
  if (opts.output.empty()) {
    std::cout << text << std::flush;
  } else {
    atomic_write(opts.output, text);
    std::cerr << "d5: wrote " << opts.output << "\n";
  }
}
}  // namespace

void emit(const Results& results, const OutputOptions& opts) {
  std::ostringstream s;
  make_reporter(opts.format)->write(results, s);
  write_out(s.str(), opts);
}

void emit_text(const std::string& console_text, const nlohmann::json& json, const OutputOptions& opts) {
  write_out(opts.format == "json" ? json.dump(2) + "\n" : console_text, opts);
}

bool skip_unbuilt_executor(const std::string& backend, CaseResult& c) {
  const auto known = executor_backends();
  if (std::find(known.begin(), known.end(), backend) != known.end()) return false;
  if (!is_not_built_backend(backend))
    throw InvalidArgument(fmt::format("no backend '{}' (executors: {})", backend, fmt::join(known, ", ")));
  c.state = CaseState::Skipped;
  c.detail = fmt::format("this d5 was built without the {} backend (docs/building.md)", backend);
  return true;
}

ExperimentSettings settings_from(const GlobalOptions& g) {
  ExperimentSettings s;
  s.seed = g.seed;
  s.threads = g.threads;
  s.deterministic = g.deterministic;
  return s;
}

std::pair<std::string, std::string> split_key_value(const std::string& item, const std::string& option) {
  const auto eq = item.find('=');
  D5_CHECK_ARG(eq != std::string::npos && eq > 0, "{} '{}' is not KEY=VALUE", option, item);
  return {item.substr(0, eq), item.substr(eq + 1)};
}

std::map<std::string, double> parse_hyperparameters(const std::vector<std::string>& items) {
  std::map<std::string, double> h;
  for (const auto& item : items) {
    const auto [key, text] = split_key_value(item, "--hyper");
    const std::optional<double> v = parse_double(text);
    D5_CHECK_ARG(v.has_value(), "--hyper {}: '{}' is not a number", key, text);
    h[key] = *v;
  }
  return h;
}

std::string make_unique_directory(const std::string& base, const std::string& prefix) {
  // mkdtemp's template ends in six X, which it replaces with the unique suffix.
  std::string path = (std::filesystem::path(base) / (prefix + "-" + std::string(6, 'X'))).string();
  D5_CHECK(::mkdtemp(path.data()) != nullptr, IoError, "cannot create a directory in '{}': {}", base,
           std::strerror(errno));
  return path;
}

}  // namespace d5::cli
