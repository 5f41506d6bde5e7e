// One multi-process run's process group: LibTorch's torch.distributed c10d (a TCPStore rendezvous, then
// ProcessGroupGloo), with what lmtrain adds on top: every rank's arrival checked by name, a heartbeat per
// rank so a lost rank is named, and "rank 0 does it, the others wait for the outcome" for the work only
// rank 0 does (data preparation, saves, reports). docs/ARCHITECTURE.md "More than one process".
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist_config.h"
#include "dist/launch_env.h"

namespace lm::dist {

class Group {
 public:
  /// Joins the group `env` describes: connects to the rendezvous store (hosted by rank 0, or by torchrun's
  /// agent), checks that every rank arrives within cfg.timeout_s, then builds the Gloo process group.
  /// Throws DistributedError naming the ranks that did not join, or the store that could not be reached.
  Group(const LaunchEnv& env, const DistConfig& cfg);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  bool is_root() const { return env_.rank == 0; }
  const LaunchEnv& env() const { return env_; }
  const DistConfig& config() const { return cfg_; }

  /// Rank 0's values of `tensors`, in place on every rank (CPU tensors). Throws DistributedError.
  void broadcast(std::vector<torch::Tensor>& tensors);
  /// Sum over ranks, in place. Throws DistributedError.
  void allreduce_sum(torch::Tensor& t);
  /// Starts a sum over ranks of one flat tensor; finish it with wait(). Ranks must start their reductions
  /// in the same order.
  c10::intrusive_ptr<c10d::Work> allreduce_async(torch::Tensor& t);
  /// Waits for a started collective. Throws DistributedError naming the lost rank(s) when it failed.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);

  /// Work only rank 0 does, which the others wait for without a time limit while rank 0's heartbeat goes
  /// on: rank 0 runs `fn` and publishes its result (or its error's exit code and message); every rank
  /// returns the result, or throws the same kind of error (util/errors.h throw_error). `key` names this
  /// occurrence and must be unique within the run.
  std::string on_root(const std::string& key, const std::function<std::string()>& fn);

  /// Every rank's `value` for `key` (unique within the run), in rank order.
  std::vector<std::string> all_gather(const std::string& key, const std::string& value);

  /// The end of a successful run: every rank says it is done with the store; rank 0, when it hosts the
  /// store, waits (up to dist.timeout_s) until all have, so no rank loses the store mid-call.
  void leave();

  /// Throws DistributedError "[dist] <what> failed: ..." naming the ranks whose heartbeat stopped (or the
  /// unreachable store). After this the group is not used again.
  [[noreturn]] void fail(const std::string& what, const std::string& cause);

 private:
  void join_all();
  void heartbeat_loop();
  void stop_heartbeat();
  std::vector<int> silent_ranks();
  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key);
  void wait_for_key(const std::string& key, const std::string& what);
  std::vector<std::string> ranks_missing(const std::string& base, const std::string& what);

  LaunchEnv env_;
  DistConfig cfg_;
  c10::intrusive_ptr<c10d::Store> store_;      ///< rendezvous keys (prefixed for torchrun's agent store)
  c10::intrusive_ptr<c10d::Store> hb_store_;   ///< the heartbeat thread's own connection
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::string gloo_interface_;                 ///< choose_gloo_interface's choice ("" = the default device)
  std::thread heartbeat_;
  std::mutex hb_mutex_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;
  std::atomic<bool> failed_{false};
};

}  // namespace lm::dist
