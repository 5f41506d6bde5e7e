#include "dist/launch_env.h"

#include <cstdlib>
#include <vector>

#include "util/errors.h"
#include "util/text.h"

namespace lm::dist {
namespace {

// A whole-string decimal integer in [lo, hi], or nullopt.
std::optional<long> parse_int(const std::string& s, long lo, long hi) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  const long v = std::stol(s);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace

std::optional<LaunchEnv> read_launch_env(const std::function<std::optional<std::string>(const char*)>& get) {
  const auto world = get("WORLD_SIZE");
  if (!world) return std::nullopt;
  LaunchEnv env;
  std::vector<std::string> problems;
  auto number = [&](const char* name, const std::optional<std::string>& v, long lo, long hi, int& out) {
    if (!v) return problems.push_back(std::string(name) + ": expected it to be set, got nothing");
    if (auto n = parse_int(*v, lo, hi)) {
      out = static_cast<int>(*n);
    } else {
      problems.push_back(std::string(name) + ": expected an integer in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "], got '" + *v + "'");
    }
  };
  number("WORLD_SIZE", world, 1, 65536, env.world_size);
  number("RANK", get("RANK"), 0, env.world_size - 1, env.rank);
  if (auto local = get("LOCAL_RANK")) number("LOCAL_RANK", local, 0, 65535, env.local_rank);
  if (auto local = get("LOCAL_WORLD_SIZE")) number("LOCAL_WORLD_SIZE", local, 1, env.world_size, env.local_world_size);
  const auto addr = get("MASTER_ADDR");
  const auto port = get("MASTER_PORT");
  if (env.world_size > 1 || addr || port) {
    if (!addr || addr->empty()) {
      problems.push_back("MASTER_ADDR: expected the rendezvous host, got nothing");
    } else {
      env.master_addr = *addr;
    }
    number("MASTER_PORT", port, 1, 65535, env.master_port);
  }
  if (auto agent = get("TORCHELASTIC_USE_AGENT_STORE"); agent && *agent == "True") {
    env.agent_store = true;
    env.store_prefix = "/worker/attempt_" + get("TORCHELASTIC_RESTART_COUNT").value_or("0");
  }
  if (!problems.empty()) {
    throw ConfigError(util::problem_list("[dist] the launch variables are not usable:", problems,
                                         "Hint: launch with `lmtrain train --nproc N`, or torchrun, which set them all."));
  }
  return env;
}

std::optional<LaunchEnv> launch_env_from_process() {
  return read_launch_env([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
}

}  // namespace lm::dist
