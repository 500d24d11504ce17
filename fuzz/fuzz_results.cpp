// Result JSON files, the inputs of `d5 compare`, `d5 report` and `d5 rerun`: read_results (what
// compare and rerun call) and read_report_inputs (what report calls) on the input as a file; an
// accepted file is then compared with itself (statistics, verdicts, JSON and text output) and
// rendered as a report page (every section; the Vega bundles left empty).
#include <cstdint>

#include <nlohmann/json.hpp>

#include "deep500/metrics/compare.h"
#include "deep500/metrics/results.h"
#include "deep500/report/report.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = d5::fuzz::write_temp_file({data, size}, "result.json");
  d5::fuzz::accepts([&] {
    const d5::Results r = d5::read_results(path);
    const d5::Comparison c = d5::compare_results(r, r, d5::CompareOptions{});
    d5::fuzz::require(c.count(d5::Verdict::Slower) == 0 && c.count(d5::Verdict::Faster) == 0,
                      "a result compared with itself is slower or faster");
    (void)d5::to_json(c).dump();
    (void)d5::format_comparison(c);
    (void)d5::to_json(r).dump();
  });
  d5::fuzz::accepts([&] {
    const d5::ReportInputs inputs = d5::read_report_inputs({path});
    (void)d5::render_report(inputs, d5::VegaBundles{});
  });
  return 0;
}
