#include "dist/interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/errors.h"

namespace lm::dist {
namespace {

std::string numeric(const sockaddr* a, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(a, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

// Closes a socket when it goes out of scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Route route_to(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    throw DistributedError("[dist] MASTER_ADDR '" + host + "' does not resolve: " + ::gai_strerror(rc) +
                           ". Hint: give the rendezvous host's address, or a name every host resolves.");
  }
  Route r;
  std::string why;
  for (addrinfo* a = res; a && r.interface.empty(); a = a->ai_next) {
    Fd s{::socket(a->ai_family, SOCK_DGRAM, 0)};
    r.target = numeric(a->ai_addr, a->ai_addrlen);
    if (s.fd < 0 || ::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(s.fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    r.address = numeric(reinterpret_cast<sockaddr*>(&local), len);
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) != 0) continue;
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (i->ifa_addr && same_address(i->ifa_addr, reinterpret_cast<sockaddr*>(&local))) {
        r.interface = i->ifa_name;
        r.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
        break;
      }
    }
    ::freeifaddrs(ifs);
  }
  ::freeaddrinfo(res);
  if (r.interface.empty()) {
    throw DistributedError("[dist] no route from this host reaches MASTER_ADDR '" + host + "' (" + r.target + ")" +
                           (why.empty() ? std::string() : ": " + why) +
                           ". Hint: check the address and this host's network; set GLOO_SOCKET_IFNAME to the "
                           "interface that reaches the other hosts.");
  }
  return r;
}

std::pair<std::string, std::string> choose_gloo_interface(const LaunchEnv& env, const std::string& ifname_env) {
  if (!ifname_env.empty()) return {ifname_env, "GLOO_SOCKET_IFNAME"};
  const Route r = route_to(env.master_addr, env.master_port);
  const bool spans_hosts = env.local_world_size > 0 && env.local_world_size < env.world_size;
  if (r.loopback) {
    if (spans_hosts) {
      throw DistributedError(
          "[dist] the run spans hosts (WORLD_SIZE " + std::to_string(env.world_size) + ", LOCAL_WORLD_SIZE " +
          std::to_string(env.local_world_size) + ") but MASTER_ADDR '" + env.master_addr + "' (" + r.target +
          ") is reached over the loopback interface '" + r.interface + "': the other hosts could never reach it. "
          "Hint: set MASTER_ADDR (torchrun --master_addr) to rank 0's address on the network the hosts share; "
          "torchrun's c10d rendezvous sets it to the rendezvous host's hostname, which must then resolve to that "
          "address (or use static rendezvous). GLOO_SOCKET_IFNAME names the interface on that network (=lo for "
          "several nodes on one machine).");
    }
    return {"", ""};  // one host over loopback: torch.distributed's default, as before
  }
  return {r.interface, "the interface whose route reaches MASTER_ADDR " + env.master_addr + " (" + r.target +
                           ", from " + r.address + "); GLOO_SOCKET_IFNAME is unset"};
}

}  // namespace lm::dist
