// Graceful stop on SIGINT/SIGTERM: the handlers only record the signal; the training loop polls it at
// step boundaries, saves, and exits 130/143. A second SIGINT exits at once (no checkpoint is half-made
// visible: unfinished saves are *.tmp-* directories, which are never checkpoints).
#pragma once

#include "util/errors.h"

namespace lm::util {

/// Installs the SIGINT/SIGTERM handlers (idempotent).
void install_stop_handlers();

/// The first stop signal received (SIGINT or SIGTERM), or 0 when none.
int stop_signal();

/// How many stop signals this process has received (a test build's hold waits for the next one).
int stop_signals_received();

/// Exit code for a stop signal: ExitCode::kSigInt (130) for SIGINT, kSigTerm (143) for SIGTERM.
ExitCode exit_code_for_signal(int sig);

/// "SIGINT" or "SIGTERM".
const char* signal_name(int sig);

}  // namespace lm::util
