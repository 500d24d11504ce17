#pragma once
// Facts about the host and the process that go into every manifest.
#include <chrono>
#include <map>
#include <string>

namespace d5 {

struct OsInfo {
  std::string name;            // PRETTY_NAME from /etc/os-release, else uname sysname
  std::string kernel;          // uname release
  std::string kernel_version;  // uname version
  std::string machine;         // uname machine
  std::string hostname;
};
const OsInfo& os_info();

// Environment variables that change how numerical libraries behave: OMP_*, MKL_*, DNNL_*,
// ONEDNN_*, OMPI_*, KMP_*, GOMP_*, CUDA_VISIBLE_DEVICES, CUBLAS_*, CUDNN_*, TORCH_*, D5_*.
std::map<std::string, std::string> relevant_environment();

// Current UTC time as ISO 8601 with milliseconds: 2026-11-21T23:50:34.123Z
std::string utc_now_iso8601();
// The same format for any instant (milliseconds truncated toward the past).
std::string iso8601_utc(std::chrono::system_clock::time_point t);

}  // namespace d5
