// YAML section `run`: where a run lives and how it computes (consumed by the trainer; config/ parses it).
#pragma once

#include <cstdint>
#include <string>

#include "util/device_config.h"

namespace lm::train {

struct RunSection {
  std::string dir = "runs/default";  ///< run directory: tokenizer, token files, checkpoints, config.yaml
  uint64_t seed = 1337;              ///< seeds model init and batch sampling
  int threads = 1;                   ///< LibTorch intra-op threads; >= 1
  int blas_threads = 0;              ///< OpenBLAS threads; 0 = auto (the cores divided among the processes)
  util::DeviceSpec device;           ///< auto | cpu | cuda | cuda:N (auto = CUDA when LibTorch sees a GPU)
  util::Precision precision = util::Precision::kAuto;  ///< matrix products: auto | fp32 | bf16
  util::Kernels kernels = util::Kernels::kAuto;        ///< the model's operations: auto | fused | reference
  bool deterministic = false;        ///< LibTorch's deterministic algorithms (matters on CUDA)
};

}  // namespace lm::train
