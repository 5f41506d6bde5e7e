// GptConfig: the architecture of a model. It is saved in every checkpoint (arch.json) and wins over the
// YAML config when a checkpoint is loaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace lm::model {

/// How positions enter the model.
enum class Positions {
  kLearned,     ///< nn::Embedding(max_seq_len, C), trained
  kSinusoidal,  ///< fixed sin/cos table (Vaswani et al. 2017, sec. 3.5), not a parameter
};

/// Multiplier applied to the token embedding rows before positions are added.
enum class EmbeddingScale {
  kNone,   ///< x = E[id]
  kSqrtD,  ///< x = E[id] * sqrt(d_model) (Vaswani et al. 2017, sec. 3.4)
};

Positions parse_positions(std::string_view s);  ///< "learned" | "sinusoidal"; throws ConfigError
EmbeddingScale parse_embedding_scale(std::string_view s);  ///< "none" | "sqrt_d"; throws ConfigError
std::string to_string(Positions p);
std::string to_string(EmbeddingScale s);

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

  /// Every violated constraint, as "model.key: expected X, got Y"; empty when valid.
  std::vector<std::string> problems() const;
  bool operator==(const GptConfig& o) const;
};

void to_json(nlohmann::json& j, const GptConfig& c);
void from_json(const nlohmann::json& j, GptConfig& c);

}  // namespace lm::model
