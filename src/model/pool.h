// Pooling the hidden states of a line into one vector: `lmtrain embed`'s vectors and a contrastive
// fine-tune's (finetune.pool) are the same function of the states.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lm::model {

/// mean = the mean of the line's piece states; weighted = SGPT's position-weighted mean (the i-th piece
/// weighs i / (1 + ... + len)); last = the last piece's state.
enum class Pool { kMean, kWeighted, kLast };

/// "mean" | "weighted" | "last"; throws ConfigError naming `what` (e.g. "[embed] --pool") otherwise.
Pool parse_pool(std::string_view name, const std::string& what);
std::string to_string(Pool p);

/// Pooled vectors (B,C) of states (B,T,C) whose line b holds pieces at positions 1..lengths[b] (position 0 is
/// the implied line start; positions past the pieces are padding): a weighted sum over positions, so it
/// carries gradients. REQUIRES: 1 <= lengths[b] < T.
torch::Tensor pool_states(const torch::Tensor& states, const std::vector<int64_t>& lengths, Pool pool);

}  // namespace lm::model
