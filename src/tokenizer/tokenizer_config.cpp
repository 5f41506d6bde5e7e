#include "tokenizer/tokenizer_config.h"

#include "util/errors.h"

namespace lm::tokenizer {

ModelType parse_model_type(std::string_view s) {
  if (s == "bpe") return ModelType::kBpe;
  if (s == "unigram") return ModelType::kUnigram;
  throw ConfigError("[tokenizer] model_type: expected bpe | unigram, got '" + std::string(s) + "'");
}

std::string to_string(ModelType t) { return t == ModelType::kBpe ? "bpe" : "unigram"; }

Normalization parse_normalization(std::string_view s) {
  if (s == "nfkc") return Normalization::kNfkc;
  if (s == "identity") return Normalization::kIdentity;
  throw ConfigError("[tokenizer] normalization: expected nfkc | identity, got '" + std::string(s) + "'");
}

std::string to_string(Normalization n) { return n == Normalization::kNfkc ? "nfkc" : "identity"; }

TextUnit parse_text_unit(std::string_view s) {
  if (s == "line") return TextUnit::kLine;
  if (s == "paragraph") return TextUnit::kParagraph;
  throw ConfigError("[data] unit: expected line | paragraph, got '" + std::string(s) + "'");
}

std::string to_string(TextUnit u) { return u == TextUnit::kLine ? "line" : "paragraph"; }

}  // namespace lm::tokenizer
