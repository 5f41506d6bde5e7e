// `lmtrain finetune --from CKPT --config CFG`: continue a checkpoint on new text with chosen parameters
// frozen, then show what moved (embedding drift) and what was forgotten (old vs new validation loss).
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/jobs.h"
#include "data/paragraphs.h"
#include "data/prepare.h"
#include "data/split.h"
#include "inspect/drift.h"
#include "train/contrastive_report.h"
#include "train/evaluate.h"
#include "train/finetune.h"
#include "tokenizer/corpus_text.h"
#include "train/trainer.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/text.h"

namespace lm::cli {
namespace fs = std::filesystem;

namespace {

// Where the forgetting report's original validation text comes from.
struct OriginalVal {
  std::optional<data::SplitSpec> split;  ///< the lines the original run held out of its one training file
  tokenizer::CorpusFiles files;          ///< else these files
  bool paragraphs = false;               ///< the original run's data.unit was paragraph: join them first, as it did
};

// The original run held its validation text out of data.train: the forgetting report cuts the same lines
// again (same file, fraction and seed), and says so if they no longer hash as the checkpoint recorded; of
// several training files, it takes the same held-out files.
OriginalVal original_held_out(const config::RunConfig& saved, const fs::path& from) {
  const auto files = tokenizer::list_corpus_files(saved.data.train, "original training corpus (its held-out lines "
                                                  "are the original validation text; or set finetune.original_val)");
  if (files.size() > 1) {
    auto held = data::hold_out_files(files, saved.data.val_fraction, saved.run.seed).val;
    spdlog::info("finetune: the forgetting report validates on the files {} held out of {}: {}", from.string(),
                 saved.data.train, tokenizer::describe_files(held));
    return {std::nullopt, std::move(held), saved.data.unit == tokenizer::TextUnit::kParagraph};
  }
  spdlog::info("finetune: the forgetting report validates on the lines {} held out of {}", from.string(), saved.data.train);
  return {data::SplitSpec{files[0], saved.data.val_fraction, saved.run.seed}, {},
          saved.data.unit == tokenizer::TextUnit::kParagraph};
}

// The checkpoint fixes the architecture and tokenizer: YAML/--set values that say otherwise are errors.
// Returns where the original validation text comes from.
OriginalVal adopt_checkpoint(config::RunConfig& cfg, const fs::path& from) {
  const model::GptConfig arch = checkpoint::read_arch(from);
  const auto saved = config::parse_config(util::read_file(from / "config.yaml", "checkpoint config"),
                                          (from / "config.yaml").string(), {});
  config::RunConfig fixed = cfg;
  fixed.model = arch;
  fixed.tokenizer = saved.tokenizer;
  std::vector<std::string> problems;
  for (auto& [key, ckpt_value, cfg_value] : config::diff_configs(fixed, cfg)) {
    const bool fixed_key = key.rfind("model.", 0) == 0 || key.rfind("tokenizer.", 0) == 0;
    if (fixed_key && cfg.explicit_keys.count(key)) problems.push_back(key + ": checkpoint " + ckpt_value + " vs config " + cfg_value);
  }
  if (!problems.empty()) {
    throw ConfigError(util::problem_list("[finetune] the config contradicts the architecture of " + from.string() + ":",
                                         problems, "Hint: drop these keys; a fine-tune takes them from the checkpoint."));
  }
  cfg.model = arch;
  cfg.tokenizer = saved.tokenizer;
  cfg.finetune.from = from.string();
  if (cfg.finetune.original_val.empty()) cfg.finetune.original_val = saved.data.val;
  if (cfg.finetune.original_val.empty()) return original_held_out(saved, from);
  std::error_code ec;
  if (!fs::exists(cfg.finetune.original_val, ec) && !tokenizer::is_glob_pattern(cfg.finetune.original_val)) {
    // needed only at the end: say so before training
    throw DataError("[finetune] original_val: expected the original corpus's validation text for the forgetting "
                    "report, got '" + cfg.finetune.original_val + "' (no such file). Hint: set finetune.original_val.");
  }
  return {std::nullopt, tokenizer::list_corpus_files(cfg.finetune.original_val, "original validation text"),
          saved.data.unit == tokenizer::TextUnit::kParagraph && cfg.finetune.original_val == saved.data.val};
}

// End-of-run (and periodic) reports against the starting checkpoint.
class Reporter {
 public:
  Reporter(const config::RunConfig& cfg, const fs::path& from, OriginalVal original,
           std::optional<train::ContrastiveSpec> contrastive)
      : cfg_(cfg), run_dir_(cfg.run.dir), base_(checkpoint::load_checkpoint(from)), tok_(base_.tokenizer_model),
        original_(std::move(original)), contrastive_(std::move(contrastive)) {}

  void operator()(model::GptImpl& model, int64_t step, train::ReportKind kind) {
    const bool final = kind == train::ReportKind::kFinal;
    if (counts_.empty()) {
      counts_ = inspect::token_counts((run_dir_ / "train.bin").string(), model.config().vocab_size);
      extension_ = tokenizer::read_extension(run_dir_ / "tokenizer.model");
      if (extension_.old_vocab > 0) run_tok_.emplace(run_dir_ / "tokenizer.model");
    }
    nlohmann::json drift = nlohmann::json::array();
    const int top_k = static_cast<int>(cfg_.finetune.drift_top_k);
    auto report = [&](const std::string& name, const torch::Tensor& before, const torch::Tensor& after) {
      // the added pieces' rows (if any) against the rows they started from
      const auto start = train::added_rows_start(before, run_dir_ / "tokenizer.model", cfg_.finetune.new_rows_init,
                                                 cfg_.run.seed, name);
      for (const auto& r : inspect::table_drift(name, before, after, start, counts_, run_tok_ ? *run_tok_ : tok_, top_k)) {
        std::cout << "step " << step << ": " << inspect::format_drift(r);
        drift.push_back(inspect::to_json(r));
      }
    };
    report("tok_emb.weight", base_.model->tok_emb->weight, model.tok_emb->weight.cpu());  // base_ is on the CPU
    if (!model.config().tie_embeddings) report("head.weight", base_.model->output_weight(), model.output_weight().cpu());
    const fs::path json = run_dir_ / (final ? std::string("drift.json") : "drift_step_" + std::to_string(step) + ".json");
    util::atomic_write_file(json, drift.dump(2) + "\n");
    if (final) forgetting(model);
  }

 private:
  void forgetting(model::GptImpl& model) {
    // tok_ is the checkpoint's tokenizer, which the run copied: the one its token files use.
    const tokenizer::CorpusFiles orig_text = original_text();
    const fs::path orig_bin = run_dir_ / "original_val.bin";
    const std::string orig_name = orig_text.size() == 1 ? orig_text[0].string() : tokenizer::describe_files(orig_text);
    if (!data::token_file_is_current(orig_text, tok_, orig_bin)) data::prepare_corpus(orig_text, tok_, orig_bin);
    data::TokenFile new_val(run_dir_ / "val.bin"), old_val(orig_bin);
    // "before" is measured where and how "after" is: the starting weights in a model with the same
    // operations (the same products and precision), on the same device
    model::Gpt before(base_.arch, model.ops());
    const auto start = model::named_weights(*base_.model);
    std::map<std::string, torch::Tensor> weights(start.begin(), start.end());
    checkpoint::copy_weights(*before, weights, base_.dir.string());
    before->to(model.device());
    // With added pieces the new text's ids reach past the checkpoint's vocabulary: its "before" is the
    // fine-tune's own start (the checkpoint with the added rows as they began). The original text is read
    // with the checkpoint's tokenizer by both, the same tokens.
    model::Gpt start_model = before;
    if (extension_.old_vocab > 0 && extension_.old_vocab == base_.arch.vocab_size) {
      // untie_head: the head starts as the token table and grows by its own rule, as in the trainer
      if (!model.config().tie_embeddings && !weights.count("head.weight")) weights["head.weight"] = weights["tok_emb.weight"];
      train::grow_tables(weights, extension_, cfg_.finetune.new_rows_init, cfg_.run.seed);
      start_model = model::Gpt(model.config(), model.ops());
      checkpoint::copy_weights(*start_model, weights, base_.dir.string());
      start_model->to(model.device());
    }
    const int64_t B = cfg_.train.batch_size;
    const double new_before = train::evaluate(*start_model, new_val, B, 0).loss, new_after = train::evaluate(model, new_val, B, 0).loss;
    const double old_before = train::evaluate(*before, old_val, B, 0).loss, old_after = train::evaluate(model, old_val, B, 0).loss;
    std::printf("forgetting report (validation loss, nats/token, whole files)\n");
    std::printf("  %-44s %9s %9s %9s\n", "", "before", "after", "change");
    const std::string new_name = !cfg_.data.val.empty()                    ? cfg_.data.val
                                 : fs::is_regular_file(run_dir_ / "val.txt") ? (run_dir_ / "val.txt").string()
                                                                             : "files held out of " + cfg_.data.train;
    std::printf("  %-44s %9.4f %9.4f %+9.4f\n", ("new: " + new_name).c_str(), new_before, new_after, new_after - new_before);
    std::printf("  %-44s %9.4f %9.4f %+9.4f\n", ("original: " + orig_name).c_str(), old_before, old_after,
                old_after - old_before);
    std::fflush(stdout);
    nlohmann::json j = {{"new", {{"val", new_name}, {"before", new_before}, {"after", new_after}}},
                        {"original", {{"val", orig_name}, {"before", old_before}, {"after", old_after}}}};
    // forgetting.json last: a run that has it is finished (a resume says so), its other reports written
    if (contrastive_) sentence_vectors(*start_model, model);
    util::atomic_write_file(run_dir_ / "forgetting.json", j.dump(2) + "\n");
  }

  // A contrastive fine-tune: its held-out pairs' retrieval and cosines, before and after.
  void sentence_vectors(model::GptImpl& before, model::GptImpl& after) {
    const tokenizer::Tokenizer& tok = run_tok_ ? *run_tok_ : tok_;
    const int64_t T = after.config().max_seq_len;
    const auto pairs = contrastive_->pairs.empty() ? train::next_line_pairs(contrastive_->val_files, tok, T)
                                                   : train::read_pairs(contrastive_->val_pairs, tok, T);
    const auto j = train::sentence_vector_report(before, after, pairs, *contrastive_, tok.eos_id(), cfg_.train.batch_size);
    util::atomic_write_file(run_dir_ / "sentence_vectors.json", j.dump(2) + "\n");
  }

  // The original validation text: finetune.original_val, or the lines (files) the original run held out.
  // With the original run's data.unit paragraph, each file joined as it joined them (into this run directory).
  tokenizer::CorpusFiles original_text() const {
    auto joined = [&](const fs::path& file, const std::string& name) {
      if (!original_.paragraphs) return file;
      const fs::path out = run_dir_ / name;
      util::atomic_write_file(out, data::join_paragraphs(util::read_file(file, "original text")));
      return out;
    };
    if (!original_.split) {
      tokenizer::CorpusFiles files;
      for (size_t i = 0; i < original_.files.size(); ++i) {
        files.push_back(joined(original_.files[i], "original_val-" + std::to_string(i) + ".txt"));
      }
      return files;
    }
    data::SplitSpec spec = *original_.split;
    spec.source = joined(spec.source, "original_train_paragraphs.txt");
    const data::CorpusSplit split = data::split_corpus(spec);
    const fs::path out = run_dir_ / "original_val.txt";
    util::atomic_write_file(out, split.val);
    if (split.val_sha256 != base_.state.data.val_source_sha256) {
      spdlog::warn("finetune: the lines held out of {} differ from those the checkpoint validated on (the file "
                   "changed since): the forgetting report uses today's", original_.split->source.string());
    }
    return {out};
  }

  config::RunConfig cfg_;
  fs::path run_dir_;
  checkpoint::LoadedCheckpoint base_;
  tokenizer::Tokenizer tok_;
  std::vector<int64_t> counts_;
  tokenizer::Extension extension_;                ///< the pieces this run added (old_vocab 0: none)
  std::optional<tokenizer::Tokenizer> run_tok_;   ///< the run's extended tokenizer, when it has one
  OriginalVal original_;
  std::optional<train::ContrastiveSpec> contrastive_;  ///< finetune.objective contrastive
};

// What a fine-tune adds to the job of its config: the start, freezing, new pieces, the objective.
void set_finetune(train::TrainJob& job, const config::RunConfig& cfg, const fs::path& from) {
  job.init_from = from;
  job.freeze = train::freeze_prefixes(cfg.finetune);
  job.embedding_lr_scale = cfg.finetune.embedding_lr_scale;
  job.unfreeze = train::unfreeze_prefixes(cfg.finetune);
  job.unfreeze_after = cfg.finetune.unfreeze_embeddings_after;
  job.new_pieces = {cfg.finetune.new_pieces, cfg.finetune.new_pieces_from};
  job.new_rows_init = cfg.finetune.new_rows_init;
  job.freeze_old_rows = cfg.finetune.freeze_embeddings == train::EmbeddingFreeze::kOld;
  if (cfg.finetune.objective == train::Objective::kContrastive) {
    job.contrastive = train::ContrastiveSpec{cfg.finetune.pool, cfg.finetune.temperature, cfg.finetune.lm_weight,
                                             cfg.finetune.pairs, cfg.finetune.val_pairs, job.train_files, job.val_files};
  }
}

}  // namespace

void add_finetune_commands(CLI::App& app) {
  struct Opts {
    std::string from, config, resume, device;
    std::vector<std::string> overrides;
    bool overwrite = false;
    int nproc = 1;
    std::optional<int64_t> new_pieces;
  };
  auto o = std::make_shared<Opts>();
  auto* ft = app.add_subcommand("finetune",
                                "Fine-tune a checkpoint on new text (architecture and tokenizer from the checkpoint), "
                                "optionally freezing embeddings; reports embedding drift and forgetting");
  ft->add_option("--from", o->from, "starting checkpoint, or a run directory (its `latest`)")->required();
  ft->add_option("-c,--config", o->config, "YAML config: data, train, finetune sections (see configs/finetune-*.yaml)");
  ft->add_option("--set", o->overrides, "override a key: --set section.key=value (repeatable)")->take_all();
  ft->add_option("--resume", o->resume, "continue an interrupted fine-tune exactly: auto | PATH");
  ft->add_option("--device", o->device, "overrides run.device: auto | cpu | cuda | cuda:N");
  ft->add_flag("--overwrite", o->overwrite, "delete checkpoints of an earlier run in run.dir instead of refusing");
  ft->add_option("--new-pieces", o->new_pieces,
                 "overrides finetune.new_pieces: append up to N pieces of a tokenizer trained on the new text");
  add_nproc_option(ft, o->nproc);
  ft->callback([o] {
    auto overrides = o->overrides;
    if (!o->device.empty()) overrides.push_back("run.device=" + o->device);  // checked like the key
    if (o->new_pieces && *o->new_pieces > 0) overrides.push_back("finetune.new_pieces=" + std::to_string(*o->new_pieces));
    config::RunConfig cfg = config::load_config(o->config, overrides);
    if (o->new_pieces && *o->new_pieces <= 0) {
      throw ConfigError("[finetune] --new-pieces: expected a number of pieces to add, >= 1, got " +
                        std::to_string(*o->new_pieces) + ". Hint: leave it out to keep the vocabulary.");
    }
    const fs::path from = checkpoint::resolve_checkpoint(o->from);
    const bool extends = cfg.finetune.new_pieces > 0 || !cfg.finetune.new_pieces_from.empty();
    if (extends && !fs::is_regular_file(from / "tokenizer.model")) {
      throw ConfigError("[finetune] new_pieces: expected the checkpoint's tokenizer model '" +
                        (from / "tokenizer.model").string() + "' to extend, got no such file. Hint: fine-tune without "
                        "finetune.new_pieces, or copy the run's tokenizer.model into the checkpoint.");
    }
    checkpoint::verify_checkpoint(from);
    OriginalVal original = adopt_checkpoint(cfg, from);
    if (cfg.finetune.objective == train::Objective::kContrastive && !cfg.finetune.pairs.empty()) {
      train::check_pairs_files(cfg.finetune.pairs, cfg.finetune.val_pairs);  // before the run directory is made
    }
    if (cfg.finetune.untie_head && cfg.model.tie_embeddings) {
      cfg.model.tie_embeddings = false;
      spdlog::info("untie_head: head.weight starts as a copy of tok_emb.weight and trains on its own");
    }
    const std::string yaml = config::dump_config(cfg);
    if (o->nproc > 1) return launch_local_ranks(o->nproc, cfg);
    RunProcess process(cfg);
    train::TrainJob job = make_train_job(cfg, yaml, o->overwrite ? train::Overwrite::kDelete : train::Overwrite::kRefuse,
                                         train::ResumeSpec::parse(o->resume), process.group());
    // a fine-tune is finished once its reports are written too (they follow the final save)
    if (fs::is_regular_file(fs::path(cfg.run.dir) / "forgetting.json") && already_finished(job, process.is_root())) {
      return process.finish();
    }
    set_finetune(job, cfg, from);
    auto reporter = std::make_shared<Reporter>(cfg, from, original, job.contrastive);
    job.on_report = [reporter](model::GptImpl& m, int64_t step, train::ReportKind kind) { (*reporter)(m, step, kind); };
    job.report_every = cfg.finetune.drift_every;
    spdlog::info("fine-tune run dir {}, from {}", cfg.run.dir, from.string());
    auto result = train::run_training(job);
    process.finish();
    if (!process.is_root()) return;
    std::cout << "final validation loss " << result.final_val_loss;
    if (job.contrastive) {
      std::cout << " (InfoNCE of the held-out pairs" << (job.contrastive->lm_weight > 0 ? " + lm_weight x next-token)" : ")");
    }
    if (!job.contrastive) std::cout << " nats/token, " << result.final_val_bpb << " bits/byte";
    std::cout << " after " << result.steps
              << " steps; checkpoint " << result.checkpoint.string() << "\n";
  });
}

}  // namespace lm::cli
