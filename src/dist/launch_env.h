// Where this process sits in a multi-process launch: the standard torch.distributed variables RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (set by torchrun, SLURM/Kubernetes launchers, or
// `lmtrain train --nproc N`). No LibTorch here.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace lm::dist {

struct LaunchEnv {
  int rank = 0;        ///< RANK: this process, 0..world_size-1; rank 0 writes every file
  int world_size = 1;  ///< WORLD_SIZE: processes in the run
  int local_rank = 0;  ///< LOCAL_RANK: index on this machine (picks cuda:LOCAL_RANK); default 0
  /// LOCAL_WORLD_SIZE: processes on this machine (torchrun sets it); 0 = unset. Below world_size: several hosts.
  int local_world_size = 0;
  std::string master_addr = "127.0.0.1";  ///< MASTER_ADDR: host of the rendezvous store
  int master_port = 29500;                ///< MASTER_PORT
  /// TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store (every rank is a client) and keys
  /// live under /worker/attempt_<TORCHELASTIC_RESTART_COUNT>; otherwise rank 0 hosts it.
  bool agent_store = false;
  std::string store_prefix;
};

/// Reads the launch variables through `get` (nullopt = unset). Returns nullopt when WORLD_SIZE is unset
/// (a single-process run). Throws ConfigError listing every malformed or missing variable: RANK must be
/// in [0, WORLD_SIZE), MASTER_ADDR and MASTER_PORT (1-65535) are required when WORLD_SIZE > 1.
std::optional<LaunchEnv> read_launch_env(const std::function<std::optional<std::string>(const char*)>& get);

/// The same from the process environment.
std::optional<LaunchEnv> launch_env_from_process();

}  // namespace lm::dist
