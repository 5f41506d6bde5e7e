// Coming back: a Hugging Face GPT-2 directory (one `lmtrain export` wrote, or any gpt2-type model whose
// shapes fit and which comes with a SentencePiece tokenizer.model) read into an lmtrain model.
#pragma once

#include <filesystem>

#include "model/gpt.h"

namespace lm::exporter {

/// A GPT-2 directory as lmtrain's architecture and weights.
struct ImportedModel {
  model::GptConfig arch;  ///< learned positions (GPT-2's wpe), embedding_scale none, tie from the config
  model::Gpt model{nullptr};
  std::filesystem::path tokenizer_model;  ///< DIR/tokenizer.model
};

/// Reads DIR/config.json and DIR/model.safetensors (GPT-2 names, with or without the "transformer."
/// prefix; Conv1D weights transposed back). Throws CheckpointError naming what does not fit: another
/// model_type, an activation other than the erf "gelu" lmtrain computes, a LayerNorm epsilon other than
/// 1e-5, n_inner not a multiple of n_embd, a missing or misshapen tensor, no tokenizer.model.
ImportedModel import_hf(const std::filesystem::path& dir);

}  // namespace lm::exporter
