// d5: the deep500 command line. Every failure ends as one line on stderr and an exit code.
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <optional>
#include <string>

#include "app.h"
#include "deep500/core/error.h"
#include "deep500/core/gpu_binding.h"
#include "deep500/dist/mpi_world.h"
#include "deep500/metrics/exit_codes.h"
#include "deep500/metrics/manifest.h"

namespace {

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

// An error ends this process; in a distributed run it also ends every other rank (they would wait
// in their next collective forever), and the message says which rank failed.
int fail(int code, const std::string& what) {
  if (d5::mpi_world_is_distributed()) {
    std::cerr << std::flush;
    write_line_at_once("d5: rank " + std::to_string(d5::mpi_world()->rank()) + " " + what + "; ending every rank\n");
    d5::abort_world(code);
  }
  std::cerr << "d5: " << what << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace d5::cli;
  using d5::kExitUsage, d5::kExitInternal;
  d5::set_invocation(argc, argv);
  // Before anything can start the CUDA runtime: registering the backends probes the GPUs.
  try {
    d5::bind_gpu_to_local_rank();
  } catch (const d5::InvalidArgument& e) {
    std::cerr << "d5: error: " << e.what() << "\n";
    return kExitUsage;
  }

  const auto cli = make_cli_app();
  CLI::App& app = cli->app;
  if (const auto word = unknown_command(app, argc, argv)) {
    std::cerr << "d5: error: unknown command '" << *word << "' (run 'd5 --help' for the commands)\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
    apply_global_options(cli->global);
    for (const auto& c : cli->commands)
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
