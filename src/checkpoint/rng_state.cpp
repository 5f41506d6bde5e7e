#include "checkpoint/rng_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>

#include "util/hash.h"

namespace lm::checkpoint {

std::string torch_rng_state_hex() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto t = gen.get_state().contiguous();
  return util::to_hex(t.data_ptr(), t.nbytes());
}

void restore_torch_rng_state(const std::string& hex) {
  if (hex.empty()) return;
  const std::string bytes = util::from_hex(hex);
  auto t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(t);
}

}  // namespace lm::checkpoint
