// Which network interface Gloo's ranks talk over. torch.distributed's default advertises the address the
// hostname resolves to, which is loopback on many machines (Debian's /etc/hosts, network namespaces): ranks
// on other hosts then time out. lmtrain uses GLOO_SOCKET_IFNAME when it is set, else the interface whose
// address the kernel's route to MASTER_ADDR starts from, and refuses a world that spans hosts when that is
// loopback (docs/training.md "Several hosts"). No LibTorch here.
#pragma once

#include <string>

#include "dist/launch_env.h"

namespace lm::dist {

/// The local end of the route to `host`: the interface and the address packets to it leave from.
struct Route {
  std::string interface;  ///< e.g. "eth0", "veth1", "lo"
  std::string address;    ///< numeric, e.g. "10.0.0.2"
  std::string target;     ///< `host` resolved, numeric
  bool loopback = false;
};

/// Resolves `host` and asks the kernel for the route to it (a UDP socket's connect sends nothing).
/// Throws DistributedError naming `host` when it does not resolve or no route reaches it.
Route route_to(const std::string& host, int port);

/// What Gloo should bind to: {interface, why} for the log, or an empty interface for torch.distributed's
/// default (one host, MASTER_ADDR on loopback). `ifname_env` is GLOO_SOCKET_IFNAME (empty = unset).
/// Throws DistributedError when the world spans hosts (LOCAL_WORLD_SIZE < WORLD_SIZE) and MASTER_ADDR is
/// reached over loopback, or when MASTER_ADDR does not resolve or is unreachable.
std::pair<std::string, std::string> choose_gloo_interface(const LaunchEnv& env, const std::string& ifname_env);

}  // namespace lm::dist
