// Leaving lmtrain: a checkpoint as a Hugging Face model directory, GPT-2 for added positions and GPT-NeoX for
// rope (config.json, model.safetensors with the family's names, generation_config.json, tokenizer.model,
// tokenizer_config.json), or as one safetensors file with lmtrain's own names.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace lm::exporter {

/// One tensor's name in GPT-2 (GPT2LMHeadModel), in lmtrain and in llama.cpp's gpt2 (a GGUF file);
/// `transpose` for GPT-2's Conv1D weights, stored (in, out), the transpose of lmtrain's nn::Linear (out, in)
/// (GGUF keeps lmtrain's layout).
struct Gpt2Name {
  std::string gpt2, lmtrain;
  bool transpose = false;
  std::string gguf;
};

/// The name map of an architecture: wte, wpe (learned positions only), every block, ln_f, lm_head (untied;
/// llama.cpp reuses token_embd when output.weight is absent).
std::vector<Gpt2Name> gpt2_names(const model::GptConfig& a);

/// The weights of a model in GPT-2's form, by lmtrain name, on the CPU: with embedding_scale sqrt_d and an
/// untied head the scale is folded into tok_emb.weight; sinusoidal positions become pos_emb.weight, a table
/// of max_seq_len rows (exact). Throws ConfigError, prefixed "[export] FORMAT:" and naming `family`, for
/// what GPT-2's graph cannot compute: rope, relu2, qk_norm, no biases, a soft-cap, sqrt_d with a tied head.
std::map<std::string, torch::Tensor> gpt2_form_weights(const model::GptImpl& m, const std::string& format,
                                                       const std::string& family);

/// The model's tensors under GPT-2's names (GPT2LMHeadModel). c_attn, c_proj and c_fc are Conv1D, so their
/// weights are the transposes of lmtrain's nn::Linear ones, (in, out). Sinusoidal positions become a
/// learned table of max_seq_len rows (exact). An untied head is lm_head.weight; with embedding_scale sqrt_d
/// and an untied head the scale is folded into wte. Throws ConfigError for sqrt_d with a tied head: GPT-2
/// reads its logits through the same wte it embeds with, so no single table gives both exactly.
std::vector<std::pair<std::string, torch::Tensor>> gpt2_tensors(const model::GptImpl& m);

/// The model's tensors under GPT-NeoX's names (GPTNeoXForCausalLM), for a rope model: embed_in, every
/// layer's input/post_attention LayerNorms, query_key_value laid out head by head as [h][q|k|v][head_dim]
/// (lmtrain's rows are [q|k|v][h][head_dim]), dense, dense_h_to_4h, dense_4h_to_h (nn.Linear, no
/// transpose), final_layer_norm, embed_out when untied. Throws ConfigError for what NeoX computes otherwise:
/// relu2, qk_norm, no biases, a soft-cap, sqrt_d with a tied head.
std::vector<std::pair<std::string, torch::Tensor>> neox_tensors(const model::GptImpl& m);

/// config.json of a GPTNeoXForCausalLM: rotary_pct 1.0, rotary_emb_base = rope_base (rotate-half, as
/// lmtrain), sequential residuals (use_parallel_residual false), erf GELU, LayerNorm eps 1e-5, biases.
std::string neox_config_json(const model::GptConfig& a, int32_t eos_id);

/// The Hugging Face class export_hf writes for `a`: "GPTNeoXForCausalLM" for rope positions, else
/// "GPT2LMHeadModel".
std::string hf_class(const model::GptConfig& a);

/// config.json of a GPT2LMHeadModel with the architecture of `a` (activation "gelu" = erf GELU, LayerNorm
/// eps 1e-5, no dropout, n_inner = mlp_ratio x d_model, n_positions = max_seq_len), `eos_id` as bos and eos.
std::string gpt2_config_json(const model::GptConfig& a, int32_t eos_id);

/// Writes the Hugging Face directory `out` (created when missing; files of the same names are replaced
/// atomically, nothing else in it is touched). Returns the files written. Throws ConfigError (see
/// gpt2_tensors), SaveError.
std::vector<std::string> export_hf(const checkpoint::LoadedCheckpoint& ck, const std::filesystem::path& out);

/// Writes the weights with lmtrain's names (as in a checkpoint's model.safetensors) to `file`, atomically.
void export_safetensors(const checkpoint::LoadedCheckpoint& ck, const std::filesystem::path& file);

}  // namespace lm::exporter
