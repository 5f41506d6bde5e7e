#include "dist/local_launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

#include "util/clock.h"
#include "util/errors.h"

extern char** environ;

namespace lm::dist {
namespace {

volatile std::sig_atomic_t g_signal = 0;
extern "C" void remember_signal(int sig) { g_signal = sig; }


// The environment of rank `rank`: ours without any launch variable, plus the group's.
std::vector<std::string> worker_env(int rank, int nproc, int port) {
  static const char* kOwn[] = {"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
                               "MASTER_PORT=", "TORCHELASTIC_USE_AGENT_STORE="};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    bool own = false;
    for (const char* k : kOwn) own = own || std::strncmp(*e, k, std::strlen(k)) == 0;
    if (!own) env.emplace_back(*e);
  }
  for (auto kv : {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                  "WORLD_SIZE=" + std::to_string(nproc), "LOCAL_WORLD_SIZE=" + std::to_string(nproc),
                  std::string("MASTER_ADDR=127.0.0.1"), "MASTER_PORT=" + std::to_string(port)}) {
    env.push_back(kv);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

pid_t start_worker(const std::string& exe, std::vector<std::string> argv, std::vector<std::string> env) {
  auto cargv = c_strings(argv);
  auto cenv = c_strings(env);
  const pid_t pid = ::fork();
  if (pid < 0) throw DistributedError(std::string("[launch] fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);                  // a terminal's Ctrl-C reaches the launcher only; it forwards it once
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a launcher that dies stops its ranks (they save and exit)
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    ::execve(exe.c_str(), cargv.data(), cenv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw DistributedError(std::string("[launch] no free loopback port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

int combined_exit_code(const std::vector<RankExit>& ranks) {
  bool same = true;
  for (auto& r : ranks) same = same && r.signal == 0 && r.code == ranks.front().code;
  if (same && !ranks.empty()) return ranks.front().code;
  for (auto& r : ranks) {
    if (r.signal == 0 && r.code != 0 && r.code != static_cast<int>(ExitCode::kDistributed)) return r.code;
  }
  return static_cast<int>(ExitCode::kDistributed);
}

std::vector<std::string> without_nproc(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;  // and its value
    } else if (args[i].rfind("--nproc=", 0) != 0) {
      out.push_back(args[i]);
    }
  }
  return out;
}

int run_local_group(int nproc, const std::string& exe, const std::vector<std::string>& args, int64_t grace_s) {
  const int port = free_port();
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  spdlog::info("launch: {} ranks on this machine, rendezvous 127.0.0.1:{}", nproc, port);
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> argv{exe};
    argv.insert(argv.end(), args.begin(), args.end());
    pids.push_back(start_worker(exe, argv, worker_env(r, nproc, port)));
  }
  std::vector<std::optional<RankExit>> done(nproc);
  int running = nproc, forwarded = 0;
  bool kill_armed = false;  // a rank failed: the others get grace_s seconds
  util::Clock::time_point kill_at;
  while (running > 0) {
    if (g_signal != 0 && forwarded == 0) {
      forwarded = g_signal;
      for (int r = 0; r < nproc; ++r) if (!done[r]) ::kill(pids[r], forwarded);
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      if (kill_armed && util::Clock::now() > kill_at) {
        spdlog::error("launch: ranks still running {} s after one failed; killing them", grace_s);
        for (int r = 0; r < nproc; ++r) if (!done[r]) ::kill(pids[r], SIGKILL);
        kill_armed = false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    for (int r = 0; r < nproc; ++r) {
      if (pids[r] != pid) continue;
      RankExit e{WIFEXITED(status) ? WEXITSTATUS(status) : 0, WIFSIGNALED(status) ? WTERMSIG(status) : 0};
      done[r] = e;
      --running;
      if (e.signal != 0) spdlog::error("launch: rank {} was killed by signal {}", r, e.signal);
      if (e.code != 0 || e.signal != 0) {
        if (e.signal == 0) spdlog::info("launch: rank {} exited with code {}", r, e.code);
        if (!kill_armed) kill_at = util::Clock::now() + std::chrono::seconds(grace_s);
        kill_armed = true;
      }
    }
  }
  std::vector<RankExit> exits;
  for (auto& d : done) exits.push_back(*d);
  return combined_exit_code(exits);
}

}  // namespace lm::dist
