// `lmtrain export`: a checkpoint as a Hugging Face GPT-2 directory (--format hf), a GGUF file for llama.cpp
// (--format gguf) or one safetensors file with lmtrain's names (--format safetensors).
#include <spdlog/spdlog.h>

#include <iostream>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "export/gguf.h"
#include "export/hf.h"
#include "util/errors.h"

namespace lm::cli {

void add_export_commands(CLI::App& app) {
  struct Opts {
    std::string checkpoint, format = "hf", out, type;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("export", "Write a checkpoint for other tools: a Hugging Face directory, a GGUF file "
                                           "for llama.cpp, or a safetensors file");
  add_checkpoint_option(cmd, o->checkpoint, true);
  cmd->add_option("--format", o->format, "hf (a GPT2LMHeadModel directory; GPTNeoXForCausalLM for rope models) | gguf (one "
                                         "file for llama.cpp, architecture gpt2) | safetensors (one file, lmtrain names)")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "output directory (hf) or file (gguf, safetensors)")->required();
  cmd->add_option("--type", o->type, "gguf only: the matrices' type, f32 (exact) | f16 | q8_0 (default f32)");
  cmd->callback([o] {
    if (o->format != "hf" && o->format != "safetensors" && o->format != "gguf") {
      throw ConfigError("[export] --format: expected hf | gguf | safetensors, got '" + o->format + "'");
    }
    if (!o->type.empty() && o->format != "gguf") {
      throw ConfigError("[export] --type: expected --format gguf, got --format " + o->format + ". Hint: " + o->format +
                        " keeps lmtrain's float32 weights.");
    }
    const auto type = exporter::gguf::parse_type(o->type.empty() ? "f32" : o->type);
    auto ck = checkpoint::load_checkpoint(o->checkpoint);
    if (o->format == "gguf") {
      const auto done = exporter::export_gguf(ck, o->out, type);
      for (const auto& w : done.warnings) spdlog::warn("export gguf: {}", w);
      std::cout << "wrote " << o->out << " (" << done.bytes << " bytes, " << done.tensors << " tensors, "
                << exporter::gguf::to_string(type) << "; llama.cpp architecture gpt2, of " << ck.dir.string() << ")\n";
      return;
    }
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
