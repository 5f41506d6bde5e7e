// The small `lmtrain` executable (docs/ARCHITECTURE.md "Two executables"): it runs `prepare` and `corpus`
// itself, without LibTorch, whose loading alone costs ~0.65 s here, and hands every other command line
// unchanged to `lmtrain_full` beside it.
#pragma once

namespace lm::cli {

/// The name of the full executable, in the directory of the front one.
inline constexpr const char* kFullExecutable = "lmtrain_full";

/// True when argv names `prepare` or `corpus` as its command, after only the global -v/--verbose flags;
/// anything else (another command, --help, --version, a malformed line) goes to the full executable, which answers it.
bool runs_in_front(int argc, char** argv);

/// Runs `prepare` or `corpus` when runs_in_front(), else replaces this process with the full executable (same
/// argv, same environment). Returns an exit code only when it ran a command or the exec failed (1, on stderr).
int run_front(int argc, char** argv);

}  // namespace lm::cli
