// d5: the deep500 command line. Every failure ends as one line on stderr and an exit code.
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <optional>
#include <string>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/core/determinism.h"
#include "deep500/core/error.h"
#include "deep500/core/math_mode.h"
#include "deep500/metrics/exit_codes.h"
#include "deep500/core/malloc_policy.h"
#include "deep500/metrics/manifest.h"
#include "deep500/dist/mpi_world.h"
#include "deep500/core/threads.h"

namespace {

// An error ends this process; in a distributed run it also ends every other rank (they would wait
// in their next collective forever), and the message says which rank failed.
// The line goes out in one write(2): the MPI launcher forwards each write of a rank as it comes and
// prints its own abort notice between them, which split a line written piecewise by iostreams.
void write_line_at_once(const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

int fail(int code, const std::string& what) {
  if (d5::mpi_world_is_distributed()) {
    std::cerr << std::flush;
    write_line_at_once("d5: rank " + std::to_string(d5::mpi_world()->rank()) + " " + what + "; ending every rank\n");
    d5::abort_world(code);
  }
  std::cerr << "d5: " << what << "\n";
  return code;
}

// The command word of a command line, when it names no command. CLI11 answers `d5 NOSUCH --help`
// with the main help and exit 0, so a script asking whether a command exists would hear yes.
std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a.rfind('-', 0) == 0) {
      const CLI::Option* o = a.find('=') == std::string::npos ? app.get_option_no_throw(a) : nullptr;
      if (o != nullptr && o->get_items_expected_min() > 0) ++i;  // the global option's value
      continue;
    }
    try {
      app.get_subcommand(a);
      return std::nullopt;
    } catch (const CLI::OptionNotFound&) {
      return a;
    }
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace d5::cli;
  using d5::kExitUsage, d5::kExitInternal;
  d5::set_invocation(argc, argv);

  CLI::App app{"deep500: fair, validated and reproducible deep-learning benchmarks", "d5"};
  app.set_version_flag("--version", "deep500 " + d5::build_info().version + " (" +
                                        d5::build_info().git_revision.substr(0, 12) + ")");
  app.require_subcommand(1);
  GlobalOptions global;
  app.add_option("--threads", global.threads,
                 "Threads for OpenMP, oneDNN and LibTorch (0 = library defaults)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--seed", global.seed, "Master seed; every random stream derives from it");
  app.add_flag("--deterministic", global.deterministic,
               "Deterministic algorithms and reductions: two runs give bitwise-identical outputs "
               "(docs/reproducibility.md)");
  app.add_option("--math", global.math,
                 "strict: f32 matrix products exact; tf32: GPU backends may round their operands to "
                 "TensorFloat-32 on tensor cores (docs/cuda.md#tf32)")
      ->check(CLI::IsMember({"strict", "tf32"}));
  app.add_option("--malloc", global.malloc,
                 "system: the C library's allocator as it comes; keep: serve every size from the heap and never "
                 "give freed memory back, so steps do not pay page faults by the luck of free order (docs/malloc.md)")
      ->check(CLI::IsMember({"system", "keep"}));

  std::vector<Command> commands;
  for (const auto& add : command_registry().values()) commands.push_back((*add)(app, global));

  if (const auto word = unknown_command(app, argc, argv)) {
    std::cerr << "d5: error: unknown command '" << *word << "' (run 'd5 --help' for the commands)\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
    // Backends first, so that --threads reaches every library that has a pool.
    d5::register_builtin_backends();
    d5::set_num_threads(global.threads);
    d5::set_deterministic(global.deterministic);
    d5::set_f32_math(d5::parse_f32_math(global.math));
    d5::set_malloc_policy(d5::parse_malloc_policy(global.malloc));
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
    return kExitUsage;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports an unknown command as "a subcommand is required"; name the word instead.
    const auto rest = app.remaining();
    if (app.get_subcommands().empty() && !rest.empty() && rest.front().rfind('-', 0) != 0)
      std::cerr << "d5: error: unknown command '" << rest.front() << "' (run 'd5 --help' for the commands)\n";
    else
      std::cerr << "d5: error: " << e.what() << " (run 'd5 --help' for usage)\n";
    return kExitUsage;
  } catch (const d5::Error& e) {
    return fail(d5::exit_code_for(e.kind()), std::string("error: ") + e.what());
  } catch (const std::exception& e) {
    return fail(kExitInternal, std::string("internal error: ") + e.what() + " (please report it)");
  }
}
