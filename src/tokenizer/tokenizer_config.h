// Tokenizer training settings: the YAML section `tokenizer`, declared here so that config/ can compose it
// without pulling in the Tokenizer class.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lm::tokenizer {

/// SentencePiece algorithm.
enum class ModelType { kBpe, kUnigram };

/// Parses "bpe" | "unigram"; throws ConfigError otherwise.
ModelType parse_model_type(std::string_view s);
std::string to_string(ModelType t);

/// Text normalisation before encoding: nfkc = SentencePiece's nmt_nfkc (NFKC, plus leading, trailing and
/// repeated spaces dropped); identity = the text as it is (what llama.cpp's tokenizer does).
enum class Normalization { kNfkc, kIdentity };

/// Parses "nfkc" | "identity"; throws ConfigError otherwise.
Normalization parse_normalization(std::string_view s);
std::string to_string(Normalization n);

/// What one line of training text is (config key data.unit): line = each line is a unit; paragraph = each
/// blank-line-separated block of lines is joined into one unit first (data/paragraphs.h), for hard-wrapped text.
enum class TextUnit { kLine, kParagraph };

/// Parses "line" | "paragraph"; throws ConfigError otherwise.
TextUnit parse_text_unit(std::string_view s);
std::string to_string(TextUnit u);

/// Tokenizer training settings (YAML section `tokenizer`).
struct TokenizerConfig {
  int vocab_size = 8192;                 ///< pieces in the vocabulary, incl. <unk>, <s>, </s>; >= 8
  ModelType model_type = ModelType::kBpe;
  double character_coverage = 0.9995;    ///< fraction of characters covered (SentencePiece); (0, 1]
  int64_t max_sentences = 0;             ///< lines sampled for training; 0 = all
  bool byte_fallback = false;            ///< 256 byte pieces <0x00>..<0xFF>: no character is ever <unk>
  Normalization normalization = Normalization::kNfkc;
};

}  // namespace lm::tokenizer
