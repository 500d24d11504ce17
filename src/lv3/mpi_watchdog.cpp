// The liveness watchdog (src/lv3/mpi_watchdog.h).
#include "mpi_watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "deep500/metrics/exit_codes.h"

namespace d5 {

namespace {

constexpr int kHeartbeatTag = 1;
// Goodbye travels on the heartbeat's tag so that it arrives after every earlier heartbeat (MPI
// keeps the order of messages between two ranks on one tag and communicator).
constexpr int64_t kGoodbye = -1;
// The exit code of a run ended by the watchdog: as d5's I/O errors (a lost peer is a failed channel).
constexpr int kExitLostRank = kExitIo;

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

}  // namespace

MpiWatchdog::MpiWatchdog(MPI_Comm world, double timeout_s, double interval_s)
    : timeout_(timeout_s), interval_(interval_s) {
  MPI_Comm_dup(world, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  left_ = (rank_ + size_ - 1) % size_;
  right_ = (rank_ + 1) % size_;

  // Who is who, for the message that names a silent rank.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm_);
  long pid = static_cast<long>(getpid());
  pids_.resize(static_cast<size_t>(size_));
  MPI_Allgather(&pid, 1, MPI_LONG, pids_.data(), 1, MPI_LONG, comm_);
  for (int r = 0; r < size_; ++r) {
    const char* n = names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts_.emplace_back(n, strnlen(n, MPI_MAX_PROCESSOR_NAME));
  }
  thread_ = std::thread([this] { run(); });
}

MpiWatchdog::~MpiWatchdog() { stop(); }

void MpiWatchdog::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  MPI_Comm_free(&comm_);
}

void MpiWatchdog::end_run(const std::string& why) {
  std::fprintf(stderr,
               "d5: rank %d (%s): %s; ending every rank (watchdog timeout %g s: --dist-timeout or D5_WATCHDOG_TIMEOUT)\n", rank_,
               hosts_[static_cast<size_t>(rank_)].c_str(), why.c_str(), timeout_.count());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kExitLostRank);
  std::_Exit(kExitLostRank);  // MPI_Abort does not return; should an implementation, still end
}

void MpiWatchdog::run() {
  using clock = std::chrono::steady_clock;
  const auto named = [&](int r) {
    return fmt::format("rank {} (host {}, pid {})", r, hosts_[static_cast<size_t>(r)], pids_[static_cast<size_t>(r)]);
  };
  const auto checked = [&](int rc, const char* call, int peer) {
    if (rc != MPI_SUCCESS) end_run(fmt::format("{} with {} failed: {}", call, named(peer), mpi_error_text(rc)));
  };
  // Polling, not blocking: a blocked MPI call could not notice the timeout, and MPI_Test also
  // advances the messages (this MPI has no progress thread of its own).
  const auto poll = std::min<std::chrono::duration<double>>(interval_ / 4, std::chrono::milliseconds(50));

  int64_t incoming = 0, beat = 0;
  const int64_t goodbye = kGoodbye;
  MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL, bye = MPI_REQUEST_NULL;
  checked(MPI_Irecv(&incoming, 1, MPI_INT64_T, left_, kHeartbeatTag, comm_, &recv), "MPI_Irecv", left_);
  auto last_heard = clock::now();
  auto next_beat = clock::now();
  bool left_gone = false, stopping = false;

  for (;;) {
    {
      // Woken early only by the stop itself; after it, still one poll per period while waiting
      // for the left neighbour's goodbye.
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, poll, [&] { return stopping_ && !stopping; });
      stopping = stopping_;
    }
    while (!left_gone) {
      int flag = 0;
      checked(MPI_Test(&recv, &flag, MPI_STATUS_IGNORE), "a heartbeat", left_);
      if (flag == 0) break;
      last_heard = clock::now();
      if (incoming == kGoodbye)
        left_gone = true;
      else
        checked(MPI_Irecv(&incoming, 1, MPI_INT64_T, left_, kHeartbeatTag, comm_, &recv), "MPI_Irecv", left_);
    }
    const auto now = clock::now();
    if (bye == MPI_REQUEST_NULL && now >= next_beat) {
      // One heartbeat in flight at most: a stopped neighbour must not make sends pile up.
      int sent = 1;
      if (send != MPI_REQUEST_NULL) checked(MPI_Test(&send, &sent, MPI_STATUS_IGNORE), "a heartbeat", right_);
      if (sent != 0) {
        ++beat;
        checked(MPI_Isend(&beat, 1, MPI_INT64_T, right_, kHeartbeatTag, comm_, &send), "MPI_Isend", right_);
      }
      next_beat = now + std::chrono::duration_cast<clock::duration>(interval_);
    }
    if (stopping && bye == MPI_REQUEST_NULL) {
      if (send != MPI_REQUEST_NULL) checked(MPI_Wait(&send, MPI_STATUS_IGNORE), "a heartbeat", right_);
      checked(MPI_Isend(&goodbye, 1, MPI_INT64_T, right_, kHeartbeatTag, comm_, &bye), "MPI_Isend", right_);
    }
    if (!left_gone && now - last_heard > timeout_)
      end_run(fmt::format("{} has sent no heartbeat for {:.1f} s: it was killed, stopped or lost its node",
                          named(left_), std::chrono::duration<double>(now - last_heard).count()));
    if (bye != MPI_REQUEST_NULL && left_gone) {
      // The right neighbour receives until our goodbye, so these complete.
      checked(MPI_Wait(&bye, MPI_STATUS_IGNORE), "a goodbye", right_);
      return;
    }
  }
}

}  // namespace d5
