// `lmtrain train --nproc N` (and `finetune --nproc N`): the launcher for one machine. It runs N copies of
// this executable as ranks 0..N-1 with the variables torchrun would set (RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT = a free port), forwards SIGINT/SIGTERM to them, and exits with their
// exit code. It needs neither torchrun nor Python. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lm::dist {

/// How one rank ended: its exit code, or the signal that killed it.
struct RankExit {
  int code = 0;    ///< exit status when it exited
  int signal = 0;  ///< the signal that killed it, else 0
};

/// The launcher's exit code: the ranks' common code when they all agree; otherwise the first non-zero
/// code other than 7 in rank order (the cause, e.g. a data error on rank 0), else 7 (a rank was lost).
int combined_exit_code(const std::vector<RankExit>& ranks);

/// A TCP port on the loopback interface that is free now: the kernel's pick for a socket bound to port 0
/// (MASTER_PORT of a local group; the tests' rendezvous ports). Throws DistributedError when none is.
int free_port();

/// `args` without the `--nproc N` / `--nproc=N` option (the workers' command line).
std::vector<std::string> without_nproc(const std::vector<std::string>& args);

/// Runs `exe args...` `nproc` times as one group and waits for all of them. A rank that fails gives the
/// others `grace_s` seconds to end by themselves (they exit 7 within dist.timeout_s), then they are killed.
/// Returns combined_exit_code. Throws DistributedError when a worker cannot be started.
int run_local_group(int nproc, const std::string& exe, const std::vector<std::string>& args, int64_t grace_s);

}  // namespace lm::dist
