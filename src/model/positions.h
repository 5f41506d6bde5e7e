// Position encodings. Added to the token rows: learned (a trained (T_max, C) table) or sinusoidal (a fixed
// table, Vaswani et al. 2017 sec. 3.5), both behind one interface returning the (T, C) rows for positions
// offset..offset+T-1. Or rotary (Su et al. 2021): nothing is added; each head's q and k are rotated by
// their position inside attention, so a score depends on the two positions' offset only.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <utility>

#include "model/gpt_config.h"

namespace lm::model {

/// base^(-2i/width) for i < width/2: the angular frequency, in radians per position, of each pair of a
/// sinusoidal table (width C, base 10000) or of a rotary head (width head_dim, rope_base). (width/2) float64.
torch::Tensor pair_frequencies(int64_t width, double base);

/// PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(pos / 10000^(2i/C)) for pos in
/// [offset, offset+T). REQUIRES: C even. Returns (T, C) float32.
torch::Tensor sinusoidal_table(int64_t T, int64_t C, int64_t offset = 0);

/// Base of the two encoders; registered in the GPT as "pos_emb".
class PositionEncodingImpl : public torch::nn::Module {
 public:
  /// Position rows for [offset, offset+T): (T, C).
  virtual torch::Tensor forward(int64_t T, int64_t offset) = 0;
};

/// Trained table; its parameter is "weight" (checkpoint key "pos_emb.weight"), initialised N(0, std).
class LearnedPositionsImpl : public PositionEncodingImpl {
 public:
  LearnedPositionsImpl(int64_t max_seq_len, int64_t C, double std);
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

/// Factory: the added encoder the config asks for; null for rope (nothing is added).
std::shared_ptr<PositionEncodingImpl> make_positions(const GptConfig& cfg);

/// Rotary positions of heads D = head_dim wide (rotate-half layout, as GPT-NeoX and Llama): pair i is
/// (x[i], x[i + D/2]) and turns by the angle p * base^(-2i/D) at position p. Its tables are buffers, not
/// parameters: nothing is saved. Registered in the GPT as "rope".
class RotaryImpl : public torch::nn::Module {
 public:
  RotaryImpl(int64_t max_seq_len, int64_t head_dim, double base);
  /// cos and sin of the angles of positions offset..offset+T-1: two (T, D/2) float32 tables (beyond
  /// max_seq_len computed on demand from the same formula).
  std::pair<torch::Tensor, torch::Tensor> tables(int64_t T, int64_t offset) const;
  /// Each pair's angular frequency base^(-2i/D) in radians per token: (D/2) float64.
  torch::Tensor frequencies() const;
  int64_t head_dim() const { return head_dim_; }
  double base() const { return base_; }

 private:
  int64_t head_dim_;
  double base_;
  torch::Tensor cos_, sin_;  // (T_max, D/2)
};

/// cos and sin of p * base^(-2i/D) for p in [offset, offset+T), i < D/2, computed in float64: (T, D/2) each.
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t T, int64_t head_dim, double base, int64_t offset = 0);

/// x (..., T, D) rotated by cos, sin (T, D/2): (a, b) = (x[i], x[i + D/2]) -> (a cos - b sin, b cos + a sin).
torch::Tensor rotate_half(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace lm::model
