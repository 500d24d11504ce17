#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "deep500/metrics/atomic_file.h"
#include "deep500/core/error.h"

namespace d5 {
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "d5-atomic-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};
}  // namespace

TEST(AtomicWrite, ReplacesContent) {
  TempDir d;
  const auto f = (d.path / "r.json").string();
  atomic_write(f, "old");
  atomic_write(f, "new content");
  EXPECT_EQ(slurp(f), "new content");
  // No temporary files left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}), 1);
}

TEST(AtomicWrite, KilledWriterLeavesOldFileIntact) {
  TempDir d;
  const auto f = (d.path / "r.json").string();
  atomic_write(f, "{\"intact\": true}\n");

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: start replacing the file, write a large partial payload, and die mid-write the
    // way a process killed by the OOM killer or a user would.
    atomic_write(f, [](std::ostream& out) {
      for (int i = 0; i < 100000; ++i) out << "partial garbage ";
      out.flush();
      raise(SIGKILL);
    });
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(slurp(f), "{\"intact\": true}\n");
}

TEST(AtomicWrite, ThrowingWriterRemovesTemporaryAndKeepsOld) {
  TempDir d;
  const auto f = (d.path / "r.txt").string();
  atomic_write(f, "keep");
  EXPECT_THROW(atomic_write(f, [](std::ostream& out) {
                 out << "half";
                 throw InvalidArgument("writer failed");
               }),
               InvalidArgument);
  EXPECT_EQ(slurp(f), "keep");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}), 1);
}

// A full disk, made with a file-size limit (the write fails with EFBIG where a full disk gives
// ENOSPC; both reach the same check): an IoError that says so, the old file intact, no temporary
// file left. In a child, so that the limit does not outlive the test.
TEST(AtomicWrite, AFullDiskIsAnIoErrorAndKeepsTheOldFile) {
  TempDir d;
  const auto f = (d.path / "r.json").string();
  atomic_write(f, "{\"intact\": true}\n");

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
    try {
      atomic_write(f, std::string(1 << 20, 'x'));
    } catch (const IoError& e) {
      _exit(std::string(e.what()).find("disk full?") != std::string::npos ? 0 : 2);
    } catch (...) {
      _exit(4);
    }
    _exit(1);  // the write succeeded past the limit
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the writer died of a signal: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error, 2: IoError without the reason, 3: no limit, 4: another error";
  EXPECT_EQ(slurp(f), "{\"intact\": true}\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}), 1);
}

TEST(AtomicWrite, MissingDirectoryIsIoError) {
  try {
    atomic_write("/nonexistent-d5-dir/x.json", "x");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-d5-dir"), std::string::npos);
  }
}

}  // namespace d5
