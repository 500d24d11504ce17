#pragma once
// Runs the real d5 binary in a child process and captures what it prints.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace d5::test {

// d5's exit codes as docs/cli.md promises them to scripts: these tests hold the binary to that
// contract from outside, so they restate it rather than include the library's header.
constexpr int kExitUsage = 2;     // bad usage, a misspelt name
constexpr int kExitNotBuilt = 6;  // a backend or library this binary was built without

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal (a crash)
  int signal = 0;
  std::string out, err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A child process started by start_process; wait_process collects how it ended and what it printed.
struct StartedProcess {
  pid_t pid = -1;
  std::filesystem::path dir;  // its stdin, stdout and stderr files
};

// Starts `exe` with `args`, stdin_text on its standard input, without waiting for it.
inline StartedProcess start_process(const std::string& exe, const std::vector<std::string>& args,
                                    const std::string& stdin_text = "") {
  namespace fs = std::filesystem;
  std::string dir_t = (fs::temp_directory_path() / "d5-cli-XXXXXX").string();
  StartedProcess p;
  p.dir = mkdtemp(dir_t.data());
  const auto in_p = (p.dir / "in").string(), out_p = (p.dir / "out").string(), err_p = (p.dir / "err").string();
  std::ofstream(in_p) << stdin_text;

  p.pid = fork();
  if (p.pid == 0) {
    const int in = open(in_p.c_str(), O_RDONLY);
    const int out = open(out_p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    std::string exe_copy = exe;
    argv.push_back(exe_copy.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  return p;
}

inline ProcessResult wait_process(const StartedProcess& p) {
  int status = 0;
  waitpid(p.pid, &status, 0);
  ProcessResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = read_file((p.dir / "out").string());
  r.err = read_file((p.dir / "err").string());
  std::filesystem::remove_all(p.dir);
  return r;
}

// Runs `exe` with `args`; stdin_text on its standard input.
inline ProcessResult run_process(const std::string& exe, const std::vector<std::string>& args,
                                 const std::string& stdin_text = "") {
  return wait_process(start_process(exe, args, stdin_text));
}

// Open MPI refuses root (CI containers) and more ranks than cores unless told; one OpenMP thread
// per rank on a 2-core machine, and ranks that yield while they wait.
inline void set_mpi_launcher_environment() {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
}

inline const std::string& d5_binary() {
  static const std::string exe = D5_BINARY_DIR "/bin/d5";
  return exe;
}

inline ProcessResult run_d5(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  return run_process(d5_binary(), args, stdin_text);
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace d5::test
