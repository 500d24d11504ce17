#pragma once
// Energy from Intel/AMD RAPL through /sys/class/powercap. Where the counters are absent or not
// readable (containers, VMs, non-root) energy is *unavailable*, never zero.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace d5 {

struct RaplDomain {
  std::string name;          // "package-0", "dram", "core", ...
  std::string path;          // directory under /sys/class/powercap
  uint64_t max_energy_uj;    // counter wraps here
};

struct EnergyReading {
  std::vector<uint64_t> energy_uj;  // one per domain, same order as rapl_domains()
};

// Probed once. `reason` explains an empty list ("no /sys/class/powercap/intel-rapl:*",
// "energy_uj not readable: Permission denied").
const std::vector<RaplDomain>& rapl_domains(std::string* reason = nullptr);
std::optional<EnergyReading> read_energy();
// Joules per domain between two readings, handling one counter wrap-around per domain.
std::vector<double> energy_joules_between(const EnergyReading& begin, const EnergyReading& end);

// Same, but over an explicit root directory (tests point this at a fake sysfs tree).
std::vector<RaplDomain> probe_rapl_domains(const std::string& powercap_root, std::string* reason);
std::optional<EnergyReading> read_energy(const std::vector<RaplDomain>& domains);
std::vector<double> energy_joules_between(const std::vector<RaplDomain>& domains,
                                          const EnergyReading& begin, const EnergyReading& end);
// The package domains' joules summed: core and uncore are parts of a package and would count twice.
double package_joules_between(const std::vector<RaplDomain>& domains, const EnergyReading& begin,
                              const EnergyReading& end);

}  // namespace d5
