#pragma once
// The report's sections, one per kind of data; each adds itself to the page only when its data is
// present in the inputs. Internal to d5_report.
#include <string>
#include <vector>

#include "deep500/report/report.h"
#include "page.h"

namespace d5::report {

// One case of one input file.
struct CaseRef {
  const ReportInput* input;
  const CaseResult* c;
};
std::vector<CaseRef> all_cases(const ReportInputs& in);
const MetricRecord* find_metric(const CaseResult& c, const std::string& name);
// The case's primary metric (its first) when it is a time in seconds with samples.
const MetricRecord* primary_time(const CaseResult& c);
// The backend, and the file's name too where another input has a case of the same name and
// backend: what a plot's colour tells apart.
std::string series_of(const CaseRef& r, const ReportInputs& in);
// " · FILE" where series_of names the file, else "".
std::string file_suffix(const CaseRef& r, const ReportInputs& in);
// A colour encoding of field "series" with every series of the inputs in its domain, so that a
// backend keeps its colour from plot to plot.
nlohmann::json series_color(const ReportInputs& in);
// What a case measured apart from the backend: its name, for a network's cases (named
// NETWORK/BACKEND) the network and batch, for Level 3 runs the name without "ranks=N".
std::string problem_of(const CaseResult& c);
// The ranks of a Level 3 run (params.ranks, else extra.ranks); 0 when none.
int64_t ranks_of(const CaseResult& c);
// "mlp/allreduce/ranks=4" -> "mlp/allreduce".
std::string without_ranks(const std::string& name);
// A case of `d5 data bench` (its first metric DatasetLatency, params source, order, cache): drawn
// by add_dataset_latency, not among the training step times.
bool is_data_bench(const CaseResult& c);
// A Vega-Lite spec's common top: width, height, and the data.
nlohmann::json base_spec(nlohmann::json values, int width = 640, int height = 320);

void add_overview(const ReportInputs& in, Page& page);
void add_time_distributions(const ReportInputs& in, Page& page);  // violin/box per level
void add_throughput(const ReportInputs& in, Page& page);          // GFLOP/s against problem size
void add_native_overhead(const ReportInputs& in, Page& page);    // d5 ops overhead: d5 / native
void add_breakdown(const ReportInputs& in, Page& page);           // per-op-type bars
void add_convergence(const ReportInputs& in, Page& page);         // accuracy, loss
void add_divergence(const ReportInputs& in, Page& page);          // optimizer trajectories
void add_reinforcement_learning(const ReportInputs& in, Page& page);  // d5 rl: curves, steps to target
void add_dataset_latency(const ReportInputs& in, Page& page);    // d5 data bench: Fig. 8, Table III
void add_heatmaps(const ReportInputs& in, Page& page);            // forward differences
void add_scaling(const ReportInputs& in, Page& page);             // Level 3: ranks, volume
void add_trends(const ReportInputs& in, Page& page);               // a result history over time
void add_ranked_lists(const ReportInputs& in, Page& page);        // submissions ranked per recipe
void add_case_tables(const ReportInputs& in, Page& page);         // every case and metric with CIs
void add_manifests(const ReportInputs& in, Page& page);

}  // namespace d5::report
