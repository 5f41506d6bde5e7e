// GptConfig: the architecture of a model. It is saved in every checkpoint (arch.json) and wins over the
// YAML config when a checkpoint is loaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace lm::model {

/// How positions enter the model.
enum class Positions {
  kLearned,     ///< nn::Embedding(max_seq_len, C), trained
  kSinusoidal,  ///< fixed sin/cos table (Vaswani et al. 2017, sec. 3.5), not a parameter
  kRope,        ///< rotary: q and k rotated per head by their position (Su et al. 2021), nothing added
};

/// Multiplier applied to the token embedding rows before positions are added.
enum class EmbeddingScale {
  kNone,   ///< x = E[id]
  kSqrtD,  ///< x = E[id] * sqrt(d_model) (Vaswani et al. 2017, sec. 3.4)
};

/// The MLP's activation between its two linear layers.
enum class MlpActivation {
  kGelu,   ///< the erf GELU (Hendrycks & Gimpel 2016), GPT-2's
  kRelu2,  ///< relu(x)^2 (So et al. 2021, "Primer"), nanochat's
};

Positions parse_positions(std::string_view s);  ///< "learned" | "sinusoidal" | "rope"; throws ConfigError
EmbeddingScale parse_embedding_scale(std::string_view s);  ///< "none" | "sqrt_d"; throws ConfigError
std::string to_string(Positions p);
std::string to_string(EmbeddingScale s);
MlpActivation parse_mlp_activation(std::string_view s);  ///< "gelu" | "relu2"; throws ConfigError
std::string to_string(MlpActivation a);

/// Architecture of a decoder-only transformer (YAML section `model`, plus the tokenizer's vocab size).
struct GptConfig {
  int64_t vocab_size = 8192;  ///< V: rows of the token table; set from the tokenizer
  int64_t d_model = 128;      ///< C: width of every token vector
  int64_t n_layers = 4;       ///< L: transformer blocks
  int64_t n_heads = 4;        ///< H: attention heads; must divide d_model
  int64_t max_seq_len = 128;  ///< T_max: context length in tokens (training windows are this long)
  int64_t mlp_ratio = 4;      ///< MLP hidden width = mlp_ratio * d_model
  Positions positions = Positions::kLearned;
  bool tie_embeddings = true;  ///< logits through tok_emb.weight (no separate head tensor)
  EmbeddingScale embedding_scale = EmbeddingScale::kNone;
  MlpActivation mlp_activation = MlpActivation::kGelu;
  double rope_base = 10000.0;  ///< rope: pair i of a head turns by position x rope_base^(-2i/head_dim)
  bool qk_norm = false;        ///< q and k of each head scaled to unit RMS (no parameters) before the scores
  bool bias = true;            ///< the linear layers' biases (LayerNorm keeps its weight and bias either way)
  double init_std = 0.02;      ///< N(0, init_std) for the linear layers (residual projections / sqrt(2L))
  double embedding_init_std = 0.02;  ///< N(0, .) for the token table and learned positions
  bool zero_init_proj = false;  ///< attention's and the MLP's output projections start at zero (nanochat)
  double logit_softcap = 0.0;   ///< c > 0: logits become c tanh(logits / c) (Gemma 2, nanochat); 0 = off

  /// Every violated constraint, as "model.key: expected X, got Y"; empty when valid.
  std::vector<std::string> problems() const;
  bool operator==(const GptConfig& o) const;  ///< every field of visit_fields equal
};

/// Every field of GptConfig, once, in order, with its key (the YAML key without "model.", the arch.json key).
/// JSON in and out, equality and the resume check (field_texts) walk this list, so a field added to the
/// struct and here reaches all of them; the static_assert in gpt_config.cpp fails until it is added here.
/// `visit(key, field)` is called with int64_t&, double&, bool& or an enum& (const for a const config).
template <class Config, class Visit>
void visit_fields(Config& c, Visit&& visit) {
  visit("vocab_size", c.vocab_size);
  visit("d_model", c.d_model);
  visit("n_layers", c.n_layers);
  visit("n_heads", c.n_heads);
  visit("max_seq_len", c.max_seq_len);
  visit("mlp_ratio", c.mlp_ratio);
  visit("positions", c.positions);
  visit("tie_embeddings", c.tie_embeddings);
  visit("embedding_scale", c.embedding_scale);
  visit("mlp_activation", c.mlp_activation);
  visit("rope_base", c.rope_base);
  visit("qk_norm", c.qk_norm);
  visit("bias", c.bias);
  visit("init_std", c.init_std);
  visit("embedding_init_std", c.embedding_init_std);
  visit("zero_init_proj", c.zero_init_proj);
  visit("logit_softcap", c.logit_softcap);
}

/// Each field as (key, value as text: "128", "0.02", "true", "learned"), in visit_fields order.
std::vector<std::pair<std::string, std::string>> field_texts(const GptConfig& c);

/// Every field on one line, in visit_fields order, the shape letters for the sizes: "V=8192 C=128 L=4 H=4
/// T=128 mlp_ratio=4 positions=learned tie_embeddings=true embedding_scale=none mlp_activation=gelu". The
/// log, `ckpt info`, `inspect params`/`shapes` and `import` print this, so a new field shows everywhere.
std::string describe(const GptConfig& c);

void to_json(nlohmann::json& j, const GptConfig& c);
void from_json(const nlohmann::json& j, GptConfig& c);

}  // namespace lm::model
