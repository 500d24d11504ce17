// d5 stats: summary statistics of raw samples from a text file (or stdin), with the
// nonparametric confidence interval of the median.
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/core/error.h"
#include "deep500/metrics/results.h"
#include "deep500/metrics/statistics.h"

namespace d5::cli {

namespace {
using nlohmann::json;

// Whitespace- or comma-separated numbers; '#' starts a comment. Anything else is an error that
// names the line, because silently skipping it would change the statistics.
std::vector<double> read_samples(std::istream& in, const std::string& name) {
  std::vector<double> v;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    for (char& c : line)
      if (c == ',') c = ' ';
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      size_t used = 0;
      double x = 0;
      try {
        x = std::stod(w, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      D5_CHECK(used == w.size() && std::isfinite(x), FormatError,
               "{}:{}: '{}' is not a finite number", name, line_no, w);
      v.push_back(x);
    }
  }
  return v;
}
}  // namespace

Command register_stats(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand(
      "stats", "Summarize raw samples (one or more numbers per line; '-' reads stdin)");
  struct Opts {
    OutputOptions out;
    std::string file;
    double level = 0.95;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("FILE", o->file, "Text file of samples, or - for stdin")->required();
  cmd->add_option("--level", o->level, "Confidence level of the median CI")->check(CLI::Range(0.5, 0.9999));
  add_output_options(*cmd, o->out);
  return {cmd, [o] {
            std::vector<double> samples;
            if (o->file == "-") {
              samples = read_samples(std::cin, "<stdin>");
            } else {
              std::ifstream in(o->file);
              D5_CHECK(in.good(), IoError, "cannot open '{}'", o->file);
              samples = read_samples(in, o->file);
            }
            D5_CHECK_ARG(!samples.empty(), "{} contains no samples", o->file);
            const Summary s = summarize(samples);
            const MedianCI ci = median_ci(samples, o->level);
            json j = to_json(s);
            j["median_ci_requested"] = {{"level", o->level}, {"available", ci.available}};
            if (ci.available) {
              j["median_ci_requested"]["lower"] = ci.lower;
              j["median_ci_requested"]["upper"] = ci.upper;
              j["median_ci_requested"]["achieved_level"] = ci.achieved_level;
            } else {
              j["median_ci_requested"]["reason"] = ci.reason;
            }
            std::string text = fmt::format(
                "n {}  min {:g}  max {:g}  mean {:g}  stddev {:g}  cv {:.3f}\n"
                "median {:g}  p90 {:g}  p95 {:g}  p99 {:g}  iqr {:g}  tukey outliers {}\n",
                s.n, s.min, s.max, s.mean, s.stddev, s.cv, s.median, s.p90, s.p95, s.p99, s.iqr,
                s.outliers);
            text += ci.available ? fmt::format("median {:g}% CI [{:g}, {:g}] (ranks {}..{}, achieved {:.4f})\n",
                                               o->level * 100, ci.lower, ci.upper, ci.lower_rank,
                                               ci.upper_rank, ci.achieved_level)
                                 : fmt::format("median {:g}% CI unavailable: {}\n", o->level * 100, ci.reason);
            emit_text(text, j, o->out);
            return kExitOk;
          }};
}

}  // namespace d5::cli
