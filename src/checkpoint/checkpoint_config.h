// CheckpointConfig: when checkpoints are written and how many are kept (YAML section `checkpoint`).
#pragma once

#include <cstdint>

namespace lm::checkpoint {

struct CheckpointConfig {
  int64_t every = 500;    ///< steps between checkpoints; 0 = only the final one
  int64_t keep_last = 3;  ///< newest step checkpoints kept on disk, besides `best`; >= 2
};

}  // namespace lm::checkpoint
