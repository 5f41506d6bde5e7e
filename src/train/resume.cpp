#include "train/resume.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "dist/group.h"
#include "tokenizer/extend.h"
#include "tokenizer/model_spec.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::train {
namespace fs = std::filesystem;

namespace {

template <typename T>
void compare(std::vector<std::string>& out, const std::string& key, const T& saved, const T& now) {
  if (!(saved == now)) out.push_back(key + ": checkpoint " + saved + " vs config " + now);
}

std::string s(int64_t v) { return std::to_string(v); }
std::string short_hash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) : (h.empty() ? "(none)" : h); }

[[noreturn]] void refuse(const fs::path& ckpt, const std::vector<std::string>& problems) {
  throw CheckpointError(util::problem_list("[resume] " + ckpt.string() + " does not match this run:", problems,
                                           "Hint: resume with the original config, or start a new run.dir."));
}

// Resuming a step checkpoint of run_dir: point `latest` at it now, so a crash before the next save makes
// `--resume auto` (and `sample --checkpoint RUN`) come back to this branch, not to abandoned or invalid
// newer checkpoints.
void point_latest_at(const fs::path& run_dir, const fs::path& dir) {
  std::error_code ec;
  if (!fs::equivalent(dir.parent_path(), run_dir, ec) || dir.filename().string().rfind("step_", 0) != 0) return;
  std::vector<std::string> newer;  // one warning naming them all
  for (auto& other : checkpoint::list_checkpoints(run_dir)) {
    if (other.filename() > dir.filename()) newer.push_back(other.filename().string());
  }
  if (!newer.empty()) {
    spdlog::warn("resume: {} in {} {} newer than {} and belong{} to the abandoned branch (retention will prune {})",
                 util::join(newer, ", "), run_dir.string(), newer.size() == 1 ? "is" : "are", dir.filename().string(),
                 newer.size() == 1 ? "s" : "", newer.size() == 1 ? "it" : "them");
  }
  util::atomic_write_file(run_dir / "latest", dir.filename().string() + "\n");
}

}  // namespace

ResumeSpec ResumeSpec::parse(const std::string& arg) {
  if (arg.empty()) return {};
  if (arg == "auto") return {Kind::kAuto, {}};
  return {Kind::kPath, arg};
}

fs::path select_resume_checkpoint(const fs::path& run_dir, const ResumeSpec& spec, Overwrite overwrite) {
  if (spec.kind == ResumeSpec::Kind::kFresh) return {};
  if (spec.kind == ResumeSpec::Kind::kPath) {
    fs::path dir = checkpoint::resolve_checkpoint(spec.path);
    checkpoint::verify_checkpoint(dir);
    point_latest_at(run_dir, dir);
    return dir;
  }
  for (auto& n : checkpoint::remove_stale_temps(run_dir)) {
    spdlog::warn("resume: removed unfinished save {}", (run_dir / n).string());
  }
  auto all = checkpoint::list_checkpoints(run_dir);
  // `latest` first (it names the branch being trained), then the rest newest first.
  if (fs::is_regular_file(run_dir / "latest")) {
    try {
      fs::path named = checkpoint::resolve_checkpoint(run_dir);
      auto it = std::find(all.begin(), all.end(), named);
      if (it != all.end()) std::rotate(it, it + 1, all.end());
    } catch (const CheckpointError&) {
      // `latest` names nothing valid: fall back to the newest
    }
  }
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      checkpoint::verify_checkpoint(*it);
      point_latest_at(run_dir, *it);
      return *it;
    } catch (const CheckpointError& e) {
      spdlog::warn("resume: skipping invalid checkpoint: {}", e.what());
    }
  }
  if (!all.empty() && overwrite == Overwrite::kRefuse) {
    throw CheckpointError("[resume] auto: expected a valid checkpoint in " + run_dir.string() + ", got " +
                          std::to_string(all.size()) + " that fail verification (warned above). Hint: restore one, "
                          "resume from a path, or add --overwrite to delete them and start fresh.");
  }
  spdlog::info("resume auto: no valid checkpoint in {}, starting fresh", run_dir.string());
  return {};
}

namespace {

void preflight_resume(const TrainJob& job, const fs::path& ckpt, const data::CorpusSplit* split) {
  // Every architecture field (model/gpt_config.h visit_fields); the vocabulary size is the tokenizer's.
  model::GptConfig now = job.model;
  now.vocab_size = job.tokenizer.vocab_size;
  std::vector<std::string> p;
  if (!job.init_from.empty() && job.new_pieces.active()) {
    // A fine-tune that appended pieces: the checkpoint's tokenizer must be the extension this config asks for
    // (checked here, before the run's tokenizer and token files would be made again).
    const auto e = tokenizer::read_extension(ckpt / "tokenizer.model");
    if (e.old_vocab > 0) now.vocab_size = e.vocab_size();
    if (!tokenizer::extension_is_current(ckpt / "tokenizer.model", job.init_from / "tokenizer.model", job.train_files,
                                         job.new_pieces, job.tokenizer, job.run.seed)) {
      p.push_back("finetune.new_pieces: the checkpoint's tokenizer is not the extension this config asks for (other "
                  "pieces, text, settings or seed)");
    }
  }
  const auto was = model::field_texts(checkpoint::read_arch(ckpt)), is = model::field_texts(now);
  for (size_t i = 0; i < was.size(); ++i) {
    const std::string& key = was[i].first;
    compare(p, key == "vocab_size" ? "tokenizer.vocab_size" : "model." + key, was[i].second, is[i].second);
  }
  if (job.init_from.empty()) {  // a fine-tune keeps its base's tokenizer, whatever the config's section says
    // The tokenizer's own settings, read from the checkpoint's copy: a changed one would retrain the
    // tokenizer, and the ids would no longer mean the token table's rows.
    tokenizer::ModelSpec spec;
    try {
      spec = tokenizer::read_model_spec(ckpt / "tokenizer.model");
    } catch (const DataError& e) {  // the checkpoint's own file is bad
      throw CheckpointError("[resume] " + ckpt.string() + ": " + e.what());
    }
    compare(p, "tokenizer.model_type", spec.algorithm, to_string(job.tokenizer.model_type));
    compare(p, "tokenizer.byte_fallback", std::string(spec.byte_fallback ? "true" : "false"),
            std::string(job.tokenizer.byte_fallback ? "true" : "false"));
    compare(p, "tokenizer.normalization", tokenizer::normalization_name(spec), to_string(job.tokenizer.normalization));
  }
  const checkpoint::TrainerState st = checkpoint::read_trainer_state(ckpt);
  // Rank r's slice of a global batch depends on the world size: a resume with another one would not
  // continue the same run.
  compare(p, "processes (WORLD_SIZE)", s(st.world_size), s(job.group ? job.group->size() : 1));
  auto text_hash = [](const tokenizer::CorpusFiles& files) {
    for (const auto& f : files) {
      if (!fs::is_regular_file(f)) return std::string("(missing)");
    }
    return tokenizer::corpus_sha256(tokenizer::hash_corpus(files));
  };
  const std::string train = split ? split->train_sha256 : text_hash(job.train_files);
  const std::string val = split ? split->val_sha256 : text_hash(job.val_files);
  compare(p, split ? "data.train (sha256 of its training lines)" : "data.train (sha256)",
          short_hash(st.data.train_source_sha256), short_hash(train));
  compare(p, split ? "data.train (sha256 of its held-out lines)" : "data.val (sha256)",
          short_hash(st.data.val_source_sha256), short_hash(val));
  if (!p.empty()) refuse(ckpt, p);
}

// A new run never silently replaces an earlier run's checkpoints.
void clear_earlier_run(const TrainJob& job) {
  const auto old = checkpoint::list_checkpoints(job.run_dir());
  if (old.empty()) return;
  if (job.overwrite == Overwrite::kRefuse) {
    throw ConfigError("[train] run.dir '" + job.run_dir().string() + "' already holds " + std::to_string(old.size()) +
                      " checkpoint(s), newest " + old.back().filename().string() +
                      ": expected a new or empty run directory. Hint: --resume auto continues it, --overwrite "
                      "deletes it, or choose another run.dir.");
  }
  for (auto& dir : old) fs::remove_all(dir);
  fs::remove_all(job.run_dir() / "best");
  fs::remove(job.run_dir() / "latest");
  spdlog::warn("--overwrite: deleted {} checkpoint(s) of an earlier run in {}", old.size(), job.run_dir().string());
}

}  // namespace

void check_run_start(const TrainJob& job, const data::CorpusSplit* split) {
  if (job.resume_from.empty()) {
    clear_earlier_run(job);
  } else {
    preflight_resume(job, job.resume_from, split);
  }
}

void check_data_identity(const checkpoint::DataIdentity& saved, const checkpoint::DataIdentity& now) {
  // Every field of the identity's list (checkpoint.h visit_identity_fields), so one added there is compared too.
  auto texts = [](const checkpoint::DataIdentity& d) {
    std::vector<std::pair<std::string, std::string>> out;
    checkpoint::visit_identity_fields(d, [&](const char* key, const auto& v, checkpoint::Presence) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
        out.emplace_back(key, short_hash(v));
      } else {
        out.emplace_back(key, std::to_string(v));
      }
    });
    return out;
  };
  auto label = [](const std::string& key) -> std::string {
    if (key == "tokenizer_sha256") return "tokenizer (sha256)";
    if (key == "train_tokens") return "train.bin tokens";
    if (key == "val_tokens") return "val.bin tokens";
    if (key == "pairs") return "finetune pairs (objective contrastive: next_line, or the files' sha256)";
    return "data." + key;
  };
  const auto was = texts(saved), is = texts(now);
  std::vector<std::string> p;
  for (size_t i = 0; i < was.size(); ++i) compare(p, label(was[i].first), was[i].second, is[i].second);
  if (!p.empty()) refuse("checkpoint", p);
}

}  // namespace lm::train
