// Programs run without a shell (subprocess.h).
#include "subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "deep500/core/error.h"

extern char** environ;

namespace d5 {

ProcessResult run_process(const std::vector<std::string>& argv) {
  int fds[2];
  D5_CHECK(pipe2(fds, O_CLOEXEC) == 0, IoError, "cannot create a pipe: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A parent make's flags (jobserver descriptors, -n, -k) must not steer the inner build.
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("MAKEFLAGS=") && !v.starts_with("MFLAGS=") && !v.starts_with("MAKELEVEL="))
      envp.push_back(*e);
  }
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    D5_THROW(InvalidArgument, "cannot run '{}': {}", argv[0], std::strerror(rc));
  }
  ProcessResult r;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) r.output.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  for (std::string_view rest = path;;) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    // An empty entry means the working directory, as for the shell.
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? std::string_view(".") : dir) / program;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

}  // namespace d5
