// `lmtrain import --from-hf DIR --out CKPT`: a Hugging Face GPT-2 directory as an lmtrain checkpoint that
// sample, inspect and finetune --from accept.
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "config/config.h"
#include "export/hf_import.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"

namespace lm::cli {
namespace fs = std::filesystem;

namespace {

void import_checkpoint(const fs::path& from, const fs::path& out) {
  if (fs::exists(out)) {
    throw ConfigError("[import] --out: expected a new checkpoint path, got existing '" + out.string() +
                      "'. Hint: choose another path; nothing was changed.");
  }
  auto imported = exporter::import_hf(from);
  tokenizer::Tokenizer tok(imported.tokenizer_model);
  if (tok.vocab_size() != imported.arch.vocab_size) {
    throw CheckpointError("[import] " + from.string() + ": tokenizer.model has " + std::to_string(tok.vocab_size()) +
                          " pieces, expected vocab_size " + std::to_string(imported.arch.vocab_size) + " of config.json");
  }
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  config::RunConfig cfg;  // what a checkpoint records: this model, its tokenizer, and where it came from
  cfg.run.dir = parent.string();
  cfg.model = imported.arch;
  cfg.tokenizer.vocab_size = static_cast<int>(imported.arch.vocab_size);
  cfg.data.train = cfg.data.val = (from / "(imported: no training text)").string();
  checkpoint::SaveRequest req;
  req.model = imported.model.get();
  req.config_yaml = config::dump_config(cfg);
  req.tokenizer_model = imported.tokenizer_model;
  req.update_latest = false;
  fs::create_directories(parent);
  const fs::path dir = checkpoint::save_checkpoint(parent, out.filename().string(), req);
  std::cout << "wrote checkpoint " << dir.string() << " from " << from.string() << ": "
            << model::describe(imported.arch) << "\n";
}

}  // namespace

void add_import_commands(CLI::App& app) {
  struct Opts {
    std::string from, out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("import", "Read a Hugging Face GPT-2 directory (with a SentencePiece tokenizer.model) "
                                           "into an lmtrain checkpoint");
  cmd->add_option("--from-hf", o->from, "directory with config.json, model.safetensors, tokenizer.model")->required();
  cmd->add_option("--out", o->out, "the checkpoint directory to write (must not exist)")->required();
  cmd->callback([o] { import_checkpoint(o->from, o->out); });
}

}  // namespace lm::cli
