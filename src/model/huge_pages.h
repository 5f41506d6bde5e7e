// Inference memory layout: the weights of a model in one huge-page-backed block (used by `sample`).
#pragma once

#include <torch/torch.h>

namespace lm::model {

/// Moves every parameter of `m` into one 2 MiB-aligned buffer advised for transparent huge pages (values
/// unchanged). Incremental decoding streams all weights once per token; on 4 KiB pages the hardware
/// prefetchers stop at every page boundary. For inference: call before sampling, not before training.
void pack_parameters_in_huge_pages(torch::nn::Module& m);

}  // namespace lm::model
