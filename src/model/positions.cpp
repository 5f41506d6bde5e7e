#include "model/positions.h"

#include <cmath>

#include "util/errors.h"

namespace lm::model {

torch::Tensor sinusoidal_table(int64_t T, int64_t C, int64_t offset) {
  // Computed in float64 then rounded, so large positions keep their accuracy.
  auto pos = torch::arange(offset, offset + T, torch::kFloat64).unsqueeze(1);    // (T,1)
  auto two_i = torch::arange(0, C, 2, torch::kFloat64);                          // (C/2)
  auto inv_freq = torch::exp(two_i * (-std::log(10000.0) / static_cast<double>(C)));  // 10000^(-2i/C)
  auto angle = pos * inv_freq.unsqueeze(0);                                      // (T,C/2)
  auto pe = torch::empty({T, C}, torch::kFloat64);
  pe.slice(1, 0, C, 2).copy_(torch::sin(angle));
  pe.slice(1, 1, C, 2).copy_(torch::cos(angle));
  return pe.to(torch::kFloat32);  // (T,C)
}

LearnedPositionsImpl::LearnedPositionsImpl(int64_t max_seq_len, int64_t C) {
  weight = register_parameter("weight", torch::randn({max_seq_len, C}) * 0.02);
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
  if (cfg.positions == Positions::kLearned) {
    return std::make_shared<LearnedPositionsImpl>(cfg.max_seq_len, cfg.d_model);
  }
  return std::make_shared<SinusoidalPositionsImpl>(cfg.max_seq_len, cfg.d_model);
}

}  // namespace lm::model
