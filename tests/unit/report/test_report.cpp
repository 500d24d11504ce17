// The report library: inputs, bundles, escaping, and which sections and plots a page gets. The
// page drawn in a browser is tested in tests/integration/test_cli_report.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../../support/report_fixtures.h"
#include "../../support/temp_dir.h"
#include "deep500/core/error.h"
#include "deep500/report/report.h"

namespace d5 {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Stand-ins for the Vega bundles: the page's assembly does not run them.
VegaBundles fake_bundles() { return {"var vega = {};", "var vegaLite = {};", "var vegaEmbed = null;", "test"}; }

ReportInputs inputs_of(const std::vector<Results>& results) {
  ReportInputs in;
  for (size_t i = 0; i < results.size(); ++i)
    in.inputs.push_back({"input" + std::to_string(i) + ".json", ReportInputKind::Results, results[i], {}});
  return in;
}

// The plot specs the page embeds, read back from the page.
json specs_of(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"d5-specs\">";
  const size_t b = html.find(open) + open.size();
  return json::parse(html.substr(b, html.find("</script>", b) - b));
}

TEST(ReportEscape, HtmlEscapesMarkupAndQuotes) {
  EXPECT_EQ(html_escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain µs"), "plain µs");
}

TEST(ReportEscape, ScriptJsonHasNoMarkupAndReadsBackUnchanged) {
  const json j = {{"name", test::kHostileName}, {"n", 1.5}};
  const std::string s = json_for_script(j);
  EXPECT_EQ(s.find('<'), std::string::npos);
  EXPECT_EQ(s.find('>'), std::string::npos);
  EXPECT_EQ(s.find('&'), std::string::npos);
  EXPECT_EQ(s.find("\xe2\x80\xa8"), std::string::npos);  // U+2028 as \u2028
  EXPECT_EQ(json::parse(s), j);
}

TEST(ReportEscape, BrokenUtf8IsReplacedNotFatal) {
  const std::string s = json_for_script(json{{"name", std::string("bad \xff name")}});
  EXPECT_NE(s.find("bad"), std::string::npos);
  EXPECT_TRUE(json::accept(s));
}

TEST(ReportInputs, RecognisesResultsAndDivergenceReports) {
  const ReportInput r = report_input_from_json("a.json", to_json(test::scaling_results()));
  EXPECT_EQ(r.kind, ReportInputKind::Results);
  EXPECT_EQ(r.results.cases.size(), 8u);
  const json div = {{"optimizer", "adam"}, {"twin", "torch-adam"}, {"steps", json::array()}, {"manifest", {{"version", "x"}}}};
  const ReportInput d = report_input_from_json("d.json", div);
  EXPECT_EQ(d.kind, ReportInputKind::Divergence);
  EXPECT_EQ(d.results.manifest["version"], "x");
}

TEST(ReportInputs, RefusesOtherJsonNamingTheFile) {
  try {
    report_input_from_json("models.json", json{{"models", json::array()}});
    FAIL() << "no FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("models.json"), std::string::npos) << e.what();
  }
  json wrong = to_json(test::scaling_results());
  wrong["schema_version"] = 99;
  EXPECT_THROW(report_input_from_json("w.json", wrong), FormatError);
}

TEST(ReportInputs, DirectoriesAreSearchedAndOtherJsonSkipped) {
  test::TempDir dir("d5-report");
  fs::create_directories(dir.path / "sub");
  write_results(dir.file("sub/scaling.json"), test::scaling_results());
  write_results(dir.file("hostile.json"), test::hostile_results());
  std::ofstream(dir.file("config.json")) << R"({"not": "a result"})";
  std::ofstream(dir.file("notes.txt")) << "ignored: not .json";
  const ReportInputs in = read_report_inputs({dir.path.string()});
  ASSERT_EQ(in.inputs.size(), 2u);
  EXPECT_EQ(fs::path(in.inputs[0].path).filename(), "hostile.json");  // path order
  EXPECT_EQ(fs::path(in.inputs[1].path).filename(), "scaling.json");
  ASSERT_EQ(in.skipped.size(), 1u);
  EXPECT_EQ(fs::path(in.skipped[0].path).filename(), "config.json");
  EXPECT_NE(in.skipped[0].reason.find("not a deep500 result"), std::string::npos) << in.skipped[0].reason;
}

TEST(ReportInputs, MissingOrEmptyInputsAreErrors) {
  EXPECT_THROW(read_report_inputs({}), InvalidArgument);
  EXPECT_THROW(read_report_inputs({"/no/such/results.json"}), IoError);
  test::TempDir dir("d5-report");
  EXPECT_THROW(read_report_inputs({dir.path.string()}), InvalidArgument);
  std::ofstream(dir.file("broken.json")) << "{";
  EXPECT_THROW(read_report_inputs({dir.file("broken.json")}), FormatError);
}

// Found by fuzz_results (fuzz/regressions/results/report-*): a valid results file whose training
// curve holds a string where a number belongs escaped the report as a JSON type error and ended
// the process. A malformed section's data is a FormatError naming the section now.
TEST(ReportPage, DataOfTheWrongTypeIsAFormatErrorNamingTheSection) {
  const fs::path dir = fs::path(D5_SOURCE_DIR) / "fuzz" / "regressions" / "results";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.path().filename().string().starts_with("report-")) continue;
    const ReportInputs in = read_report_inputs({e.path().string()});
    try {
      render_report(in, fake_bundles());
      ADD_FAILURE() << e.path() << " was drawn";
    } catch (const FormatError& err) {
      EXPECT_NE(std::string(err.what()).find("section is malformed"), std::string::npos) << err.what();
    }
    ++files;
  }
  EXPECT_GE(files, 1);
  // The same file with a number there is drawn.
  std::ifstream f(dir / "report-curve-value-is-a-string.json");
  json j = json::parse(f);
  j["cases"][0]["extra"]["curves"]["training_accuracy"][0]["value"] = 0.1;
  test::TempDir tmp("d5-report");
  std::ofstream(tmp.file("fixed.json")) << j.dump();
  EXPECT_NO_THROW(render_report(read_report_inputs({tmp.file("fixed.json")}), fake_bundles()));
}

TEST(ReportBundles, MissingBundlesNameTheInstallStep) {
  test::TempDir dir("d5-vega");
  for (const std::string& where : {dir.file("absent"), dir.path.string()}) {
    try {
      load_vega_bundles(where);
      FAIL() << "no error for " << where;
    } catch (const Unimplemented& e) {
      EXPECT_NE(std::string(e.what()).find("scripts/install-vega.sh"), std::string::npos) << e.what();
    }
  }
}

void write_bundle(const test::TempDir& dir, const std::string& package, const std::string& file,
                  const std::string& code, const std::string& version) {
  fs::create_directories(dir.path / package / "build");
  std::ofstream(dir.path / package / "build" / file) << code;
  std::ofstream(dir.path / package / "package.json") << R"({"name": ")" << package << R"(", "version": ")" << version << "\"}";
}

TEST(ReportBundles, ReadsVersionsAndRefusesABundleThatWouldCloseItsScript) {
  test::TempDir dir("d5-vega");
  write_bundle(dir, "vega", "vega.min.js", "var vega={};", "6.2.0");
  write_bundle(dir, "vega-lite", "vega-lite.min.js", "var vegaLite={};", "6.4.1");
  write_bundle(dir, "vega-embed", "vega-embed.min.js", "var vegaEmbed=0;", "7.1.0");
  const VegaBundles b = load_vega_bundles(dir.path.string());
  EXPECT_EQ(b.versions, "vega 6.2.0, vega-lite 6.4.1, vega-embed 7.1.0");
  EXPECT_EQ(b.vega, "var vega={};");
  write_bundle(dir, "vega-lite", "vega-lite.min.js", "var s='</SCRIPT>';", "6.4.1");
  EXPECT_THROW(load_vega_bundles(dir.path.string()), FormatError);
}

TEST(ReportPage, NamesFromResultsStayText) {
  const Report r = render_report(inputs_of({test::hostile_results()}), fake_bundles());
  // Three bundles, the specs and the page script: nothing in the data opens or closes a script.
  EXPECT_EQ(count(r.html, "<script"), 5);
  EXPECT_EQ(count(r.html, "</script>"), 5);
  EXPECT_EQ(r.html.find("<script>document.title"), std::string::npos);
  EXPECT_NE(r.html.find("&lt;/script&gt;&lt;script&gt;document.title=&#39;pwned&#39;"), std::string::npos);
  EXPECT_NE(r.html.find("&lt;b&gt;backend&lt;/b&gt;"), std::string::npos);
  // The specs carry the name unchanged once parsed.
  const json specs = specs_of(r.html);
  int found = 0;
  for (const auto& v : specs[0]["data"]["values"]) found += v.value("case", "") == test::kHostileName;
  EXPECT_EQ(found, 2);  // each backend's stats row
}

// Samples (ns-quantized, as timers give them) whose largest lies on the upper Tukey fence in seconds,
// q3 + 1.5 IQR, but beyond it once everything is in microseconds: the stats row's outlier count
// (the summary's) and the outlier points drawn must still agree, and the whisker be that sample.
TEST(ReportPage, ViolinOutliersAreTheSummarysEvenForASampleOnTheFence) {
  Results r;
  r.manifest = {{"version", "test"}};
  CaseResult c = test::timed_case("gemm", "L0", "reference", 1.0);
  MetricRecord& m = c.metrics[0];
  m.samples.clear();
  for (int ns : {22970, 22973, 22975, 22977, 22983}) m.samples.push_back(ns * 1e-9);
  m.summary = summarize(m.samples);
  ASSERT_EQ(m.summary->outliers, 0);  // 22983 ns is on the fence, not beyond it
  r.cases.push_back(c);
  c.backend = "torch";
  r.cases.push_back(std::move(c));
  const json specs = specs_of(render_report(inputs_of({r}), fake_bundles()).html);
  int stats = 0, outliers = 0;
  for (const auto& v : specs[0]["data"]["values"]) {
    if (v["kind"] == "outlier") ++outliers;
    if (v["kind"] != "stats") continue;
    ++stats;
    EXPECT_EQ(v["Tukey outliers"].get<int64_t>(), 0);
    EXPECT_EQ(v["whisker_hi"].get<double>(), 22983 * 1e-9 * 1e6);  // microseconds, the sample itself
  }
  EXPECT_EQ(stats, 2);
  EXPECT_EQ(outliers, 0);
}

TEST(ReportPage, SelfContained) {
  const Report r = render_report(inputs_of({test::scaling_results()}), fake_bundles());
  // Every script and style is inline: nothing to fetch.
  EXPECT_EQ(r.html.find("<script src"), std::string::npos);
  EXPECT_EQ(r.html.find("<link"), std::string::npos);
  EXPECT_EQ(count(r.html, "<style>"), 1);
  EXPECT_NE(r.html.find("var vegaLite = {};"), std::string::npos);
}

TEST(ReportPage, SectionsOnlyForDataPresent) {
  const Report r = render_report(inputs_of({test::hostile_results()}), fake_bundles());
  EXPECT_EQ(r.sections, (std::vector<std::string>{"Inputs", "Operator times", "All cases", "Manifest"}));
  // One problem on two backends: its violin; no overview for a single problem.
  EXPECT_EQ(r.plots, 1);
  EXPECT_EQ(count(r.html, "class=\"d5-plot\""), r.plots);
  EXPECT_NE(r.html.find("data-plots-expected=\"1\""), std::string::npos);
}

TEST(ReportPage, ScalingTimesEfficiencyAndVolume) {
  const Report r = render_report(inputs_of({test::scaling_results()}), fake_bundles());
  ASSERT_NE(std::find(r.sections.begin(), r.sections.end(), "Scaling"), r.sections.end());
  const json specs = specs_of(r.html);
  // The scaling section's three plots are the last ones: time, efficiency, volume.
  ASSERT_GE(specs.size(), 3u);
  const json& eff = specs[specs.size() - 2]["data"]["values"];
  const json& vol = specs[specs.size() - 1]["data"]["values"];
  int checked = 0;
  for (const auto& p : eff) {
    const double ranks = p["ranks"];
    // Strong: T(1) / (p T(p)) = p^0.8 / p; weak: T(1) / T(p).
    const double expected = p["series"] == "mlp/allreduce" ? std::pow(ranks, -0.2) : 1.0 / (1.0 + 0.05 * std::log2(ranks));
    EXPECT_NEAR(p["value"].get<double>(), expected, 1e-12) << p.dump();
    EXPECT_LE(p["lo"].get<double>(), p["value"].get<double>());
    EXPECT_GE(p["hi"].get<double>(), p["value"].get<double>());
    ++checked;
  }
  EXPECT_EQ(checked, 8);
  ASSERT_EQ(vol.size(), 4u);  // only the strong series records bytes
  for (const auto& p : vol)
    EXPECT_NEAR(p["value"].get<double>(), 4.0 * (p["ranks"].get<double>() - 1) / p["ranks"].get<double>(), 1e-12);
}

TEST(ReportPage, DivergenceReportGetsItsPlots) {
  ReportInputs in;
  json div = {{"optimizer", "adam"}, {"twin", "torch-adam"}, {"backend", "reference"}, {"model", "mlp"}, {"batch", 8}};
  div["steps"] = json::array();
  for (int s = 1; s <= 3; ++s)
    div["steps"].push_back({{"step", s}, {"l2", s == 1 ? 0.0 : 1e-7 * s}, {"linf", 1e-8 * s}, {"loss_a", 2.3},
                            {"loss_b", 2.3}, {"params", {{"fc1.weight", {{"l2", 1e-7}, {"linf", 1e-8}}}}}});
  in.inputs.push_back(report_input_from_json("div.json", div));
  const Report r = render_report(in, fake_bundles());
  EXPECT_EQ(r.sections, (std::vector<std::string>{"Inputs", "Optimizer divergence", "Manifest"}));
  EXPECT_EQ(r.plots, 2);
  const json specs = specs_of(r.html);
  // The one exact zero cannot be drawn on a log axis: 3 steps x 2 norms x 2 series - 1.
  EXPECT_EQ(specs[0]["data"]["values"].size(), 11u);
}

}  // namespace
}  // namespace d5
