#include "interrupt.h"

#include <signal.h>

#include <atomic>

namespace d5::cli {

namespace {

// Lock-free, so that the handler may write it (async-signal-safe).
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

extern "C" void record_signal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  // One-shot: the next signal has its default action again. SA_RESTART: a system call the signal
  // lands in (a loader thread's read) goes on rather than failing with EINTR.
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &sa, &g_previous_int);
  sigaction(SIGTERM, &sa, &g_previous_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int InterruptGuard::signal() { return g_signal.load(std::memory_order_relaxed); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace d5::cli
