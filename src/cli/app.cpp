// d5's command line as a value (app.h).
#include "app.h"

#include "deep500/backends/builtin.h"
#include "deep500/core/build_info.h"
#include "deep500/core/determinism.h"
#include "deep500/core/malloc_policy.h"
#include "deep500/core/math_mode.h"
#include "deep500/core/threads.h"

namespace d5::cli {

std::unique_ptr<CliApp> make_cli_app() {
  auto cli = std::make_unique<CliApp>();
  CLI::App& app = cli->app;
  GlobalOptions& global = cli->global;
  app.set_version_flag("--version", "deep500 " + build_info().version + " (" +
                                        build_info().git_revision.substr(0, 12) + ")");
  app.require_subcommand(1);
  app.add_option("--threads", global.threads,
                 "Threads for OpenMP, oneDNN and LibTorch (0 = library defaults)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--seed", global.seed, "Master seed; every random stream derives from it");
  app.add_flag("--deterministic", global.deterministic,
               "Deterministic algorithms and reductions: two runs give bitwise-identical outputs "
               "(docs/reproducibility.md)");
  app.add_option("--math", global.math,
                 "strict: f32 matrix products exact; tf32: GPU backends may round their operands to "
                 "TensorFloat-32 on tensor cores; fast: f32 operands, but any algorithm a GPU backend times fastest "
                 "(FFT, Winograd, non-deterministic sums) (docs/cuda.md#tf32)")
      ->check(CLI::IsMember({"strict", "tf32", "fast"}));
  app.add_option("--malloc", global.malloc,
                 "system: the C library's allocator as it comes; keep: serve every size from the heap and never "
                 "give freed memory back, so steps do not pay page faults by the luck of free order (docs/malloc.md)")
      ->check(CLI::IsMember({"system", "keep"}));
  for (const auto& add : command_registry().values()) cli->commands.push_back((*add)(app, global));
  return cli;
}

std::optional<std::string> unknown_command(CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a.rfind('-', 0) == 0) {
      const CLI::Option* o = a.find('=') == std::string::npos ? app.get_option_no_throw(a) : nullptr;
      if (o != nullptr && o->get_items_expected_min() > 0) ++i;  // the global option's value
      continue;
    }
    try {
      (void)app.get_subcommand(a);  // throws when `a` names no subcommand
      return std::nullopt;
    } catch (const CLI::OptionNotFound&) {
      return a;
    }
  }
  return std::nullopt;
}

void apply_global_options(const GlobalOptions& global) {
  // Backends first, so that --threads reaches every library that has a pool.
  register_builtin_backends();
  set_num_threads(global.threads);
  set_deterministic(global.deterministic);
  set_f32_math(parse_f32_math(global.math));
  set_malloc_policy(parse_malloc_policy(global.malloc));
}

}  // namespace d5::cli
