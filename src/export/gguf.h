// A checkpoint as a GGUF file that llama.cpp runs (architecture gpt2; docs/llama-cpp.md): the model's
// tensors under llama.cpp's names, its hyper-parameters, and its SentencePiece vocabulary in GGUF's
// "llama" tokenizer form, set to start every text with </s> as lmtrain does.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "export/gguf_format.h"
#include "tokenizer/model_spec.h"

namespace lm::exporter {

/// What export_gguf wrote, and what llama.cpp will do differently from lmtrain.
struct GgufExport {
  uint64_t bytes = 0;
  size_t tensors = 0;
  std::vector<std::string> warnings;  ///< tokenizer differences (no byte pieces, NFKC, unigram)
};

/// The metadata of `ck`'s GGUF: general.*, gpt2.* (counts u32, layer_norm_epsilon f32, context_length =
/// the position table's rows) and tokenizer.ggml.* from `spec` (bos = eos = </s>, add_bos_token true).
std::vector<gguf::KeyValue> gguf_metadata(const checkpoint::LoadedCheckpoint& ck, const tokenizer::ModelSpec& spec,
                                          gguf::TensorType type);

/// The differences between lmtrain's tokenization with `spec` and llama.cpp's, one line each (empty when
/// there are none).
std::vector<std::string> tokenizer_warnings(const tokenizer::ModelSpec& spec);

/// Writes `out` atomically: 2-D weights as `type`, 1-D ones (norms, biases) f32. Throws ConfigError for a
/// model llama.cpp's gpt2 graph cannot compute (see gpt2_form_weights), for q8_0 rows that are not a
/// multiple of 32, and for an existing `out` that is a directory or not a GGUF file (left as it is);
/// SaveError when it cannot be written.
GgufExport export_gguf(const checkpoint::LoadedCheckpoint& ck, const std::filesystem::path& out, gguf::TensorType type);

}  // namespace lm::exporter
