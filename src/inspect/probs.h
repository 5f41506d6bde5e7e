// Reading a model token by token: the teacher-forced next-token table (`inspect probs`) and the shape of
// every stage of one forward pass (`inspect shapes`, `train --dry-run`).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/gpt.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace lm::inspect {

/// One position of a teacher-forced pass: what came next, and what the model expected.
struct ProbRow {
  int64_t position = 0;           ///< index of the context's last token
  int32_t context_id = 0;          ///< the id at `position`
  std::string context_piece;      ///< the piece at `position`
  int32_t next_id = 0;
  std::string next_piece;         ///< the actual next piece
  double prob = 0.0;              ///< model probability of the actual next piece
  int64_t rank = 0;               ///< 1 + number of pieces the model found more likely
  double surprisal_bits = 0.0;    ///< -log2(prob)
  double entropy_bits = 0.0;      ///< entropy of the whole next-token distribution
  double prob_sum = 0.0;          ///< sum of the distribution (1 up to rounding)
  std::vector<sample::TokenProb> top;  ///< the k most likely pieces
};

/// Runs `ids` through the model once; row t scores ids[t+1] after ids[0..t]. Throws ConfigError when
/// ids has fewer than 2 tokens or more than max_seq_len + 1.
std::vector<ProbRow> teacher_forced(model::GptImpl& model, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids,
                                    int k);
std::string format_probs(const std::vector<ProbRow>& rows);
nlohmann::json probs_json(const std::vector<ProbRow>& rows);

/// One stage of a forward pass.
struct Stage {
  std::string name;  ///< ids, tok_emb, +pos_emb, blocks.i, ln_f, logits, loss
  std::vector<int64_t> shape;
  std::string dtype;
  std::string note;
};

/// Pushes inputs x (B,T) through the model with targets y (B,T) and records every stage, then the loss.
std::vector<Stage> trace_stages(model::GptImpl& model, const torch::Tensor& x, const torch::Tensor& y);
std::string format_stages(const std::vector<Stage>& stages);

}  // namespace lm::inspect
