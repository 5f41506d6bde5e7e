#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace lm::train {

double lr_at(int64_t step, const TrainConfig& c) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, c.max_steps - c.warmup_steps);
  const double p = std::clamp(static_cast<double>(step - c.warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * p));
}

}  // namespace lm::train
