// Position encodings behind one interface: learned (a trained (T_max, C) table) or sinusoidal (a fixed
// table, Vaswani et al. 2017 sec. 3.5). Both return the (T, C) rows for positions offset..offset+T-1.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "model/gpt_config.h"

namespace lm::model {

/// PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(pos / 10000^(2i/C)) for pos in
/// [offset, offset+T). REQUIRES: C even. Returns (T, C) float32.
torch::Tensor sinusoidal_table(int64_t T, int64_t C, int64_t offset = 0);

/// Base of the two encoders; registered in the GPT as "pos_emb".
class PositionEncodingImpl : public torch::nn::Module {
 public:
  /// Position rows for [offset, offset+T): (T, C).
  virtual torch::Tensor forward(int64_t T, int64_t offset) = 0;
};

/// Trained table; its parameter is "weight" (checkpoint key "pos_emb.weight"), initialised N(0, 0.02).
class LearnedPositionsImpl : public PositionEncodingImpl {
 public:
  LearnedPositionsImpl(int64_t max_seq_len, int64_t C);
  /// Throws std::out_of_range-like ConfigError when offset + T > max_seq_len.
  torch::Tensor forward(int64_t T, int64_t offset) override;
  torch::Tensor weight;  // (T_max, C)
};

/// Fixed table for [0, max_seq_len) kept as a buffer "pe" (not saved: it is recomputed from the formula);
/// positions beyond it are computed on demand from the same formula.
class SinusoidalPositionsImpl : public PositionEncodingImpl {
 public:
  SinusoidalPositionsImpl(int64_t max_seq_len, int64_t C);
  torch::Tensor forward(int64_t T, int64_t offset) override;
  torch::Tensor pe;  // (T_max, C)
};

/// Factory: the encoder the config asks for.
std::shared_ptr<PositionEncodingImpl> make_positions(const GptConfig& cfg);

}  // namespace lm::model
