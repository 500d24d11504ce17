// A stand-in for the driver's libnvidia-ml.so.1 with the entry points d5 uses, so the NVML loader
// runs without a GPU. Its answers are fixed, except as the test asks through the environment:
//   FAKE_NVML_VERSION  what nvmlSystemGetNVMLVersion returns (default "12.535.104")
//   FAKE_NVML_INIT     a nonzero nvmlInit_v2 result
//   FAKE_NVML_REASONS  the clock event reasons mask (decimal)
// The energy counter advances by 1500 mJ per read. Built with FAKE_NVML_NO_ENERGY, it lacks
// nvmlDeviceGetTotalEnergyConsumption (a library that is too old).
#include <cstdlib>
#include <cstring>

namespace {
const char* kBus = "0000:65:00.0";
unsigned long long energy_mj = 1000;
struct Device {
  int id;
} gpu{0};
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
int copy(char* dst, unsigned n, const char* src) {
  if (std::strlen(src) + 1 > n) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::strcpy(dst, src);
  return 0;
}
}  // namespace

extern "C" {
struct Utilization {
  unsigned gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};

int nvmlInit_v2() { return env_int("FAKE_NVML_INIT", 0); }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlSystemGetNVMLVersion(char* v, unsigned n) {
  const char* env = std::getenv("FAKE_NVML_VERSION");
  return copy(v, n, env && *env ? env : "12.535.104");
}
int nvmlSystemGetDriverVersion(char* v, unsigned n) { return copy(v, n, "535.104.05"); }
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, Device** d) {
  if (std::strcmp(bus, kBus) != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *d = &gpu;
  return 0;
}
#ifndef FAKE_NVML_NO_ENERGY
int nvmlDeviceGetTotalEnergyConsumption(Device*, unsigned long long* e) {
  *e = energy_mj;
  energy_mj += 1500;
  return 0;
}
#endif
int nvmlDeviceGetClockInfo(Device*, int type, unsigned* mhz) {
  *mhz = type == 1 ? 1980 : type == 2 ? 2619 : 0;
  return 0;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(Device*, unsigned long long* r) {
  *r = static_cast<unsigned long long>(env_int("FAKE_NVML_REASONS", 0));
  return 0;
}
int nvmlDeviceGetUtilizationRates(Device*, Utilization* u) {
  *u = {87, 40};
  return 0;
}
int nvmlDeviceGetMemoryInfo(Device*, Memory* m) {
  *m = {80ull << 30, 70ull << 30, 10ull << 30};
  return 0;
}
int nvmlDeviceGetEccMode(Device*, int* current, int* pending) {
  *current = *pending = 1;
  return 0;
}
}
