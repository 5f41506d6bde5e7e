#include "model/positions.h"

#include <cmath>

#include "util/errors.h"

namespace lm::model {

torch::Tensor pair_frequencies(int64_t width, double base) {
  auto two_i = torch::arange(0, width, 2, torch::kFloat64);                          // (width/2)
  return torch::exp(two_i * (-std::log(base) / static_cast<double>(width)));       // base^(-2i/width)
}

torch::Tensor sinusoidal_table(int64_t T, int64_t C, int64_t offset) {
  // Computed in float64 then rounded, so large positions keep their accuracy.
  auto pos = torch::arange(offset, offset + T, torch::kFloat64).unsqueeze(1);    // (T,1)
  auto angle = pos * pair_frequencies(C, 10000.0).unsqueeze(0);                  // (T,C/2)
  auto pe = torch::empty({T, C}, torch::kFloat64);
  pe.slice(1, 0, C, 2).copy_(torch::sin(angle));
  pe.slice(1, 1, C, 2).copy_(torch::cos(angle));
  return pe.to(torch::kFloat32);  // (T,C)
}

LearnedPositionsImpl::LearnedPositionsImpl(int64_t max_seq_len, int64_t C, double std) {
  weight = register_parameter("weight", torch::randn({max_seq_len, C}) * std);
}

torch::Tensor LearnedPositionsImpl::forward(int64_t T, int64_t offset) {
  if (offset + T > weight.size(0)) {
    throw ConfigError("[model] learned positions: expected offset + T <= max_seq_len=" +
                      std::to_string(weight.size(0)) + ", got " + std::to_string(offset + T));
  }
  return weight.narrow(0, offset, T);  // (T,C)
}

SinusoidalPositionsImpl::SinusoidalPositionsImpl(int64_t max_seq_len, int64_t C) {
  pe = register_buffer("pe", sinusoidal_table(max_seq_len, C));
}

torch::Tensor SinusoidalPositionsImpl::forward(int64_t T, int64_t offset) {
  if (offset + T <= pe.size(0)) return pe.narrow(0, offset, T);  // (T,C)
  return sinusoidal_table(T, pe.size(1), offset).to(pe.device());
}

std::shared_ptr<PositionEncodingImpl> make_positions(const GptConfig& cfg) {
  switch (cfg.positions) {
    case Positions::kLearned:
      return std::make_shared<LearnedPositionsImpl>(cfg.max_seq_len, cfg.d_model, cfg.embedding_init_std);
    case Positions::kSinusoidal: return std::make_shared<SinusoidalPositionsImpl>(cfg.max_seq_len, cfg.d_model);
    case Positions::kRope: return nullptr;
  }
  return nullptr;
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t T, int64_t head_dim, double base, int64_t offset) {
  // float64 angles, then rounded: position 10^5 keeps its accuracy.
  auto pos = torch::arange(offset, offset + T, torch::kFloat64).unsqueeze(1);  // (T,1)
  auto angle = pos * pair_frequencies(head_dim, base).unsqueeze(0);              // (T,D/2)
  return {torch::cos(angle).to(torch::kFloat32), torch::sin(angle).to(torch::kFloat32)};
}

RotaryImpl::RotaryImpl(int64_t max_seq_len, int64_t head_dim, double base) : head_dim_(head_dim), base_(base) {
  auto [c, s] = rotary_tables(max_seq_len, head_dim, base);
  cos_ = register_buffer("cos", c);
  sin_ = register_buffer("sin", s);
}

std::pair<torch::Tensor, torch::Tensor> RotaryImpl::tables(int64_t T, int64_t offset) const {
  if (offset + T <= cos_.size(0)) return {cos_.narrow(0, offset, T), sin_.narrow(0, offset, T)};  // (T,D/2)
  auto [c, s] = rotary_tables(T, head_dim_, base_, offset);
  return {c.to(cos_.device()), s.to(sin_.device())};
}

torch::Tensor RotaryImpl::frequencies() const { return pair_frequencies(head_dim_, base_); }

torch::Tensor rotate_half(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto a = x.narrow(-1, 0, half), b = x.narrow(-1, half, half);  // (..., T, D/2) each
  return torch::cat({a * cos - b * sin, b * cos + a * sin}, -1);  // (..., T, D)
}

}  // namespace lm::model
