// d5 report: result files of any d5 command as one self-contained HTML page with interactive
// Vega-Lite plots (docs/report.md).
#include <iostream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/history/ranked_list.h"
#include "deep500/history/result_db.h"
#include "deep500/metrics/atomic_file.h"
#include "deep500/report/report.h"

namespace d5::cli {

namespace {

std::vector<ListTable> list_tables(const std::vector<RankedList>& lists) {
  std::vector<ListTable> out;
  for (const auto& l : lists) {
    ListTable t{l.recipe, l.recipe_hash, l.division, l.quantity, l.unit, l.lower_is_better, {}};
    auto add = [&](const DbSubmission& d, int rank) {
      const Submission& s = d.submission;
      t.rows.push_back({rank, s.score, s.submitter, s.system, d.machine, d.cpu, s.backends,
                        d.commit + (d.dirty ? " (modified)" : ""), d.start_utc, d.submitted_utc, s.validity,
                        rank > 0 ? s.score_detail : unranked_reason(d), s.id, s.outputs_verified});
    };
    int rank = 0;
    for (const auto& d : l.ranked) add(d, ++rank);
    for (const auto& d : l.unranked) add(d, 0);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Command register_report(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("report", "One self-contained HTML page with interactive plots of result files");
  struct Opts {
    std::vector<std::string> inputs;
    std::string output, title = "deep500 report", vega_dir, db;
    DbFilter filter;
    bool list = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("RESULTS", o->inputs, "Result files (--format json -o FILE of any d5 command) or directories of them");
  cmd->add_option("--db", o->db, "A result history (d5 db): draw its measurements over time (docs/db.md)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--list", o->list,
                "With --db: the ranked lists of its submissions (d5 db submit), one per recipe and division, as the "
                "whole page");
  cmd->add_option("--case", o->filter.case_glob, "With --db: only cases matching this pattern ('lenet5/*')");
  cmd->add_option("--metric", o->filter.metric, "With --db: only this metric");
  cmd->add_option("--machine", o->filter.machine, "With --db: only runs on this host");
  cmd->add_option("--since", o->filter.since, "With --db: only runs started at or after this UTC date or time");
  cmd->add_option("-o,--output", o->output, "The HTML file to write")->required();
  cmd->add_option("--title", o->title, "The page's title");
  cmd->add_option("--vega-dir", o->vega_dir,
                  "node_modules directory with vega, vega-lite and vega-embed (default: $D5_VEGA_DIR, else the one "
                  "scripts/install-vega.sh installs)");
  return {cmd, [o] {
            if (o->inputs.empty() && o->db.empty())
              throw InvalidArgument("nothing to report: give result files or directories, or --db FILE");
            if (o->list && (o->db.empty() || !o->inputs.empty()))
              throw InvalidArgument("--list draws a result history's submissions: give --db FILE and no result files");
            ReportInputs inputs = o->inputs.empty() ? ReportInputs{} : read_report_inputs(o->inputs);
            if (o->list) {
              const ResultDb db = ResultDb::open(o->db);
              inputs.lists = list_tables(ranked_lists(db.submissions()));
              inputs.lists_source = o->db;
              if (inputs.lists.empty())
                throw InvalidArgument(fmt::format("{} holds no submissions (d5 db submit adds them)", o->db));
            } else if (!o->db.empty()) {
              for (const auto& m : ResultDb::open(o->db).measurements(o->filter)) {
                if (!m.median) continue;
                inputs.trends.push_back({fmt::format("{} @ {} on {}", m.case_name, m.backend, m.machine), m.metric,
                                         m.unit, m.start_utc, m.commit, *m.median, m.ci_lower, m.ci_upper, m.n});
              }
              inputs.trends_source = o->db;
            }
            // Without the bundles no page is written at all: one that cannot draw would mislead.
            const VegaBundles bundles = load_vega_bundles(o->vega_dir.empty() ? default_vega_dir() : o->vega_dir);
            ReportOptions ro;
            ro.title = o->title;
            const Report r = render_report(inputs, bundles, ro);
            atomic_write(o->output, r.html);
            for (const auto& s : inputs.skipped) std::cerr << fmt::format("d5: skipped '{}': {}\n", s.path, s.reason);
            std::cout << fmt::format("wrote {} ({:.1f} MB): {} input file(s){}, {} plot(s) in {} section(s)\n",
                                     o->output, static_cast<double>(r.html.size()) / 1e6, inputs.inputs.size(),
                                     o->list       ? fmt::format(", {} ranked list(s)", inputs.lists.size())
                                     : o->db.empty() ? ""
                                                     : fmt::format(", {} history measurement(s)", inputs.trends.size()),
                                     r.plots, r.sections.size());
            return kExitOk;
          }};
}

}  // namespace d5::cli
