// What a SentencePiece model file says about itself, read from its serialized ModelProto without
// libprotobuf (the bridge's protobuf stays behind the bridge): every piece with its score and type, the
// algorithm, byte fallback and the normaliser. The GGUF export writes the pieces; a resume compares the
// settings with the config.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lm::tokenizer {

/// SentencePiece's piece types, with its numbers (sentencepiece_model.proto SentencePiece.Type).
enum class PieceType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct PieceSpec {
  std::string piece;
  float score = 0.0f;
  PieceType type = PieceType::kNormal;
};

struct ModelSpec {
  std::vector<PieceSpec> pieces;           ///< in id order
  std::string algorithm = "unigram";       ///< trainer_spec.model_type: unigram | bpe | word | char
  bool byte_fallback = false;              ///< trainer_spec.byte_fallback: 256 <0xNN> pieces stand in for unknown bytes
  std::string normalization;               ///< normalizer_spec.name: nmt_nfkc (lmtrain's nfkc) | identity | ...
  bool add_dummy_prefix = true;            ///< a text starts with the word-start mark U+2581
  bool remove_extra_whitespaces = true;    ///< leading, trailing and repeated spaces dropped before encoding
};

/// The spec's normalisation as tokenizer.normalization spells it: "nfkc" for nmt_nfkc, "identity", else
/// SentencePiece's own name (a tokenizer lmtrain did not train).
std::string normalization_name(const ModelSpec& s);

/// Reads `model_file`. Throws DataError naming the file when it is not a SentencePiece model (including a
/// piece type outside SentencePiece's 1..6).
ModelSpec read_model_spec(const std::filesystem::path& model_file);

/// A serialized model (`model_bytes`) with NORMAL pieces appended after its own, piece i scored `scores[i]`,
/// and trainer_spec.vocab_size set to the new count: records added at the end, which protobuf reads as
/// continuing the repeated pieces and merges into the existing trainer_spec, so every old byte stays.
std::string append_pieces(const std::string& model_bytes, const std::vector<std::string>& pieces,
                          const std::vector<float>& scores, int32_t vocab_size);

/// The same model reading text exactly as written: normalizer_spec merged with add_dummy_prefix and
/// remove_extra_whitespaces off (a piece's own text then encodes without a word start added).
std::string verbatim_model(const std::string& model_bytes);

}  // namespace lm::tokenizer
