// LibTorch's CPU random generator state as text, so trainer_state.json can carry it: a resumed run goes on
// with the same random stream as a run that never stopped.
#pragma once

#include <string>

namespace lm::checkpoint {

/// The default CPU generator's state, hex-encoded.
std::string torch_rng_state_hex();

/// Restores a state written by torch_rng_state_hex(); "" (an old checkpoint) leaves the generator as is.
void restore_torch_rng_state(const std::string& hex);

}  // namespace lm::checkpoint
