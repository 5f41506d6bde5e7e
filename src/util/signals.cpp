#include "util/signals.h"

#include <unistd.h>

#include <csignal>

namespace lm::util {
namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_received = 0;

extern "C" void on_stop_signal(int sig) {
  g_received = g_received + 1;
  if (g_stop == SIGINT && sig == SIGINT) {  // second Ctrl-C: leave now (write and _exit are async-signal-safe)
    static const char kMsg[] =
        "error: [signal] second SIGINT: leaving at once; an unfinished save stays a *.tmp-* directory, never a "
        "checkpoint\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    _exit(static_cast<int>(ExitCode::kSigInt));
  }
  if (g_stop == 0) g_stop = sig;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_stop; }

int stop_signals_received() { return g_received; }

ExitCode exit_code_for_signal(int sig) { return sig == SIGTERM ? ExitCode::kSigTerm : ExitCode::kSigInt; }

const char* signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : "SIGINT"; }

}  // namespace lm::util
