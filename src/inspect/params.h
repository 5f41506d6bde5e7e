// Parameter counts and memory of an architecture, by module, computed from its shape alone (no tensors):
// what `lmtrain inspect params` prints and `tokenizer stats` uses for the embedding share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"

namespace lm::inspect {

/// One line of the breakdown: a module (or group of modules) and its parameter count.
struct ParamLine {
  std::string name;    ///< e.g. "tok_emb", "blocks.0.attn", "head"
  std::string shapes;  ///< e.g. "8192 x 128"
  int64_t count = 0;
};

struct ParamCount {
  std::vector<ParamLine> lines;  ///< tok_emb, pos_emb, blocks.i.{ln1,attn,ln2,mlp}, ln_f, head
  int64_t total = 0;
  int64_t embedding = 0;    ///< token table V x C
  int64_t positions = 0;    ///< learned position table (0 for sinusoidal)
  int64_t per_block = 0;
  int64_t untied_head = 0;  ///< V x C extra tensor when untied (0 when tied)
  int64_t tying_saving = 0; ///< V x C: what tying saves (or would save)
};

/// Counts every parameter of `cfg` the way model::GptImpl registers them.
ParamCount count_params(const model::GptConfig& cfg);

/// Bytes per parameter of a storage type: fp32 4, fp16 2, bf16 2.
struct Dtype {
  const char* name;
  int bytes;
};
const std::vector<Dtype>& dtypes();

/// The printed report: breakdown, embedding share, tying saving, memory for weights and for training
/// (weights + gradients + AdamW's two moments, all in that dtype; activations not included).
std::string format_params(const model::GptConfig& cfg, const ParamCount& pc);

/// The arithmetic of a token table alone: "V x C = N parameters", and its size in each dtype.
std::string format_table_arithmetic(int64_t vocab, int64_t d_model);

}  // namespace lm::inspect
