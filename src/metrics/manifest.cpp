#include "deep500/metrics/manifest.h"

#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/device.h"
#include "deep500/core/gpu_binding.h"
#include "deep500/core/malloc_policy.h"
#include "deep500/core/math_mode.h"
#include "deep500/core/runtime_libraries.h"
#include "deep500/core/system_info.h"
#include "deep500/core/threads.h"
#include "deep500/metrics/timer.h"

namespace d5 {

using nlohmann::json;

namespace {

std::vector<std::string> g_command_line;
std::string g_start_time;

json cpu_json(const CpuInfo& c) {
  json caches = json::array();
  for (const auto& k : c.caches)
    caches.push_back({{"level", k.level}, {"type", k.type}, {"size_bytes", k.size_bytes},
                      {"line_bytes", k.line_bytes}, {"shared_by_cpus", k.shared_by_cpus}});
  json j = {{"vendor", c.vendor},
            {"model", c.model},
            {"architecture", c.architecture},
            {"isa", c.isa},
            {"logical_cores", c.logical_cores},
            {"physical_cores", c.physical_cores},
            {"sockets", c.sockets},
            {"numa_nodes", c.numa_nodes},
            {"topology_source", c.topology_source},
            {"max_mhz", c.max_mhz},
            {"caches", caches}};
  if (c.caches.empty()) {
    j["caches_unavailable_reason"] = c.caches_unavailable_reason;
  } else {
    j["cache_source"] = c.cache_source;
  }
  return j;
}

json clocks_json() {
  json j = json::object();
  for (auto k : {ClockKind::Wall, ClockKind::ProcessCpu, ClockKind::ThreadCpu}) {
    const auto& c = clock_characteristics(k);
    j[to_string(k)] = {{"reported_resolution_ns", c.reported_resolution_ns},
                       {"observed_resolution_ns", c.observed_resolution_ns},
                       {"call_overhead_ns", c.call_overhead_ns}};
  }
  return j;
}
}  // namespace

void set_invocation(int argc, const char* const* argv) {
  g_command_line.assign(argv, argv + argc);
  g_start_time = utc_now_iso8601();
}

const std::vector<std::string>& invocation_command_line() { return g_command_line; }

const std::string& invocation_start_time_utc() {
  if (g_start_time.empty()) g_start_time = utc_now_iso8601();
  return g_start_time;
}

json make_manifest(const ExperimentSettings& settings) {
  const BuildInfo& b = build_info();

  // Each library: the version compiled against and, where the library reports one, the version
  // actually loaded at run time.
  json libraries = json::object();
  for (const auto& [name, version] : b.libraries) libraries[name] = {{"compiled", version}};
  for (const auto& [name, version] : runtime_libraries()) libraries[name]["runtime"] = version;

  json backend_list = json::array();
  for (const auto& be : backends()) {
    json e = {{"name", be.name}, {"version", be.version}, {"description", be.description},
              {"available", be.available}};
    if (!be.available) e["unavailable_reason"] = be.unavailable_reason;
    backend_list.push_back(e);
  }

  std::string gpu_reason;
  json gpus = json::array();
  for (const auto& g : gpu_info(&gpu_reason))
    gpus.push_back({{"index", g.index}, {"name", g.name}, {"memory_bytes", g.memory_bytes},
                    {"multiprocessors", g.multiprocessors},
                    {"compute_capability", std::to_string(g.compute_capability_major) + "." +
                                               std::to_string(g.compute_capability_minor)},
                    {"clock_mhz", g.clock_mhz}, {"driver_version", g.driver_version},
                    {"pci_bus_id", g.pci_bus_id}, {"nvml", g.nvml}, {"ecc", g.ecc},
                    {"sm_clock_mhz_at_start", g.sm_clock_mhz_at_start},
                    {"memory_clock_mhz_at_start", g.memory_clock_mhz_at_start}});

  const ThreadSettings t = thread_settings();
  const OsInfo& os = os_info();
  const CpuInfo& cpu = cpu_info();

  json m = {
      {"version", b.version},
      {"git_revision", b.git_revision},
      {"git_dirty", b.git_dirty},
      {"compiler", {{"id", b.compiler}, {"flags", b.flags}}},
      {"build_type", b.build_type},
      {"libraries", libraries},
      {"backends", backend_list},
      {"backends_not_built", not_built_backends()},
      {"cpu", cpu_json(cpu)},
      {"memory_bytes", cpu.memory_bytes},
      {"gpus", gpus},
      {"os", {{"name", os.name}, {"kernel", os.kernel}, {"kernel_version", os.kernel_version},
              {"machine", os.machine}}},
      {"hostname", os.hostname},
      {"threads", {{"requested", t.requested}, {"omp_max_threads", t.omp_max_threads},
                   {"backends", t.backends}, {"allowed_cpus", format_cpu_list(t.allowed_cpus)},
                   {"allowed_cpu_count", t.allowed_cpus.size()}}},
      {"malloc", to_string(malloc_policy())},
      {"environment", relevant_environment()},
      {"seeds", {{"master", settings.seed}, {"streams", settings.streams_used},
                 {"derivation", "Philox-4x32-10 keyed by the master seed; stream = FNV-1a(name)"}}},
      {"deterministic", settings.deterministic},
      {"f32_math", to_string(f32_math())},
      {"command_line", invocation_command_line()},
      {"start_time_utc", invocation_start_time_utc()},
      {"clocks", clocks_json()},
  };
  if (gpus.empty()) m["gpu_unavailable_reason"] = gpu_reason;
  if (!gpu_binding().empty()) m["gpu_binding"] = gpu_binding();
  return m;
}

}  // namespace d5
