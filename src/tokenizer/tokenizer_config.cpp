#include "tokenizer/tokenizer_config.h"

#include "util/errors.h"

namespace lm::tokenizer {

ModelType parse_model_type(std::string_view s) {
  if (s == "bpe") return ModelType::kBpe;
  if (s == "unigram") return ModelType::kUnigram;
  throw ConfigError("[tokenizer] model_type: expected bpe | unigram, got '" + std::string(s) + "'");
}

std::string to_string(ModelType t) { return t == ModelType::kBpe ? "bpe" : "unigram"; }

}  // namespace lm::tokenizer
