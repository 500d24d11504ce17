// d5 peak: this machine's measured f32 FMA rate (all threads and one) and memory bandwidth, and
// those of its GPU (f32 FMA, bf16 tensor cores, device-memory copy) when the CUDA backend is built
// and a GPU is present: the figures `d5 ops bench` divides by. Not part of `d5 info`, which stays instant: measuring takes
// about a second.
#include <optional>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/core/error.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/device_peak.h"
#include "deep500/metrics/peak.h"
#include "deep500/core/threads.h"

namespace d5::cli {

Command register_peak(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("peak", "Measured peak FMA rate (GFLOP/s) and memory bandwidth (GB/s)");
  struct Opts {
    OutputOptions out;
    std::string isa;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--isa", o->isa, "FMA kernel: avx512f, avx2+fma, sse2 or scalar (default: the widest usable)");
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] {
            MachinePeak p;
            if (o->isa.empty()) {
              p = machine_peak();
            } else {
              std::vector<std::string> usable;
              std::optional<FmaIsa> chosen;
              for (auto isa : usable_fma_isas()) {
                usable.push_back(to_string(isa));
                if (o->isa == to_string(isa)) chosen = isa;
              }
              D5_CHECK_ARG(chosen, "--isa '{}' is not usable on this CPU (usable: {})", o->isa, fmt::join(usable, ", "));
              p = measure_machine_peak(*chosen, std::max(1, thread_settings().omp_max_threads));
            }
            Results res;
            res.manifest = make_manifest(settings_from(g));
            res.manifest["extra"] = {{"peak", to_json(p)}};
            for (const auto* m : {&p.fma_all_threads, &p.fma_one_thread, &p.triad}) res.cases.push_back(to_case(*m));
            // Each GPU a backend of this build can measure: its FMA, tensor-core and copy rates.
            if (has_device_peak_measurer(DeviceKind::cuda) && !gpu_info().empty()) {
              const DevicePeak& gp = device_peak(Device::cuda(0));
              res.manifest["extra"]["device_peaks"] = nlohmann::json::array({to_json(gp)});
              for (PeakMeasurement m : gp.measurements) {
                m.name = gp.device.to_string() + " " + m.name;
                res.cases.push_back(to_case(m));
              }
            }
            emit(res, o->out);
            return kExitOk;
          }};
}

}  // namespace d5::cli
