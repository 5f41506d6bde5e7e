// Seeded batcher: draws B random windows of T+1 tokens from a token file and returns x[B,T], y[B,T].
// Batch k depends only on (seed, k), so the data cursor is a single integer and resume is exact. In a run
// of W processes, global batch k is W x B windows and rank r takes windows r*B .. r*B+B-1 of it, so W
// ranks x B and 1 rank x W*B train on the same sequences.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "data/token_file.h"

namespace lm::data {

/// One batch of inputs and next-token targets, both int64 (B,T).
struct Batch {
  torch::Tensor x;  // (B,T)
  torch::Tensor y;  // (B,T)
};

class Batcher {
 public:
  /// REQUIRES: file outlives the batcher; 0 <= rank < world. Throws DataError when the file holds fewer
  /// than T+1 tokens.
  Batcher(const TokenFile& file, int64_t batch_size, int64_t seq_len, uint64_t seed, int rank = 0, int world = 1);

  /// The batch at the cursor; advances the cursor by one.
  Batch next();
  /// This rank's slice of the global batch with index k (does not move the cursor).
  Batch at(uint64_t k) const;
  uint64_t cursor() const { return cursor_; }
  void set_cursor(uint64_t k) { cursor_ = k; }

 private:
  const TokenFile* file_;
  int64_t B_, T_;
  uint64_t seed_;
  uint64_t rank_, world_;
  uint64_t cursor_ = 0;
};

/// splitmix64 (Steele, Lea, Flood 2014): a stateless mixer, so a draw is a pure function of its index (the
/// batcher's window offsets, the contrastive objective's shuffles).
uint64_t splitmix64(uint64_t z);

/// Number of non-overlapping evaluation windows of T+1 tokens (stride T) in a file.
int64_t eval_window_count(const TokenFile& file, int64_t seq_len);

/// Evaluation batch of the given windows, window w starting at token w*T.
Batch eval_batch(const TokenFile& file, int64_t seq_len, const std::vector<int64_t>& windows);

}  // namespace lm::data
