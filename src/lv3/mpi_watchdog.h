#pragma once
// The liveness watchdog of a distributed run (docs/distributed.md#faults).
//
// A launcher ends the job when a rank dies, but not when a rank stops (SIGSTOP, a debugger, a
// swapping or frozen node) or when it is told not to (srun without --kill-on-bad-exit); the other
// ranks then wait in their next collective forever. The watchdog is a thread on every rank that
// sends a heartbeat to its right ring neighbour and listens for its left one's, on a duplicate of
// the world communicator so that no heartbeat meets an application message. A left neighbour
// silent for longer than the timeout is named on stderr and the job is ended with MPI_Abort.
//
// Heartbeats come from a thread, not from the training loop, so a rank that computes or waits
// for a long time (rank 0 evaluating while the others wait) is not taken for dead. The thread
// calls MPI concurrently with the main thread: MPI_THREAD_MULTIPLE is required.
//
// Shutdown: each rank sends a goodbye to its right neighbour and keeps listening to its left one
// until that neighbour's goodbye arrives, so every heartbeat sent is received before
// MPI_Finalize and a rank that finishes early is not mistaken for a lost one.
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace d5 {

class MpiWatchdog {
 public:
  // Collective over `world`: duplicates it and exchanges host names and process ids.
  MpiWatchdog(MPI_Comm world, double timeout_s, double interval_s);
  ~MpiWatchdog();
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

  // Says goodbye and returns once the left neighbour has said goodbye too (a neighbour silent for
  // the timeout meanwhile ends the run, as at any other time); then the duplicate communicator is
  // freed. Call before MPI_Finalize.
  void stop();

 private:
  void run();
  [[noreturn]] void end_run(const std::string& why);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, left_ = 0, right_ = 0;
  std::vector<std::string> hosts_;
  std::vector<long> pids_;
  std::chrono::duration<double> timeout_, interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace d5
