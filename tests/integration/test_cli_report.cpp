// `d5 report` on the result files of real d5 runs (and synthetic Level 3 and hostile ones), drawn
// in headless Chromium: the page's script writes how many plots it drew and every script error or
// Vega warning into the DOM, which the test reads back with --dump-dom.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "../support/report_fixtures.h"
#include "../support/temp_dir.h"
#include "process.h"
#include "tiny_list_recipe.h"

namespace d5::test {
namespace {

namespace fs = std::filesystem;

const std::string kMnist = D5_SOURCE_DIR "/../shared/data/mnist";

// Runs a command line through the shell; returns stdout, and the exit status in `status`.
std::string shell(const std::string& command, int& status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  status = pclose(p);
  return out;
}

std::string attribute(const std::string& dom, const std::string& name) {
  const std::regex re("<div id=\"d5-status\"[^>]*\\b" + name + "=\"([^\"]*)\"");
  std::smatch m;
  return std::regex_search(dom, m, re) ? m[1].str() : "(missing)";
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

void expect_ok(const ProcessResult& r, const std::string& what) {
  // A producer of a backend or library this build lacks may end "not built"; nothing else passes.
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == kExitNotBuilt) << what << " exited " << r.exit_code << ": " << r.err;
}

class ReportInBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(D5_CHROMIUM).empty())
      GTEST_SKIP() << "no chromium found at configure time (Debian: chromium; scripts/install-deps.sh installs it)";
  }

  // The page as Chromium leaves it once the virtual-time budget (or the page's work) is done.
  std::string dump_dom(const std::string& html) {
    int status = 0;
    const std::string profile = dir.file("chromium-profile");
    const std::string dom = shell(std::string(D5_CHROMIUM) +
                                      " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=" + profile +
                                      // No host name resolves: the page must draw from what it holds.
                                      " --host-resolver-rules='MAP * ~NOTFOUND'" +
                                      " --virtual-time-budget=60000 --dump-dom file://" + html + " 2>/dev/null",
                                  status);
    EXPECT_EQ(status, 0) << "chromium failed";
    return dom;
  }

  TempDir dir{"d5-report"};
};

// Result files of real runs (ops bench with its checks, net with the breakdown, divergence, data
// bench, and with MNIST a short training run) plus the synthetic scaling and hostile ones, in `results`.
// Returns whether the training run is among them; `untrained` says why not.
bool produce_results(const std::string& results, std::string& untrained) {
  fs::create_directories(results);
  expect_ok(run_d5({"ops", "bench", "--suite", "deepbench-gemm-inference-device", "--filter", "^#[24] ", "--mode",
                    "check", "--min-time", "0.01", "--max-time", "0.05", "--format", "json", "-o",
                    results + "/ops.json"}),
            "d5 ops bench");
  expect_ok(run_d5({"net", "lenet5", "--breakdown", "--min-runs", "6", "--max-time", "0.2", "--format", "json", "-o",
                    results + "/net.json"}),
            "d5 net");
  expect_ok(run_d5({"divergence", "--model", "mlp", "--optimizer", "adam", "--twin", "adam", "--steps", "3",
                    "--per-param", "--format", "json", "-o", results + "/divergence.json"}),
            "d5 divergence");
  expect_ok(run_d5({"data", "bench", "--dataset", "synthetic", "--set", "shape=3x8x8", "--set", "samples=256",
                    "--batch", "16", "--batches", "6", "--ranks", "2", "--format", "json", "-o", results + "/data.json"}),
            "d5 data bench");
  bool trained = false;
  untrained = "no MNIST at " + kMnist;
  if (fs::exists(kMnist)) {
    const auto t = run_d5({"train", "--model", "lenet5", "--dataset", "mnist", "--data-dir", kMnist, "--train-split",
                           "test", "--train-range", "0:128", "--test-split", "test", "--test-range", "128:192",
                           "--batch", "32", "--epochs", "2", "--train-accuracy-every", "2", "--backend", "onednn",
                           "--format", "json", "-o", results + "/train.json"});
    expect_ok(t, "d5 train");
    trained = t.exit_code == 0;
    if (!trained) untrained = "this build has no oneDNN backend: " + t.err;
  }
  write_results(results + "/scaling.json", scaling_results());
  write_results(results + "/hostile.json", hostile_results());
  return trained;
}

// produce_results into DIR/results, then `d5 report` of them to DIR/report.html.
struct RenderedReport {
  std::string results, html;
  ProcessResult report;
  bool trained = false;
  std::string untrained;
};
RenderedReport render_real_results(const TempDir& dir) {
  RenderedReport r;
  r.results = dir.file("results");
  r.html = dir.file("report.html");
  r.trained = produce_results(r.results, r.untrained);
  r.report = run_d5({"report", r.results, "-o", r.html});
  return r;
}

TEST_F(ReportInBrowser, EveryPlotOfRealResultsIsDrawnWithoutScriptErrors) {
  const RenderedReport rendered = render_real_results(dir);
  const auto& r = rendered.report;
  const bool trained = rendered.trained;
  const std::string& untrained = rendered.untrained;
  const std::string& html = rendered.html;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex wrote("([0-9]+) plot\\(s\\) in ([0-9]+) section");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, wrote)) << r.out;
  const int plots = std::stoi(m[1]);
  // Violins of ops, net and hostile cases, throughput, breakdown, divergence (2), heatmaps (ops,
  // net), scaling (3), and with MNIST convergence (2) and a training-step violin.
  EXPECT_GE(plots, trained ? 17 : 14) << r.out;

  const std::string dom = dump_dom(html);
  EXPECT_EQ(attribute(dom, "data-done"), "true");
  EXPECT_EQ(attribute(dom, "data-plots-expected"), std::to_string(plots));
  EXPECT_EQ(attribute(dom, "data-plots-drawn"), std::to_string(plots));
  EXPECT_EQ(attribute(dom, "data-errors"), "0");
  // Each plot holds an SVG with data marks (what data-drawn records).
  EXPECT_EQ(count(dom, "data-drawn=\"true\""), plots);
  // Vega's warnings are listed on the page; they are printed here, not failed on: one run in CI
  // (ctest -j2 on 2 cores) showed one whose text was not captured, and no rerun has shown it since,
  // so it depends on the timings of that run. Every plot drawn and no script error is the contract.
  for (size_t at = dom.find("<li class=\"d5-warning"); at != std::string::npos;
       at = dom.find("<li class=\"d5-warning", at + 1))
    std::cerr << "report warning: " << dom.substr(at, dom.find("</li>", at) - at) << "\n";
  EXPECT_EQ(count(dom, "<li class=\"d5-error"), 0) << dom.substr(dom.find("d5-errors"), 2000);
  for (const char* section : {"Operator times", "Network times", "Throughput against problem size",
                              "Time per operator type", "Optimizer divergence", "Forward differences", "Scaling",
                              "All cases", "Manifest"})
    EXPECT_NE(dom.find(std::string("<h2>") + section + "</h2>"), std::string::npos) << section;
  if (trained) {
    EXPECT_NE(dom.find("<h2>Convergence</h2>"), std::string::npos);
  }
  // The hostile case name ran no script and shows as text.
  EXPECT_EQ(dom.find("<title>pwned</title>"), std::string::npos);
  EXPECT_NE(dom.find("&lt;/script&gt;&lt;script&gt;document.title="), std::string::npos);
  // Everything else was checked; a failure above still fails the test, but a pass without the
  // training section shows as skipped, not as a full pass.
  if (!trained) GTEST_SKIP() << "the Convergence section was not checked: " << untrained;
}

#ifdef D5_TEST_HAVE_SQLITE
// d5 report --db: three runs of LeNet-5 imported into a result history, drawn as trends in
// Chromium (every plot, no script error), every plotted point the median and CI of its result file.
TEST_F(ReportInBrowser, AResultHistoryIsDrawnOverTimeWithTheFilesValues) {
  const std::string results = dir.file("runs"), db = dir.file("history.db"), html = dir.file("history.html");
  fs::create_directories(results);
  for (int i = 0; i < 3; ++i) {
    const std::string out = results + "/run" + std::to_string(i) + ".json";
    ASSERT_EQ(run_d5({"net", "lenet5", "--backend", "reference", "--min-runs", "6", "--max-time", "0.1", "--format",
                      "json", "-o", out})
                  .exit_code,
              0);
    ASSERT_EQ(run_d5({"db", "import", out, "--db", db}).exit_code, 0);
  }
  const auto r = run_d5({"report", "--db", db, "-o", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("0 input file(s), "), std::string::npos) << r.out;
  const std::string dom = dump_dom(html);
  EXPECT_EQ(attribute(dom, "data-done"), "true");
  const std::string expected = attribute(dom, "data-plots-expected");
  EXPECT_NE(expected, "0");
  EXPECT_EQ(attribute(dom, "data-plots-drawn"), expected);
  EXPECT_EQ(attribute(dom, "data-errors"), "0");
  EXPECT_NE(dom.find("<h2>History</h2>"), std::string::npos);
  EXPECT_EQ(dom.find("<h2>Inputs</h2>"), std::string::npos);  // no result files were given
  int status = 0;
  const std::string out = shell(std::string(D5_PYTHON) + " " + D5_SOURCE_DIR +
                                    "/tests/integration/check_report_values.py " + html + " " + results + " 2>&1",
                                status);
  EXPECT_EQ(status, 0) << out;
  // latency, throughput, memory: several metrics of one series, three runs each.
  EXPECT_TRUE(std::regex_search(out, std::regex("(^|\\n)history: ([1-9][0-9]+|[3-9]) checked"))) << out;
}

// d5 report --list: two submissions of one recipe, ranked by the final loss their result files
// hold, drawn in Chromium (the bar plot, no script error) with the table in rank order.
TEST_F(ReportInBrowser, ARankedListIsDrawnWithItsSubmissionsInRankOrder) {
  if (!fs::exists(kMnist)) GTEST_SKIP() << "no MNIST at " << kMnist;
  const std::string recipe = dir.file("tiny-list.yaml"), db = dir.file("list.db"), html = dir.file("list.html");
  write_tiny_list_recipe(recipe, kMnist);
  std::map<std::string, double> loss;
  for (const auto& [who, lr] : std::vector<std::pair<std::string, std::string>>{{"alice", "0.001"}, {"bob", "0.05"}}) {
    const std::string bundle = dir.file("bundle-" + who);
    ASSERT_EQ(run_d5({"run", recipe, "--results-dir", bundle, "--set", "lr=" + lr}).exit_code, 0);
    const auto r = run_d5({"db", "submit", bundle, "--recipe", recipe, "--db", db, "--submitter", who});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::ifstream in(bundle + "/lenet5.json");
    loss[who] = nlohmann::json::parse(in)["cases"][0]["extra"]["final_loss"].get<double>();
  }
  const auto r = run_d5({"report", "--list", "--db", db, "-o", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 ranked list(s)"), std::string::npos) << r.out;
  const std::string dom = dump_dom(html);
  EXPECT_EQ(attribute(dom, "data-done"), "true");
  EXPECT_EQ(attribute(dom, "data-plots-expected"), "1");
  EXPECT_EQ(attribute(dom, "data-plots-drawn"), "1");
  EXPECT_EQ(attribute(dom, "data-errors"), "0");
  EXPECT_NE(dom.find("<h2>tiny-list (closed division)</h2>"), std::string::npos);
  // The table's rows in rank order: the lower final loss first, with rank 1.
  const std::string winner = loss["alice"] < loss["bob"] ? "alice" : "bob";
  const std::string loser = winner == "alice" ? "bob" : "alice";
  const size_t first = dom.find("<td>" + winner + "</td>"), second = dom.find("<td>" + loser + "</td>");
  ASSERT_NE(first, std::string::npos) << dom;
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, second);
  EXPECT_NE(dom.find("<tr><td>1</td>"), std::string::npos);
  // A --list without a database is a usage error.
  EXPECT_EQ(run_d5({"report", "--list", "-o", html}).exit_code, kExitUsage);
}
#endif

// Every value the page plots is the value of the result files: tests/integration/check_report_values.py
// reads the page's plot specs back and looks each row up in the inputs, independently of the report
// code. Every kind of plot these inputs give must have been checked, and none may disagree.
TEST(CliReport, EveryPlottedValueIsTheResultFilesValue) {
  TempDir dir("d5-report-values");
  const RenderedReport rendered = render_real_results(dir);
  if (rendered.report.err.find("needs the Vega bundles") != std::string::npos)
    GTEST_SKIP() << "no Vega bundles (scripts/install-vega.sh, part of make deps): " << rendered.report.err;
  ASSERT_EQ(rendered.report.exit_code, 0) << rendered.report.err;
  int status = 0;
  const std::string out = shell(std::string(D5_PYTHON) + " " + D5_SOURCE_DIR +
                                    "/tests/integration/check_report_values.py " + rendered.html + " " +
                                    rendered.results + " 2>&1",
                                status);
  EXPECT_EQ(status, 0) << out;
  std::vector<std::string> kinds = {"overview", "violins", "throughput", "breakdown", "divergence", "heatmaps",
                                    "scaling", "data"};
  if (rendered.trained) kinds.insert(kinds.end(), {"accuracy", "loss"});
  for (const auto& kind : kinds)
    EXPECT_TRUE(std::regex_search(out, std::regex("(^|\\n)" + kind + ": [1-9][0-9]* checked"))) << kind << "\n" << out;
  std::cout << out;
  if (!rendered.trained) GTEST_SKIP() << "the Convergence section's values were not checked: " << rendered.untrained;
}

TEST(CliReport, WithoutBundlesNoPageAndTheInstallStepIsNamed) {
  TempDir dir("d5-report");
  write_results(dir.file("scaling.json"), scaling_results());
  const auto r = run_d5({"report", dir.file("scaling.json"), "-o", dir.file("page.html"), "--vega-dir",
                         dir.file("no-node-modules")});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("scripts/install-vega.sh"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("page.html")));
}

TEST(CliReport, InputsThatAreNotResultsAreRefused) {
  TempDir dir("d5-report");
  std::ofstream(dir.file("other.json")) << R"({"models": []})";
  const auto r = run_d5({"report", dir.file("other.json"), "-o", dir.file("page.html")});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.err.find("other.json"), std::string::npos) << r.err;
  EXPECT_EQ(run_d5({"report", dir.file("missing.json"), "-o", dir.file("page.html")}).exit_code, 4);
  EXPECT_EQ(run_d5({"report", dir.file("other.json")}).exit_code, 2);  // -o is required
  EXPECT_FALSE(fs::exists(dir.file("page.html")));
}

}  // namespace
}  // namespace d5::test
