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
namespace fs = std::filesystem;
namespace {

std::vector<std::string> g_command_line;

// Whether `child` is `parent` or inside it (both resolved as far as they exist).
bool within(const fs::path& child, const fs::path& parent) {
  std::error_code ec;
  const fs::path rel = fs::weakly_canonical(child, ec).lexically_relative(fs::weakly_canonical(parent, ec));
  return !rel.empty() && rel.native().rfind("..", 0) != 0;
}

// run.dir inside a corpus folder would make the run's own files (token data, checkpoints) corpus files.
void refuse_run_dir_in_corpus(const std::string& key, const std::string& spec, const tokenizer::CorpusFiles& files,
                              const fs::path& run_dir) {
  std::error_code ec;
  bool inside = fs::is_directory(spec, ec) && within(run_dir, spec);
  for (const auto& f : files) inside = inside || within(f, run_dir);
  if (inside) {
    throw ConfigError("[data] " + key + " '" + spec + "' holds run.dir '" + run_dir.string() + "': expected run.dir " +
                      "outside the corpus (its token data and checkpoints would be read as text). Hint: move "
                      "run.dir, or the corpus.");
  }
}

}  // namespace

void set_command_line(int argc, char** argv) { g_command_line.assign(argv, argv + argc); }

RunProcess::RunProcess(const config::RunConfig& cfg) {
  // The texts first: a missing corpus is reported before the run directory is created or locked.
  refuse_run_dir_in_corpus("data.train", cfg.data.train, tokenizer::list_corpus_files(cfg.data.train, "training corpus"),
                           cfg.run.dir);
  if (!cfg.data.val.empty()) {
    refuse_run_dir_in_corpus("data.val", cfg.data.val, tokenizer::list_corpus_files(cfg.data.val, "validation text"),
                             cfg.run.dir);
  }
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
