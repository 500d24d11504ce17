#pragma once
// SIGINT and SIGTERM as a request to stop cleanly: while an InterruptGuard lives, the first such
// signal is only recorded, so that a long command (d5 train) can finish its step, save its
// checkpoint and results, and exit with 128 + the signal's number. The handler resets itself: a
// second signal ends the process the usual way, for a user who does not want to wait.

namespace d5::cli {

class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // The signal that asked to stop, or 0.
  static int signal();
};

// "SIGINT", "SIGTERM", or "a signal".
const char* signal_name(int sig);

}  // namespace d5::cli
