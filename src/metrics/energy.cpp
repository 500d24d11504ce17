#include "deep500/metrics/energy.h"

#include <map>

#include <fmt/format.h>

#include "core/sysfs_parse.h"
#include "deep500/core/error.h"

namespace d5 {

namespace {

constexpr std::string_view kZonePrefix = "intel-rapl:";

// "intel-rapl:0:1" -> {0, 1}. Sorting by it lists each package right before its subzones, and
// "intel-rapl:10" after "intel-rapl:9". Empty for names that are not RAPL zones (for example
// intel-rapl-mmio:*, which mirrors the package counter and would count it twice).
std::vector<int64_t> zone_key(std::string_view name) {
  if (!name.starts_with(kZonePrefix)) return {};
  name.remove_prefix(kZonePrefix.size());
  std::vector<int64_t> key;
  while (true) {
    const size_t colon = name.find(':');
    const auto part = detail::parse_int(name.substr(0, colon));
    if (!part) return {};
    key.push_back(*part);
    if (colon == std::string_view::npos) return key;
    name.remove_prefix(colon + 1);
  }
}

// Reads one unsigned counter file; on failure says why in `why`.
std::optional<uint64_t> read_counter(const std::string& path, std::string* why) {
  std::string error;
  const auto text = detail::read_text_file(path, &error);
  if (!text) {
    *why = fmt::format("{} not readable: {}", path, error);
    return std::nullopt;
  }
  const auto value = detail::parse_uint64(*text);
  if (!value) *why = fmt::format("{} does not hold a counter: '{}'", path, detail::trim(*text));
  return value;
}

struct Probe {
  std::vector<RaplDomain> domains;
  std::string reason;
};

}  // namespace

std::vector<RaplDomain> probe_rapl_domains(const std::string& powercap_root, std::string* reason) {
  D5_CHECK_ARG(!powercap_root.empty(), "powercap root directory must not be empty");
  std::string why;
  auto unavailable = [&](std::string r) {
    if (reason) *reason = std::move(r);
    return std::vector<RaplDomain>{};
  };

  // Subzones (dram, core, uncore) appear both next to the packages, as links, and inside their
  // package directory; some trees have only the latter. Collect both, first path wins.
  std::map<std::vector<int64_t>, std::string> zones;
  for (const auto& name : detail::list_directory(powercap_root, &why)) {
    if (zone_key(name).empty()) continue;
    const std::string dir = powercap_root + "/" + name;
    zones.emplace(zone_key(name), dir);
    for (const auto& sub : detail::list_directory(dir))
      if (!zone_key(sub).empty()) zones.emplace(zone_key(sub), dir + "/" + sub);
  }
  if (!why.empty()) return unavailable(fmt::format("cannot list {}: {}", powercap_root, why));
  if (zones.empty()) {
    return unavailable(fmt::format(
        "no {}/{}* (no RAPL driver loaded, or the VM/container does not expose it)",
        powercap_root, kZonePrefix));
  }

  // All or nothing: a total missing one package or a domain whose wrap-around cannot be handled
  // would be a wrong number that looks right.
  std::vector<RaplDomain> domains;
  for (const auto& [key, dir] : zones) {
    std::string error;
    const auto name = detail::read_text_file(dir + "/name", &error);
    if (!name) return unavailable(fmt::format("{}/name not readable: {}", dir, error));
    const auto max = read_counter(dir + "/max_energy_range_uj", &why);
    if (!max) return unavailable(why);
    if (*max == 0) return unavailable(fmt::format("{}/max_energy_range_uj is 0", dir));
    if (!read_counter(dir + "/energy_uj", &why)) return unavailable(why);
    domains.push_back({std::string(detail::trim(*name)), dir, *max});
  }
  if (reason) reason->clear();
  return domains;
}

const std::vector<RaplDomain>& rapl_domains(std::string* reason) {
  static const Probe probe = [] {
    Probe p;
    p.domains = probe_rapl_domains("/sys/class/powercap", &p.reason);
    return p;
  }();
  if (reason) *reason = probe.reason;
  return probe.domains;
}

std::optional<EnergyReading> read_energy(const std::vector<RaplDomain>& domains) {
  if (domains.empty()) return std::nullopt;  // no counters is "unknown", not zero joules
  EnergyReading reading;
  std::string why;
  for (const auto& d : domains) {
    const auto uj = read_counter(d.path + "/energy_uj", &why);
    if (!uj) return std::nullopt;
    reading.energy_uj.push_back(*uj);
  }
  return reading;
}

std::optional<EnergyReading> read_energy() { return read_energy(rapl_domains()); }

std::vector<double> energy_joules_between(const std::vector<RaplDomain>& domains,
                                          const EnergyReading& begin, const EnergyReading& end) {
  D5_CHECK_ARG(begin.energy_uj.size() == domains.size() && end.energy_uj.size() == domains.size(),
               "energy readings have {} and {} values for {} RAPL domains; take both readings "
               "with read_energy() over the same domains",
               begin.energy_uj.size(), end.energy_uj.size(), domains.size());
  std::vector<double> joules;
  joules.reserve(domains.size());
  for (size_t i = 0; i < domains.size(); ++i) {
    const uint64_t b = begin.energy_uj[i], e = end.energy_uj[i], max = domains[i].max_energy_uj;
    uint64_t delta = e - b;
    if (e < b) {
      // One wrap: the counter ran from b up to max, restarted at 0 and reached e. More than one
      // wrap between readings is undetectable; on current parts that takes minutes to hours.
      D5_CHECK_ARG(b <= max, "energy reading {} uJ of {} exceeds its range {} uJ; the readings "
                   "do not belong to this domain", b, domains[i].name, max);
      delta = e + (max - b);
    }
    joules.push_back(static_cast<double>(delta) * 1e-6);
  }
  return joules;
}

std::vector<double> energy_joules_between(const EnergyReading& begin, const EnergyReading& end) {
  return energy_joules_between(rapl_domains(), begin, end);
}

double package_joules_between(const std::vector<RaplDomain>& domains, const EnergyReading& begin,
                              const EnergyReading& end) {
  const std::vector<double> j = energy_joules_between(domains, begin, end);
  double sum = 0;
  for (size_t i = 0; i < domains.size() && i < j.size(); ++i)
    if (domains[i].name.rfind("package", 0) == 0) sum += j[i];
  return sum;
}

}  // namespace d5
