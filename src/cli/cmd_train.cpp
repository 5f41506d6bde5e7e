// `lmtrain train`: config (defaults < YAML < --set) -> TrainJob -> training run.
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/jobs.h"
#include "config/config.h"
#include "data/split.h"
#include "data/token_file.h"
#include "tokenizer/corpus_text.h"
#include "checkpoint/checkpoint.h"
#include "dist/group.h"
#include "train/resume.h"
#include "train/trainer.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::cli {
namespace fs = std::filesystem;

static_assert(config::DataSection::kDefaultShardTokens == static_cast<int64_t>(data::kDefaultShardTokens),
              "data.shard_tokens's default is the token writer's");

namespace {

// No validation text. One training file: the run trains on run.dir/train.txt and validates on run.dir/val.txt,
// both cut from it. Several: whole files are held out.
void set_held_out_split(train::TrainJob& job, const config::RunConfig& cfg) {
  if (job.train_files.size() > 1) {
    const data::FileSplit split = data::hold_out_files(job.train_files, cfg.data.val_fraction, cfg.run.seed);
    spdlog::info("data: held out {} of {} files of '{}' as validation (data.val_fraction {}, run.seed {}): {}",
                 split.val.size(), job.train_files.size(), cfg.data.train, cfg.data.val_fraction, cfg.run.seed,
                 tokenizer::describe_files(split.val));
    job.train_files = split.train;
    job.val_files = split.val;
    return;
  }
  job.split = data::SplitSpec{job.train_files.at(0), cfg.data.val_fraction, cfg.run.seed};
  job.train_files = {job.run_dir() / "train.txt"};
  job.val_files = {job.run_dir() / "val.txt"};
  std::error_code ec;
  for (const auto& part : {job.train_files[0], job.val_files[0]}) {
    if (fs::weakly_canonical(job.split->source, ec) == fs::weakly_canonical(part, ec)) {
      throw ConfigError("[data] data.train '" + cfg.data.train + "' is " + part.string() +
                        ", which a run with data.val empty writes: expected a file outside run.dir. Hint: move it, "
                        "or set data.val.");
    }
  }
}

// data.unit paragraph: the run reads a joined copy of each corpus file, run_dir/paragraphs/ROLE-NNNNN-NAME (written
// by rank 0 before anything else reads them: train::prepare_run_text).
tokenizer::CorpusFiles paragraph_copies(train::TrainJob& job, const tokenizer::CorpusFiles& files, const std::string& role) {
  tokenizer::CorpusFiles out;
  for (size_t i = 0; i < files.size(); ++i) {
    char index[32];
    std::snprintf(index, sizeof index, "-%05zu-", i);
    out.push_back(job.run_dir() / "paragraphs" / (role + index + files[i].filename().string()));
    job.paragraph_copies.emplace_back(files[i], out.back());
  }
  return out;
}

}  // namespace

train::TrainJob make_train_job(const config::RunConfig& cfg, const std::string& yaml, train::Overwrite overwrite,
                               const train::ResumeSpec& resume, dist::Group* group) {
  train::TrainJob job;
  job.run = cfg.run;
  job.train_files = tokenizer::list_corpus_files(cfg.data.train, "training corpus");
  if (!cfg.data.val.empty()) job.val_files = tokenizer::list_corpus_files(cfg.data.val, "validation text");
  job.unit = cfg.data.unit;
  if (job.unit == tokenizer::TextUnit::kParagraph) {
    job.train_files = paragraph_copies(job, job.train_files, "train");
    job.val_files = paragraph_copies(job, job.val_files, "val");
  }
  if (cfg.data.val.empty()) set_held_out_split(job, cfg);
  job.shard_tokens = static_cast<uint64_t>(cfg.data.shard_tokens);
  job.tokenizer = cfg.tokenizer;
  job.model = cfg.model;
  job.train = cfg.train;
  job.checkpoint = cfg.checkpoint;
  job.config_yaml = yaml;
  job.overwrite = overwrite;
  job.group = group;
  if (resume.kind != train::ResumeSpec::Kind::kFresh) {
    // Resolve here so a changed non-architectural setting can be reported against the checkpoint's config.
    // Only rank 0 looks at run.dir (the choice may rewrite `latest`); it tells the others.
    auto select = [&] { return train::select_resume_checkpoint(cfg.run.dir, resume, overwrite).string(); };
    const fs::path from = group ? fs::path(group->on_root("resume", select)) : fs::path(select());
    std::error_code ec;
    if (group && !from.empty() && !fs::is_regular_file(from / "manifest.json", ec)) {
      throw CheckpointError("[resume] rank " + std::to_string(group->rank()) + " cannot see " + from.string() +
                            ", the checkpoint rank 0 resumes from: expected run.dir on storage every host sees. "
                            "Hint: put run.dir on a shared filesystem (NFS, a cluster filesystem) mounted at the "
                            "same path on every host.");
    }
    job.resume_from = from;
    if (!from.empty()) {
      auto saved = config::parse_config(util::read_file(from / "config.yaml", "checkpoint config"),
                                        (from / "config.yaml").string(), {});
      for (auto& [key, was, now] : config::diff_configs(saved, cfg)) {
        const bool checked_later = key.rfind("model.", 0) == 0 || key.rfind("tokenizer.", 0) == 0 ||
                                   key.rfind("data.", 0) == 0;
        if (!checked_later) spdlog::warn("resume: {} changed: checkpoint {} -> now {}", key, was, now);
      }
    }
  }
  return job;
}

namespace {

// Whether metrics.jsonl records the whole-file validation that ends a run at `step`.
bool final_validation_recorded(const fs::path& run_dir, int64_t step) {
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    try {
      const auto j = nlohmann::json::parse(line);
      if (j.value("kind", "") == "val" && j.value("full", false) && j.value("step", int64_t{-1}) == step) return true;
    } catch (const nlohmann::json::exception&) {
      // a torn line: not the record looked for
    }
  }
  return false;
}

}  // namespace

bool already_finished(const train::TrainJob& job, bool root) {
  if (job.resume_from.empty()) return false;
  const auto state = checkpoint::read_trainer_state(job.resume_from);
  if (state.step < job.train.max_steps && !state.early_stopped) return false;
  // a run stopped during its final validation saved the step without it: resuming runs it
  if (!final_validation_recorded(job.run_dir(), state.step)) return false;
  if (root) {
    std::cout << "nothing to do: " << job.resume_from.string() << " is at step " << state.step
              << (state.early_stopped ? " and stopped early (train.early_stopping_patience)"
                                      : " and train.max_steps is " + std::to_string(job.train.max_steps))
              << ", and its final validation is recorded; no checkpoint, config or metrics were written. Hint: raise "
                 "train.max_steps (--set train.max_steps=N) to train further.\n";
  }
  return true;
}

void add_train_commands(CLI::App& app) {
  struct Opts {
    std::string config;
    std::vector<std::string> overrides;
    bool dump = false, list_keys = false, overwrite = false, dry_run = false;
    std::string resume;
    int nproc = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* train = app.add_subcommand("train", "Train a model: tokenizer and token files are made when missing or stale");
  train->add_option("-c,--config", o->config, "YAML config (see configs/ and docs/config.md)");
  train->add_option("--set", o->overrides, "override a key: --set section.key=value (repeatable)")->take_all();
  train->add_flag("--dump-config", o->dump, "print the effective config as YAML and exit");
  train->add_option("--resume", o->resume,
                    "continue a run exactly: `auto` = newest valid checkpoint in run.dir (none: start fresh), "
                    "or a checkpoint/run directory");
  train->add_flag("--overwrite", o->overwrite, "delete checkpoints of an earlier run in run.dir instead of refusing to start");
  train->add_flag("--list-keys", o->list_keys, "print every config key, its default and its meaning (tab-separated) and exit");
  add_nproc_option(train, o->nproc);
  train->add_flag("--dry-run", o->dry_run, "push one batch through the configured model, print every stage's shape, exit");
  train->callback([o] {
    if (o->list_keys) {
      for (auto& k : config::config_keys()) std::cout << k.key << "\t" << k.default_value << "\t" << k.help << "\n";
      return;
    }
    config::RunConfig cfg = config::load_config(o->config, o->overrides);
    const std::string yaml = config::dump_config(cfg);
    if (o->dump) {
      std::cout << yaml;
      return;
    }
    if (o->dry_run) return run_dry_run(cfg);
    if (o->nproc > 1) return launch_local_ranks(o->nproc, cfg);
    RunProcess process(cfg);
    train::TrainJob job = make_train_job(cfg, yaml, o->overwrite ? train::Overwrite::kDelete : train::Overwrite::kRefuse,
                                         train::ResumeSpec::parse(o->resume), process.group());
    if (already_finished(job, process.is_root())) return process.finish();
    spdlog::info("run dir {}, config {}", cfg.run.dir, o->config.empty() ? "(defaults)" : o->config);
    auto result = train::run_training(job);
    process.finish();
    if (!process.is_root()) return;
    if (result.early_stopped) std::cout << "stopped early (train.early_stopping_patience)\n";
    std::cout << "final validation loss " << result.final_val_loss << " nats/token, perplexity "
              << std::exp(result.final_val_loss) << ", " << result.final_val_bpb << " bits/byte after " << result.steps
              << " steps\n"
              << "checkpoint " << result.checkpoint.string() << "\n";
  });
}

}  // namespace lm::cli
