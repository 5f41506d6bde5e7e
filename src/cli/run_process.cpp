// How a `train` or `finetune` process takes part in its run: alone, as one rank of a process group (the
// launch variables say so), or as the launcher of `--nproc N` local ranks. Rank 0 holds the run lock.
#include <spdlog/spdlog.h>

#include <thread>

#include "cli/jobs.h"
#include "dist/group.h"
#include "dist/local_launch.h"
#include "tokenizer/corpus_text.h"
#include "util/errors.h"
#include "util/logging.h"
#include "util/threads.h"

namespace lm::cli {
namespace {

std::vector<std::string> g_command_line;

}  // namespace

void set_command_line(int argc, char** argv) { g_command_line.assign(argv, argv + argc); }

RunProcess::RunProcess(const config::RunConfig& cfg) {
  // The texts first: a missing corpus is reported before the run directory is created or locked.
  tokenizer::list_corpus_files(cfg.data.train, "training corpus");
  if (!cfg.data.val.empty()) tokenizer::list_corpus_files(cfg.data.val, "validation text");
  if (auto env = dist::launch_env_from_process(); env && env->world_size > 1) {
    util::set_log_rank(env->rank);
    group_ = std::make_unique<dist::Group>(*env, cfg.dist);
  } else if (env) {
    spdlog::info("dist: WORLD_SIZE=1: one process, no process group");
  }
  if (is_root()) lock_ = std::make_unique<util::RunLock>(cfg.run.dir);
  // The other ranks hold no lock: the files are rank 0's, and they only run while it does.
}

RunProcess::~RunProcess() = default;

bool RunProcess::is_root() const { return !group_ || group_->is_root(); }

void RunProcess::finish() {
  if (group_) group_->leave();
}

void launch_local_ranks(int nproc, const config::RunConfig& cfg) {
  if (dist::launch_env_from_process()) {
    throw ConfigError("[launch] --nproc " + std::to_string(nproc) + " inside a launch that already set WORLD_SIZE: "
                      "expected one launcher, got two. Hint: drop --nproc under torchrun, SLURM or Kubernetes.");
  }
  const unsigned cores = static_cast<unsigned>(util::usable_cores());
  const int per_rank = std::max(cfg.run.threads, util::resolve_blas_threads(cfg.run.blas_threads, nproc));
  if (static_cast<unsigned>(nproc * per_rank) > cores) {
    spdlog::warn("launch: {} ranks x {} threads = {} threads on {} cores: oversubscribed cores run far slower",
                 nproc, per_rank, nproc * per_rank, cores);
  }
  std::vector<std::string> args(g_command_line.begin() + (g_command_line.empty() ? 0 : 1), g_command_line.end());
  const int code = dist::run_local_group(nproc, "/proc/self/exe", dist::without_nproc(args), cfg.dist.timeout_s + 30);
  if (code != 0) {
    throw_error(static_cast<ExitCode>(code), "[launch] the " + std::to_string(nproc) + " ranks ended with exit code " +
                                                 std::to_string(code) + " (their messages are above)");
  }
}

}  // namespace lm::cli
