#include "model/pool.h"

#include "util/errors.h"

namespace lm::model {

Pool parse_pool(std::string_view name, const std::string& what) {
  if (name == "mean") return Pool::kMean;
  if (name == "weighted") return Pool::kWeighted;
  if (name == "last") return Pool::kLast;
  throw ConfigError(what + ": expected mean, weighted or last, got '" + std::string(name) + "'");
}

std::string to_string(Pool p) { return p == Pool::kMean ? "mean" : p == Pool::kWeighted ? "weighted" : "last"; }

torch::Tensor pool_states(const torch::Tensor& states, const std::vector<int64_t>& lengths, Pool pool) {
  const int64_t B = states.size(0), T = states.size(1);
  auto w = torch::zeros({B, T}, torch::kFloat64);
  auto acc = w.accessor<double, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths[static_cast<size_t>(b)];
    if (pool == Pool::kLast) {
      acc[b][len] = 1.0;
      continue;
    }
    const double total = pool == Pool::kMean ? static_cast<double>(len) : static_cast<double>(len * (len + 1) / 2);
    for (int64_t p = 1; p <= len; ++p) acc[b][p] = (pool == Pool::kMean ? 1.0 : static_cast<double>(p)) / total;
  }
  const auto weights = w.to(states.device(), states.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat);
  const auto s = states.scalar_type() == torch::kDouble ? states : states.to(torch::kFloat);
  return (s * weights.unsqueeze(2)).sum(1);
}

}  // namespace lm::model
