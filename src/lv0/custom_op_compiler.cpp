// Building custom-operator libraries: a generated CMake project per cache entry, keyed by the
// SHA-256 of everything that decides the binary.
#include "deep500/op/custom_op_compiler.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "core/digest.h"
#include "deep500/core/data_paths.h"
#include "deep500/spi/custom_op_checks.h"
#include "deep500/metrics/atomic_file.h"
#include "deep500/op/custom_op.h"
#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"

extern char** environ;

namespace d5 {

namespace fs = std::filesystem;

namespace {

std::atomic<int64_t> g_builds{0};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

struct ProcessResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr, interleaved as written
};

// Runs argv without a shell (no quoting pitfalls), capturing its output.
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

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  D5_CHECK(in.good(), IoError, "cannot read {}", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& content) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  D5_CHECK(out.good(), IoError, "cannot write {}", p.string());
}

std::string cxx_compiler(const CustomOpOptions& o) {
  if (!o.compiler.empty()) return o.compiler;
  if (const char* cxx = env("CXX")) return cxx;
  // The compiler deep500 itself was built with, when it is still there.
  if (fs::exists(D5_CXX_COMPILER)) return D5_CXX_COMPILER;
  return "c++";
}

std::string cmake_command() { return fs::exists(D5_CMAKE_COMMAND) ? D5_CMAKE_COMMAND : "cmake"; }

// `--version` output identifies the compiler (vendor, version, build) for the cache key. Run once
// per compiler and process.
std::string compiler_identity(const std::string& compiler) {
  static std::mutex m;
  static std::map<std::string, std::string> known;
  std::lock_guard lock(m);
  auto it = known.find(compiler);
  if (it != known.end()) return it->second;
  const auto r = run_process({compiler, "--version"});
  D5_CHECK_ARG(r.exit_code == 0, "C++ compiler '{}' does not run ('--version' exited with {}): {}", compiler,
               r.exit_code, r.output);
  return known[compiler] = r.output;
}

// A value inside a CMake quoted argument.
std::string cmake_quoted(const std::string& v, const std::string& what) {
  D5_CHECK_ARG(v.find_first_of(";\n\r") == std::string::npos,
               "custom operator {} '{}' contains ';' or a newline", what, v);
  std::string out = "\"";
  for (char c : v) {
    if (c == '\\' || c == '"' || c == '$') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Source {
  std::string file_name;  // copied flat into the entry's src/, so sources include each other by name
  std::string content;
  bool compiled;
};

std::vector<Source> read_sources(const std::string& op, const std::vector<fs::path>& paths) {
  static const std::regex valid_name("[A-Za-z0-9_.+-]+");
  D5_CHECK_ARG(!paths.empty(), "custom operator {}: no source files given", op);
  std::vector<Source> sources;
  for (const auto& p : paths) {
    D5_CHECK_ARG(fs::is_regular_file(p), "custom operator {}: source file {} does not exist", op, p.string());
    const std::string name = p.filename().string();
    D5_CHECK_ARG(std::regex_match(name, valid_name) && name != "CMakeLists.txt",
                 "custom operator {}: source file name '{}' is not usable (letters, digits, _ . + - only)", op,
                 name);
    for (const auto& s : sources)
      D5_CHECK_ARG(s.file_name != name, "custom operator {}: two sources are named {}", op, name);
    const std::string ext = p.extension().string();
    sources.push_back({name, read_file(p), ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".C"});
  }
  D5_CHECK_ARG(std::any_of(sources.begin(), sources.end(), [](const Source& s) { return s.compiled; }),
               "custom operator {}: no C++ source among the files (.cpp, .cc, .cxx or .C)", op);
  return sources;
}

// The target is always d5_custom_op (an op name such as "test" or "all" would clash with CMake's
// reserved targets); OUTPUT_NAME gives the library the op's name.
std::string generate_cmakelists(const std::string& name, const std::vector<Source>& sources,
                                const std::map<std::string, std::string>& definitions, const CustomOpOptions& o,
                                const fs::path& include_dir) {
  static const std::regex identifier("[A-Za-z_][A-Za-z0-9_]*");
  std::string s = fmt::format(
      "# Generated by deep500 compile_custom_op; edits are lost on the next build.\n"
      "cmake_minimum_required(VERSION 3.16)\n"
      "project(d5_custom_op_{} LANGUAGES CXX)\n"
      "set(CMAKE_CXX_STANDARD 20)\n"
      "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
      "set(CMAKE_CXX_EXTENSIONS OFF)\n"
      "add_library(d5_custom_op SHARED",
      name);
  for (const auto& src : sources)
    if (src.compiled) s += fmt::format(" {}", src.file_name);
  s += ")\n";
  s += fmt::format("target_include_directories(d5_custom_op PRIVATE {}",
                   cmake_quoted(include_dir.string(), "include dir"));
  for (const auto& d : o.include_dirs)
    s += fmt::format(" {}", cmake_quoted(fs::absolute(d).string(), "include dir"));
  s += ")\n";
  s += "target_compile_options(d5_custom_op PRIVATE -O3 -fPIC";
  for (const auto& f : o.compile_options) s += fmt::format(" {}", cmake_quoted(f, "compile option"));
  s += ")\n";
  if (!definitions.empty()) {
    s += "target_compile_definitions(d5_custom_op PRIVATE";
    for (const auto& [k, v] : definitions) {
      D5_CHECK_ARG(std::regex_match(k, identifier),
                   "custom operator {}: definition name '{}' is not an identifier", name, k);
      s += fmt::format(" {}", cmake_quoted(v.empty() ? k : fmt::format("{}={}", k, v), "definition"));
    }
    s += ")\n";
  }
  // Only the entry points are exported: two custom libraries never bind to each other's inline
  // functions, and a library must not need any symbol of deep500 (--no-undefined).
  s += fmt::format(
      "set_target_properties(d5_custom_op PROPERTIES OUTPUT_NAME {} PREFIX lib SUFFIX .so\n"
      "  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON POSITION_INDEPENDENT_CODE ON\n"
      "  LIBRARY_OUTPUT_DIRECTORY \"${{CMAKE_BINARY_DIR}}\")\n"
      "target_link_options(d5_custom_op PRIVATE -Wl,--no-undefined)\n",
      name);
  if (!o.link_libraries.empty()) {
    s += "target_link_libraries(d5_custom_op PRIVATE";
    for (const auto& l : o.link_libraries) s += fmt::format(" {}", cmake_quoted(l, "link library"));
    s += ")\n";
  }
  return s;
}

// Length-prefixed fields, so that no two different inputs serialize to the same byte string.
void hash_field(Digest& h, std::string_view tag, std::string_view value) {
  h.update(fmt::format("{}:{}:", tag, value.size()));
  h.update(value);
}

// The compiler's diagnostics from the first error on (a cmake log begins with pages of progress
// lines), bounded so that an error message stays readable.
std::string diagnostics_excerpt(const std::string& log, const fs::path& log_path) {
  constexpr size_t kMax = 4000;
  size_t start = log.find("error:");
  if (start == std::string::npos) start = log.find("Error");
  if (start == std::string::npos) start = log.size() > kMax ? log.size() - kMax : 0;
  // Back up two lines: compilers name the function or include chain just before the error.
  for (int lines = 0; start > 0 && lines < 3; --start)
    if (log[start - 1] == '\n' && ++lines == 3) break;
  std::string out = log.substr(start, kMax);
  if (start + kMax < log.size())
    out += fmt::format("\n... ({} more bytes; full log: {})", log.size() - start - kMax, log_path.string());
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// An exclusive flock on a file beside the cache entry: one process (or thread) builds an entry
// while others wait and then find it ready. The OS releases it if the holder dies.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    D5_CHECK(fd_ >= 0, IoError, "cannot open lock file {}: {}", path.string(), std::strerror(errno));
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd_);
      D5_THROW(IoError, "cannot lock {}: {}", path.string(), std::strerror(e));
    }
  }
  ~FileLock() { close(fd_); }  // closing the descriptor releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

void check_op_name(const std::string& name) {
  static const std::regex valid("[A-Za-z_][A-Za-z0-9_]*");
  D5_CHECK_ARG(
      std::regex_match(name, valid),
      "custom operator name '{}' is not usable: it names the library and its cache entry, so use letters, "
      "digits and _ (not starting with a digit)",
      name);
}

// Configures and builds the entry b.directory from scratch; the caller holds its lock.
void run_build(const std::string& name, const std::vector<Source>& sources, const std::vector<fs::path>& paths,
               const std::string& cmakelists, const std::string& compiler, const CustomOpBuild& b) {
  std::error_code ec;
  fs::remove_all(b.directory / "build", ec);
  fs::create_directories(b.directory / "src");
  for (const auto& s : sources) write_file(b.directory / "src" / s.file_name, s.content);
  write_file(b.directory / "src" / "CMakeLists.txt", cmakelists);

  ++g_builds;
  std::string log;
  auto step = [&](const std::vector<std::string>& argv) {
    std::string line = "$";
    for (const auto& a : argv) line += fmt::format(" {}", a);
    const auto r = run_process(argv);
    log += line + "\n" + r.output;
    write_file(b.build_log, log);
    return r.exit_code;
  };
  const int configure = step({cmake_command(), "-S", (b.directory / "src").string(), "-B",
                              (b.directory / "build").string(), "-DCMAKE_BUILD_TYPE=Release",
                              "-DCMAKE_CXX_COMPILER=" + compiler});
  const int build = configure == 0 ? step({cmake_command(), "--build", (b.directory / "build").string()}) : -1;
  if (configure == 0 && build == 0) return;
  // Diagnostics name the copies in the cache entry; point the user at their own files.
  std::string diagnostics = diagnostics_excerpt(log, b.build_log);
  for (size_t i = 0; i < sources.size(); ++i)
    replace_all(diagnostics, (b.directory / "src" / sources[i].file_name).string(), paths[i].string());
  D5_THROW(InvalidArgument, "custom operator {}: {} failed (exit code {}):\n{}\nfull log: {}", name,
           configure != 0 ? "configuring the build" : "compilation", configure != 0 ? configure : build,
           diagnostics, b.build_log.string());
}

}  // namespace

fs::path default_custom_op_cache_dir() {
  if (const char* d = env("D5_CACHE_DIR")) return d;
  if (const char* x = env("XDG_CACHE_HOME")) return fs::path(x) / "deep500" / "custom_ops";
  if (const char* h = env("HOME")) return fs::path(h) / ".cache" / "deep500" / "custom_ops";
  return fs::temp_directory_path() / fmt::format("deep500-{}", getuid()) / "custom_ops";
}

fs::path custom_op_include_dir() {
  const fs::path dir = locate_data("D5_INCLUDE_DIR", D5_INCLUDE_DIR, "include");
  D5_CHECK_ARG(
      fs::exists(dir / "deep500" / "op" / "custom_op.h"),
      "deep500 headers not found: {} has no deep500/op/custom_op.h; set D5_INCLUDE_DIR to the directory that "
      "holds deep500/ (e.g. /usr/local/include)",
      dir.string());
  return dir;
}

int64_t custom_op_builds() { return g_builds.load(); }

CustomOpBuild build_custom_op(const std::string& name, const std::vector<fs::path>& source_paths,
                              const std::map<std::string, std::string>& definitions,
                              const CustomOpOptions& options) {
  check_op_name(name);
  const auto sources = read_sources(name, source_paths);
  const fs::path include_dir = custom_op_include_dir();
  const std::string cmakelists = generate_cmakelists(name, sources, definitions, options, include_dir);
  const std::string compiler = cxx_compiler(options);

  Digest h(DigestKind::sha256);
  hash_field(h, "abi", std::to_string(D5_CUSTOM_OP_ABI_VERSION));
  hash_field(h, "cmakelists", cmakelists);  // name, definitions, flags, include dirs, libraries
  for (const auto& s : sources) {
    hash_field(h, "source-name", s.file_name);
    hash_field(h, "source", s.content);
  }
  hash_field(h, "compiler", compiler);
  hash_field(h, "compiler-identity", compiler_identity(compiler));
  // The header-only part of the ABI can change (a fix in an accessor) without a version bump.
  for (const char* header : {"deep500/op/custom_op.h", "deep500/core/c_tensor_desc.h"})
    hash_field(h, header, read_file(include_dir / header));

  CustomOpBuild b;
  b.key = h.hex_digest();
  const fs::path cache = options.cache_dir.empty() ? default_custom_op_cache_dir() : options.cache_dir;
  b.directory = cache / fmt::format("{}-{}", name, b.key);
  b.build_log = b.directory / "build.log";
  const fs::path library = b.directory / "build" / fmt::format("lib{}.so", name);
  const fs::path ready = b.directory / "ready";
  // A finished entry is never modified (ready is written last, atomically), so it is read
  // without the lock.
  auto is_ready = [&] { return fs::exists(ready) && fs::exists(library); };

  b.cache_hit = !options.force_rebuild && is_ready();
  if (!b.cache_hit) {
    std::error_code ec;
    fs::create_directories(cache, ec);
    D5_CHECK(!ec, IoError, "cannot create the custom operator cache {}: {}", cache.string(), ec.message());
    FileLock lock(cache / fmt::format("{}-{}.lock", name, b.key));
    b.cache_hit = !options.force_rebuild && is_ready();  // another builder may have finished meanwhile
    if (!b.cache_hit) {
      fs::remove(ready, ec);
      run_build(name, sources, source_paths, cmakelists, compiler, b);
      D5_CHECK(fs::exists(library), Internal, "custom operator {}: the build succeeded but {} is missing", name,
               library.string());
      atomic_write(ready.string(), b.key + "\n");
    }
  }
  b.library = CustomOpLibrary::load(library);
  return b;
}

std::unique_ptr<Operator> compile_custom_op(const std::string& name, const std::vector<fs::path>& sources,
                                            const std::vector<TensorDesc>& input_descs,
                                            const std::vector<TensorDesc>& output_descs,
                                            const std::map<std::string, std::string>& definitions,
                                            const CustomOpOptions& options) {
  const auto b = build_custom_op(name, sources, definitions, options);
  OpSpec spec;
  spec.type = name;
  spec.inputs = input_descs;
  auto op = b.library->create(spec, output_descs);
  if (options.register_op) {
    // The C ABI has no shape inference, so the registered factory serves the compiled problem.
    auto factory = [library = b.library, input_descs, output_descs](const OpSpec& s) -> OpCreateResult {
      if (s.inputs != input_descs)
        return fmt::format("compiled for inputs {}, asked for {}", detail::describe(input_descs),
                           detail::describe(s.inputs));
      return library->create(s, output_descs);
    };
    register_custom_op(name, factory, op->has_gradient(),
                       fmt::format("compiled at run time: {}", b.library->path().string()));
  }
  return op;
}

}  // namespace d5
