// `lmtrain export`: a checkpoint as a Hugging Face GPT-2 directory (--format hf) or as one safetensors file
// with lmtrain's names (--format safetensors).
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "export/hf.h"
#include "util/errors.h"

namespace lm::cli {

void add_export_commands(CLI::App& app) {
  struct Opts {
    std::string checkpoint, format = "hf", out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("export", "Write a checkpoint for other tools: a Hugging Face GPT-2 directory or a "
                                           "safetensors file");
  add_checkpoint_option(cmd, o->checkpoint, true);
  cmd->add_option("--format", o->format, "hf (a GPT2LMHeadModel directory; GPTNeoXForCausalLM for rope models) | safetensors (one file, lmtrain names)")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "output directory (hf) or file (safetensors)")->required();
  cmd->callback([o] {
    if (o->format != "hf" && o->format != "safetensors") {
      throw ConfigError("[export] --format: expected hf | safetensors, got '" + o->format + "'");
    }
    auto ck = checkpoint::load_checkpoint(o->checkpoint);
    if (o->format == "safetensors") {
      exporter::export_safetensors(ck, o->out);
      std::cout << "wrote " << o->out << " (weights of " << ck.dir.string() << ", lmtrain names)\n";
      return;
    }
    const auto files = exporter::export_hf(ck, o->out);
    std::cout << "wrote " << o->out << ":";
    for (const auto& f : files) std::cout << " " << f;
    std::cout << "\n(a " << exporter::hf_class(ck.arch) << " of " << ck.dir.string() << "; lmtrain starts every prompt with id "
              << "eos_token_id: prepend it to match `lmtrain sample`)\n";
  });
}

}  // namespace lm::cli
