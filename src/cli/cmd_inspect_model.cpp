// `lmtrain inspect params|shapes` and `train --dry-run`: the architecture of a checkpoint or config,
// counted (parameters, memory) and traced (one batch through every stage).
#include <filesystem>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/jobs.h"
#include "config/config.h"
#include "data/batcher.h"
#include "inspect/params.h"
#include "inspect/probs.h"
#include "model/gpt.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/corpus_text.h"
#include "util/errors.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::cli {
namespace fs = std::filesystem;

namespace {

// One (B,T) batch and its targets: the first windows of a token file made with the model's tokenizer
// (SHA-256 `tokenizer_sha`) when it has enough tokens, else uniform random ids (`source` says which, and why).
std::pair<torch::Tensor, torch::Tensor> shape_batch(const fs::path& bin, const std::string& tokenizer_sha, int64_t V,
                                                    int64_t B, int64_t T, std::string& source) {
  std::string why = "no token file at " + bin.string();
  if (data::token_data_exists(bin)) {
    data::TokenFile file(bin);
    if (tokenizer_sha.empty() || file.info().tokenizer_sha256 != tokenizer_sha) {
      why = bin.string() + " was made by another tokenizer";
    } else if (file.size() < static_cast<uint64_t>(T + 1)) {
      why = bin.string() + " holds fewer than T+1 tokens";
    } else {
      auto batch = data::Batcher(file, B, T, 1).at(0);
      source = "batch 0 of " + bin.string();
      return {batch.x, batch.y};
    }
  }
  torch::manual_seed(0);
  source = "uniform random ids (" + why + ")";
  return {torch::randint(V, {B, T}, torch::kInt64), torch::randint(V, {B, T}, torch::kInt64)};
}

void print_shapes(model::GptImpl& m, const fs::path& bin, const std::string& tokenizer_sha, int64_t B) {
  const auto& a = m.config();
  const double logits_gib = static_cast<double>(B) * static_cast<double>(a.max_seq_len * a.vocab_size) * 4.0 / (1 << 30);
  if (logits_gib > 2.0) {
    throw ConfigError("[inspect] batch: expected a batch whose [B,T,V] logits fit in 2 GiB, got B=" + std::to_string(B) +
                      " (" + std::to_string(logits_gib).substr(0, 6) + " GiB). Hint: a smaller -b / train.batch_size.");
  }
  std::string source;
  auto [x, y] = shape_batch(bin, tokenizer_sha, a.vocab_size, B, a.max_seq_len, source);
  std::cout << "B=" << B << " " << model::describe(a) << "; input: " << source << "\n"
            << inspect::format_stages(inspect::trace_stages(m, x, y))
            << util::with_commas(inspect::count_params(a).total) << " parameters\n";
}

}  // namespace

void add_model_reading_commands(CLI::App& inspect) {
  struct Opts {
    std::string checkpoint, config, device = "cpu";
    int64_t vocab = 0, d_model = 0, batch = 2;
  };
  auto o = std::make_shared<Opts>();
  auto* params = inspect.add_subcommand("params", "Parameter counts by module, embedding share, memory; or the arithmetic of --vocab x --d-model");
  add_checkpoint_option(params, o->checkpoint, false);
  params->add_option("-c,--config", o->config, "a YAML config instead of a checkpoint (vocab = tokenizer.vocab_size)");
  params->add_option("--vocab", o->vocab, "with --d-model: the token-table arithmetic alone, no checkpoint");
  params->add_option("--d-model", o->d_model, "width of the token vectors");
  params->callback([o] {
    if (o->vocab > 0 || o->d_model > 0) {
      if (o->vocab <= 0 || o->d_model <= 0) throw ConfigError("[inspect] params: expected both --vocab V and --d-model C (positive)");
      std::cout << inspect::format_table_arithmetic(o->vocab, o->d_model);
      return;
    }
    model::GptConfig arch;
    std::string what;
    if (!o->checkpoint.empty()) {
      const fs::path dir = checkpoint::resolve_checkpoint(o->checkpoint);
      arch = checkpoint::read_arch(dir);
      what = "checkpoint " + dir.string();
    } else if (!o->config.empty()) {
      auto cfg = config::load_config(o->config, {});
      arch = cfg.model;
      arch.vocab_size = cfg.tokenizer.vocab_size;
      what = "config " + o->config;
    } else {
      throw ConfigError("[inspect] params: expected --checkpoint, --config, or --vocab with --d-model");
    }
    std::cout << what << ": " << model::describe(arch) << "\n"
              << inspect::format_params(arch, inspect::count_params(arch)) << "\n"
              << inspect::format_table_arithmetic(arch.vocab_size, arch.d_model);
  });

  auto* shapes = inspect.add_subcommand("shapes", "Push one batch through a checkpoint and print every stage's shape and dtype");
  add_checkpoint_option(shapes, o->checkpoint, true);
  shapes->add_option("-b,--batch", o->batch, "batch size B")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  add_device_option(shapes, o->device);
  shapes->callback([o] {
    auto ck = checkpoint::load_checkpoint(o->checkpoint);
    move_to_device(*ck.model, o->device);
    std::cout << "checkpoint " << ck.dir.string() << "\n";
    print_shapes(*ck.model, ck.dir.parent_path() / "val.bin", util::sha256_file(ck.tokenizer_model), o->batch);
  });
}

void run_dry_run(const config::RunConfig& cfg) {
  // the files a real run reads, checked the same way (a dry run that passes means the paths are right)
  tokenizer::list_corpus_files(cfg.data.train, "training corpus");
  if (!cfg.data.val.empty()) tokenizer::list_corpus_files(cfg.data.val, "validation text");
  model::GptConfig arch = cfg.model;
  const fs::path run(cfg.run.dir);
  arch.vocab_size = cfg.tokenizer.vocab_size;
  // The run's tokenizer (and its train.bin) describe this config only when the vocabulary sizes agree;
  // otherwise a real run would train a new tokenizer first.
  std::string sha;
  if (fs::is_regular_file(run / "tokenizer.model")) {
    tokenizer::Tokenizer tok(run / "tokenizer.model");
    if (tok.vocab_size() == arch.vocab_size) sha = tok.sha256();
  }
  torch::manual_seed(cfg.run.seed);
  model::Gpt m(arch);
  std::cout << "dry run of " << cfg.run.dir << " (nothing is trained or written)\n";
  print_shapes(*m, run / "train.bin", sha, cfg.train.batch_size);
}

}  // namespace lm::cli
