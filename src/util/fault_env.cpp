// Test builds only (CMake option LMTRAIN_FAULT_INJECTION): fault hooks from LMTRAIN_TEST_* variables (util/faults.h).
// Not part of lmtrain_core, so the release binary cannot call it.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "util/faults.h"
#include "util/signals.h"

namespace lm::util {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int64_t number(const char* name) { return std::atoll(env(name).c_str()); }

class EnvironmentFaults : public FaultHooks {
 public:
  EnvironmentFaults()
      : nan_step_(number("LMTRAIN_TEST_NAN_STEP")),
        nan_rank_(env("LMTRAIN_TEST_NAN_RANK").empty() ? -1 : number("LMTRAIN_TEST_NAN_RANK")),
        inf_grad_step_(number("LMTRAIN_TEST_INF_GRAD_STEP")),
        fail_save_(env("LMTRAIN_TEST_FAIL_SAVE")),
        kill_save_(env("LMTRAIN_TEST_KILL_SAVE")),
        hold_dir_(env("LMTRAIN_TEST_HOLD_DIR")) {
    std::istringstream list(env("LMTRAIN_TEST_HOLD"));
    for (std::string e; std::getline(list, e, ',');) {
      if (!e.empty()) holds_.insert(e);
    }
    if (number("WORLD_SIZE") > 1) rank_suffix_ = "@" + env("RANK");
  }

  void reached(const std::string& event) override {
    if (!kill_save_.empty() && event == "save:" + kill_save_) ::raise(SIGKILL);  // as a power cut or kill -9
    if (holds_.erase(event) == 0) return;  // not held, or held once already
    // Say where we are, then wait for a stop signal that arrives from now on, or the go file.
    const int signals = stop_signals_received();
    const fs::path marker = fs::path(hold_dir_.empty() ? "." : hold_dir_) / (event + rank_suffix_);
    std::ofstream(marker) << ::getpid() << "\n";
    const fs::path go = marker.string() + ".go";
    while (stop_signals_received() == signals && !fs::exists(go)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  bool nan_at(int64_t step, int rank) const override {
    return step == nan_step_ && (nan_rank_ < 0 || nan_rank_ == rank);
  }
  bool inf_grad_at(int64_t step) const override { return step == inf_grad_step_; }
  bool fail_save(const std::string& name) const override { return name == fail_save_; }

 private:
  int64_t nan_step_, nan_rank_, inf_grad_step_;
  std::string fail_save_, kill_save_, hold_dir_, rank_suffix_;
  std::set<std::string> holds_;
};

}  // namespace

void install_environment_faults() { install_fault_hooks(std::make_unique<EnvironmentFaults>()); }

}  // namespace lm::util
