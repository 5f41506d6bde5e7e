// The tensor files of a checkpoint: model.safetensors (weights, safetensors.h; checkpoints written before it
// have model.pt, a torch::pickle_save dict, which still loads) and optimizer.pt (AdamW state, a name -> tensor
// dict written with torch::pickle_save). The bytes of both depend only on the values.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>

#include "model/gpt.h"

namespace lm::checkpoint {

/// Key of a parameter in Optimizer::state(): LibTorch 1.13 uses the TensorImpl address printed as a string,
/// later versions the address itself; deduced from the map type.
template <typename Map>
typename Map::key_type state_key(const Map&, const torch::Tensor& p) {
  using K = typename Map::key_type;
  if constexpr (std::is_same_v<K, std::string>) {
    std::ostringstream ss;
    ss << static_cast<const void*>(p.unsafeGetTensorImpl());
    return ss.str();
  } else {
    return static_cast<K>(p.unsafeGetTensorImpl());
  }
}

/// model.safetensors bytes: every registered parameter by checkpoint name (F32, CPU), the architecture
/// JSON in the metadata as "lmtrain_arch".
std::string weights_bytes(const model::GptImpl& m);

/// The weights file of a checkpoint directory: model.safetensors, or model.pt when only that exists.
std::filesystem::path weights_file(const std::filesystem::path& dir);

/// optimizer.pt bytes: "<param>.step", "<param>.exp_avg", "<param>.exp_avg_sq" per parameter that has
/// AdamW state, keyed by parameter *name* (torch::save of an optimizer keys it by tensor addresses, which
/// differ between processes, so its bytes could never match across a resume). `other` adds the state of a
/// second optimizer (Muon: "<param>.momentum_buffer"), already keyed by parameter name.
std::string optimizer_bytes(const torch::optim::AdamW& opt, const model::GptImpl& m,
                            const std::map<std::string, torch::Tensor>& other = {});

/// What load_weights does when the model has a head.weight and the checkpoint has none (it was tied).
enum class MissingHead { kRefuse, kFromTokEmb };

/// Copies the weights of checkpoint directory `dir` (weights_file) into `model`, checking every name, dtype
/// and shape first. With kFromTokEmb, a missing head.weight is taken from the stored tok_emb.weight
/// (untying a tied checkpoint). Throws CheckpointError on a missing, extra, misshapen or non-F32 tensor.
void load_weights(model::GptImpl& model, const std::filesystem::path& dir, MissingHead missing_head = MissingHead::kRefuse);

/// The weights stored in checkpoint `dir` by name, as load_weights reads them (head.weight added from
/// tok_emb.weight under MissingHead::kFromTokEmb). Throws CheckpointError.
std::map<std::string, torch::Tensor> read_weights(const std::filesystem::path& dir, MissingHead missing_head);

/// Copies `stored` (lmtrain name -> tensor) into `model`, checking every name, dtype (F32) and shape before
/// copying any; `origin` names the source in errors. Throws CheckpointError on a missing, extra, misshapen
/// or non-F32 tensor.
void copy_weights(model::GptImpl& model, const std::map<std::string, torch::Tensor>& stored, const std::string& origin);

/// Loads `dir`/optimizer.pt into `opt`, whose parameters are `model`'s (matched by name, shapes checked),
/// and returns the "<param>.momentum_buffer" entries (Muon's state) for the caller to place and check
/// (Muon::load_state). Throws
/// CheckpointError when absent, unreadable or mismatched, and when AdamW state names a parameter `opt`
/// does not step (the checkpoint was trained with another train.optimizer).
std::map<std::string, torch::Tensor> load_optimizer(torch::optim::AdamW& opt, const model::GptImpl& model,
                                                    const std::filesystem::path& dir);

}  // namespace lm::checkpoint
