// d5 info: the manifest (host, build, libraries, backends) that every result file carries.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/reporter.h"

namespace d5::cli {

namespace {
using nlohmann::json;

std::string caches_line(const json& caches) {
  std::vector<std::string> parts;
  for (const auto& c : caches) {
    const std::string t = c.value("type", "");
    const std::string suffix = t == "Data" ? "d" : t == "Instruction" ? "i" : "";
    parts.push_back(fmt::format("L{}{} {}", c.value("level", 0), suffix,
                                format_bytes(c.value("size_bytes", 0.0))));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Older result files carry neither source nor reason.
std::string caches_with_source(const json& cpu) {
  if (cpu["caches"].empty()) return "unknown (" + cpu.value("caches_unavailable_reason", std::string("no reason recorded")) + ")";
  const std::string source = cpu.value("cache_source", std::string());
  return caches_line(cpu["caches"]) + (source.empty() ? "" : " [" + source + "]");
}

std::string render_console(const json& m) {
  std::string s;
  auto line = [&](std::string_view key, const std::string& value) {
    s += fmt::format("{:<11}{}\n", key, value);
  };
  line("deep500", fmt::format("{} (git {}{}), {} build, {}", m["version"].get<std::string>(),
                              m["git_revision"].get<std::string>().substr(0, 12),
                              m["git_dirty"].get<bool>() ? ", dirty" : "",
                              m["build_type"].get<std::string>(),
                              m["compiler"]["id"].get<std::string>()));
  const json& cpu = m["cpu"];
  line("cpu", fmt::format("{} ({}), {} logical / {} physical cores, {} socket(s), {} NUMA node(s){}",
                          cpu["model"].get<std::string>(), cpu["architecture"].get<std::string>(),
                          cpu["logical_cores"].get<int>(), cpu["physical_cores"].get<int>(),
                          cpu["sockets"].get<int>(), cpu.value("numa_nodes", 0),
                          cpu["max_mhz"].get<double>() > 0
                              ? fmt::format(", max {:.0f} MHz", cpu["max_mhz"].get<double>())
                              : ""));
  line("isa", fmt::format("{}", fmt::join(cpu["isa"].get<std::vector<std::string>>(), " ")));
  line("caches", caches_with_source(cpu));
  line("memory", format_bytes(m["memory_bytes"].get<double>()));
  if (m["gpus"].empty()) {
    line("gpus", "none (" + m.value("gpu_unavailable_reason", std::string("unknown")) + ")");
  } else {
    for (const auto& g : m["gpus"])
      line("gpu", fmt::format("{}: {}, {}, {} SMs, cc {}, driver {}, ECC {}", g["index"].get<int>(),
                              g["name"].get<std::string>(), format_bytes(g["memory_bytes"].get<double>()),
                              g["multiprocessors"].get<int>(), g["compute_capability"].get<std::string>(),
                              g.value("driver_version", std::string("?")), g.value("ecc", std::string("unknown"))));
  }
  if (m.contains("gpu_binding")) line("gpu bound", m["gpu_binding"].get<std::string>());
  line("os", fmt::format("{}, kernel {} ({})", m["os"]["name"].get<std::string>(),
                         m["os"]["kernel"].get<std::string>(), m["os"]["machine"].get<std::string>()));
  line("host", m["hostname"].get<std::string>());
  std::string threads = fmt::format("openmp {}", m["threads"]["omp_max_threads"].get<int>());
  for (const auto& [name, n] : m["threads"]["backends"].items()) threads += fmt::format(", {} {}", name, n.get<int>());
  threads += fmt::format("; on cpus {} ({} of {} logical)", m["threads"]["allowed_cpus"].get<std::string>(),
                         m["threads"]["allowed_cpu_count"].get<int>(), m["cpu"]["logical_cores"].get<int>());
  line("threads", threads);
  const json& wall = m["clocks"]["wall"];
  line("clock", fmt::format("wall: resolution {:g} ns (observed {:g} ns), {:.1f} ns per read",
                            wall["reported_resolution_ns"].get<double>(),
                            wall["observed_resolution_ns"].get<double>(),
                            wall["call_overhead_ns"].get<double>()));
  s += "backends\n";
  for (const auto& b : m["backends"]) {
    s += fmt::format("  {:<10} {:<9} {}\n", b["name"].get<std::string>(), b["version"].get<std::string>(),
                     b["available"].get<bool>()
                         ? b["description"].get<std::string>()
                         : "unavailable: " + b["unavailable_reason"].get<std::string>());
  }
  if (m.contains("backends_not_built") && !m["backends_not_built"].empty()) {
    std::string names;
    for (const auto& n : m["backends_not_built"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
    s += fmt::format("  not built: {} (docs/building.md)\n", names);
  }
  s += "libraries\n";
  for (const auto& [name, v] : m["libraries"].items()) {
    std::string text = v.contains("compiled") ? "compiled " + v["compiled"].get<std::string>() : "";
    if (v.contains("runtime")) text += (text.empty() ? "" : ", ") + std::string("runtime ") + v["runtime"].get<std::string>();
    s += fmt::format("  {:<14} {}\n", name, text);
  }
  if (!m["environment"].empty()) {
    s += "environment\n";
    for (const auto& [k, v] : m["environment"].items()) s += fmt::format("  {}={}\n", k, v.get<std::string>());
  }
  return s;
}
}  // namespace

Command register_info(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("info", "Print the manifest: build, libraries, backends, host");
  auto opts = std::make_shared<OutputOptions>();
  add_output_options(*cmd, *opts);
  return {cmd, [opts, &g] {
            const json m = make_manifest(settings_from(g));
            emit_text(render_console(m), m, *opts);
            return kExitOk;
          }};
}

}  // namespace d5::cli
