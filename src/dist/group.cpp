#include "dist/group.h"

#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <sstream>

#include "dist/interface.h"
#include "util/clock.h"
#include "util/errors.h"
#include "util/text.h"

namespace lm::dist {
namespace {

using namespace std::chrono_literals;
using util::Clock;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string store_name(const LaunchEnv& env) {
  return env.master_addr + ":" + std::to_string(env.master_port) +
         (env.agent_store ? " (torchrun's agent hosts it)" : " (rank 0 hosts it)");
}

// A client (or, on rank 0 without torchrun's agent store, the server) of the rendezvous TCPStore.
c10::intrusive_ptr<c10d::Store> connect_store(const LaunchEnv& env, const DistConfig& cfg, bool host) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(env.master_port);
  o.isServer = host;
  o.numWorkers = static_cast<size_t>(env.world_size);
  o.waitWorkers = false;  // arrivals are checked by name below, so a missing rank can be named
  o.timeout = std::chrono::seconds(cfg.timeout_s);
  o.multiTenant = true;
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
  } catch (const std::exception& e) {
    throw DistributedError("[dist] rank " + std::to_string(env.rank) + " could not " + (host ? "host" : "reach") +
                           " the rendezvous store at " + store_name(env) + " within " +
                           std::to_string(cfg.timeout_s) + " s: " + first_line(e.what()) +
                           ". Hint: check MASTER_ADDR/MASTER_PORT, and that rank 0 started; a port in use needs "
                           "another MASTER_PORT.");
  }
  if (env.agent_store) return c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, tcp);
  return tcp;
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& ifname) {
  if (!ifname.empty()) return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string heartbeat_key(int r) { return "lmtrain/heartbeat/" + std::to_string(r); }

}  // namespace

Group::Group(const LaunchEnv& env, const DistConfig& cfg) : env_(env), cfg_(cfg) {
  // Before the store: an unresolvable MASTER_ADDR, or hosts that would only meet over loopback, are refused
  // at once instead of after a timeout. GLOO_SOCKET_IFNAME is the variable torch.distributed reads.
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  const auto [interface, why] = choose_gloo_interface(env, ifname ? ifname : "");
  gloo_interface_ = interface;
  if (!why.empty()) spdlog::info("dist: rank {}: Gloo on interface {}: {}", env.rank, interface, why);
  store_ = connect_store(env, cfg, is_root() && !env.agent_store);
  hb_store_ = connect_store(env, cfg, false);
  set("lmtrain/joined/" + std::to_string(rank()), std::to_string(::getpid()));
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
  try {
    join_all();
  } catch (...) {
    stop_heartbeat();  // no destructor runs for a constructor that throws
    throw;
  }
  spdlog::info("dist: rank {} of {} joined (Gloo, store {}, timeout {} s)", rank(), size(), store_name(env),
               cfg.timeout_s);
}

// Every rank's arrival, checked by name within dist.timeout_s, then the Gloo process group.
void Group::join_all() {
  const auto missing = ranks_missing("lmtrain/joined/", "joining");
  if (!missing.empty()) {
    failed_ = true;
    throw DistributedError("[dist] rank(s) " + util::join(missing, ", ") + " of " + std::to_string(size()) +
                           " never joined within dist.timeout_s = " + std::to_string(cfg_.timeout_s) +
                           " s (store " + store_name(env_) + "). Hint: start every rank with the same "
                           "MASTER_ADDR, MASTER_PORT and WORLD_SIZE.");
  }
  auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(cfg_.timeout_s));
  opts->devices.push_back(gloo_device(gloo_interface_));
  opts->threads = 2;
  try {
    pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank(), size(), opts);
  } catch (const std::exception& e) {
    fail("joining the Gloo process group", e.what());
  }
}

void Group::stop_heartbeat() {
  {
    std::lock_guard<std::mutex> lock(hb_mutex_);
    hb_stop_ = true;
  }
  hb_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

Group::~Group() {
  stop_heartbeat();
  // After a failure a collective may still wait on a lost peer; the process is exiting, so do not wait for
  // it in the process group's destructor.
  if (failed_ && pg_) pg_.release();
}

void Group::heartbeat_loop() {
  std::unique_lock<std::mutex> lock(hb_mutex_);
  while (!hb_stop_) {
    try {
      hb_store_->add(heartbeat_key(rank()), 1);
    } catch (const std::exception&) {
      // the store is gone; fail() names its host when a collective or wait notices
    }
    hb_cv_.wait_for(lock, 200ms, [this] { return hb_stop_; });
  }
}

// Ranks whose heartbeat counter does not move over a short window (a second or two).
std::vector<int> Group::silent_ranks() {
  const auto window = std::min<std::chrono::milliseconds>(std::chrono::seconds(cfg_.timeout_s), 1500ms);
  std::vector<int64_t> before(size());
  for (int r = 0; r < size(); ++r) before[r] = store_->add(heartbeat_key(r), 0);
  std::this_thread::sleep_for(window);
  std::vector<int> silent;
  for (int r = 0; r < size(); ++r) {
    if (store_->add(heartbeat_key(r), 0) == before[r]) silent.push_back(r);
  }
  return silent;
}

void Group::fail(const std::string& what, const std::string& cause) {
  failed_ = true;
  std::string lost;
  try {
    std::vector<std::string> names;
    for (int r : silent_ranks()) names.push_back(std::to_string(r));
    lost = names.empty() ? "no rank's heartbeat stopped" : "lost rank(s) " + util::join(names, ", ") + " (heartbeat stopped)";
  } catch (const std::exception&) {
    lost = env_.agent_store ? "lost torchrun's agent (its rendezvous store is unreachable)"
                            : "lost rank 0 (the rendezvous store it hosts is unreachable)";
  }
  throw DistributedError("[dist] " + what + " failed on rank " + std::to_string(rank()) + ": " + lost +
                         "; cause: " + first_line(cause) +
                         ". Hint: the last committed checkpoint is intact; `--resume auto` continues from it.");
}

void Group::broadcast(std::vector<torch::Tensor>& tensors) {
  for (auto& t : tensors) {
    std::vector<torch::Tensor> one{t};
    wait(pg_->broadcast(one), "broadcasting rank 0's parameters");
  }
}

void Group::allreduce_sum(torch::Tensor& t) { wait(allreduce_async(t), "an all-reduce"); }

c10::intrusive_ptr<c10d::Work> Group::allreduce_async(torch::Tensor& t) {
  std::vector<torch::Tensor> one{t};
  try {
    return pg_->allreduce(one);
  } catch (const std::exception& e) {
    fail("starting an all-reduce", e.what());
  }
}

void Group::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
}

void Group::set(const std::string& key, const std::string& value) {
  try {
    store_->set(key, bytes(value));
  } catch (const std::exception& e) {
    fail("writing '" + key + "' to the rendezvous store", e.what());
  }
}

std::string Group::get(const std::string& key) {
  try {
    const auto v = store_->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    fail("reading '" + key + "' from the rendezvous store", e.what());
  }
}

// Waits for `key` as long as rank 0's heartbeat goes on; dist.timeout_s without one ends the wait.
void Group::wait_for_key(const std::string& key, const std::string& what) {
  int64_t beat = -1;
  auto last_change = Clock::now();
  for (;;) {
    try {
      if (store_->check({key})) return;
      const int64_t now = store_->add(heartbeat_key(0), 0);
      if (now != beat) {
        beat = now;
        last_change = Clock::now();
      }
    } catch (const std::exception& e) {
      fail(what, e.what());
    }
    if (Clock::now() - last_change > std::chrono::seconds(cfg_.timeout_s)) fail(what, "rank 0 stopped answering");
    std::this_thread::sleep_for(10ms);
  }
}

std::string Group::on_root(const std::string& key, const std::function<std::string()>& fn) {
  const std::string k = "lmtrain/on_root/" + key;
  if (is_root()) {
    std::string result;
    try {
      result = fn();
    } catch (const Error& e) {
      set(k, "E" + std::to_string(static_cast<int>(e.code())) + " " + e.what());
      throw;
    } catch (const std::exception& e) {
      set(k, "E1 " + first_line(e.what()));
      throw;
    }
    set(k, "K" + result);
    return result;
  }
  wait_for_key(k, "waiting for rank 0 (" + key + ")");
  const std::string v = get(k);
  if (!v.empty() && v[0] == 'K') return v.substr(1);
  const auto space = v.find(' ');
  const int code = std::atoi(v.substr(1, space).c_str());
  throw_error(static_cast<ExitCode>(code), (space == std::string::npos ? v : v.substr(space + 1)) + " (on rank 0)");
}

void Group::leave() {
  try {
    store_->add("lmtrain/left", 1);
    if (!is_root() || env_.agent_store) return;
    const auto deadline = Clock::now() + std::chrono::seconds(cfg_.timeout_s);
    while (store_->add("lmtrain/left", 0) < size() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  } catch (const std::exception&) {
    // the run's work is done and saved; a rank that is already gone changes nothing
  }
}

// The ranks r for which `base`<r> is still not in the store after dist.timeout_s (none: all arrived).
std::vector<std::string> Group::ranks_missing(const std::string& base, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::seconds(cfg_.timeout_s);
  std::vector<std::string> missing;
  try {
    do {
      missing.clear();
      for (int r = 0; r < size(); ++r) {
        if (!store_->check({base + std::to_string(r)})) missing.push_back(std::to_string(r));
      }
      if (!missing.empty()) std::this_thread::sleep_for(5ms);
    } while (!missing.empty() && Clock::now() < deadline);
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
  return missing;
}

std::vector<std::string> Group::all_gather(const std::string& key, const std::string& value) {
  const std::string base = "lmtrain/gather/" + key + "/";
  set(base + std::to_string(rank()), value);
  const auto missing = ranks_missing(base, "gathering " + key);
  if (!missing.empty()) fail("gathering " + key, "rank(s) " + util::join(missing, ", ") + " did not answer");
  std::vector<std::string> out;
  for (int r = 0; r < size(); ++r) out.push_back(get(base + std::to_string(r)));
  return out;
}

}  // namespace lm::dist
