// Validation: mean next-token loss over non-overlapping windows of a token file.
#pragma once

#include <cstdint>

#include "data/token_file.h"
#include "model/gpt.h"

namespace lm::train {

/// Mean loss (nats/token) over up to `max_windows` windows spread evenly through the file (0 = all of
/// them), `batch_size` windows per forward pass, in eval mode without gradients.
/// Throws DataError when the file holds fewer than max_seq_len + 1 tokens.
double evaluate(model::GptImpl& model, const data::TokenFile& file, int64_t batch_size, int64_t max_windows);

}  // namespace lm::train
