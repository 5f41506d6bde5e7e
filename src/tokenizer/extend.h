// Vocabulary extension for a fine-tune (finetune.new_pieces / new_pieces_from): the pieces that a SentencePiece
// model trained on the new text has and the checkpoint's model lacks, appended after the old pieces, so every
// old id keeps its piece. Each new piece records the old pieces the old tokenizer split it into, for its row.
// BPE models: their encoder merges adjacent symbols by the score of the merged piece (bpe_segment).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer_config.h"

namespace lm::tokenizer {

/// What to append (YAML finetune.new_pieces / finetune.new_pieces_from).
struct ExtensionSpec {
  int64_t count = 0;           ///< take up to this many pieces from a model trained on the new text; > 0 when used
  std::filesystem::path list;  ///< or these pieces, one a line, in this order (SentencePiece's text, U+2581 a word start)
  bool active() const { return count != 0 || !list.empty(); }
};

struct NewPiece {
  std::string piece;
  int32_t id = 0;
  std::vector<int32_t> from;  ///< the old ids the old tokenizer splits it into (byte pieces, or <unk>, for new characters)
  bool intermediate = false;  ///< added so that a chosen piece is reachable by BPE merges, not chosen itself
};

/// An extended tokenizer: the old vocabulary size and the appended pieces, in id order from old_vocab.
struct Extension {
  int32_t old_vocab = 0;
  std::string extends_sha256;  ///< SHA-256 of the model it extends
  std::vector<NewPiece> pieces;
  int32_t vocab_size() const { return old_vocab + static_cast<int32_t>(pieces.size()); }
};

/// Makes `out_model` (with its sidecar `out_model`.json) the extension of `old_model` by `spec` for the text
/// `corpus`, unless the sidecar says it already is (the same old model, text, spec and settings): returns the
/// extension either way and whether it was made now. `cfg` is the old model's training settings; a model of
/// its type is trained on `corpus` with them to find pieces (spec.count). New pieces score below every old
/// piece, in the order chosen, so they join only what no old merge joins; each is checked to encode alone
/// to its own id by SentencePiece itself.
/// spec.count pieces are taken, each after the pieces BPE forms on the way to it that the old model lacks, so
/// the extension can hold a few more than spec.count.
/// Throws ConfigError (exit 2) for a count the text cannot give, a text that adds nothing, a list with
/// duplicates, spaces, pieces already present or pieces the normalisation rewrites, or a model that is not
/// BPE; DataError for an unreadable model or text; SaveError.
std::pair<Extension, bool> ensure_extended_tokenizer(const std::filesystem::path& old_model, const CorpusFiles& corpus,
                                                     const ExtensionSpec& spec, const TokenizerConfig& cfg, int threads,
                                                     uint64_t seed, const std::filesystem::path& out_model);

/// The extension recorded beside `model` (its sidecar, which names the model's SHA-256), or none (old_vocab 0)
/// when it is not an extended model or the sidecar describes other bytes. Throws DataError for an unreadable
/// sidecar.
Extension read_extension(const std::filesystem::path& model);

/// Whether `model`'s sidecar records the extension ensure_extended_tokenizer would make from these inputs
/// (a resume checks its checkpoint's tokenizer with it before anything is written).
bool extension_is_current(const std::filesystem::path& model, const std::filesystem::path& old_model,
                          const CorpusFiles& corpus, const ExtensionSpec& spec, const TokenizerConfig& cfg,
                          uint64_t seed);

/// Removes `model`'s sidecar when it records an extension (a model copied over an extended one); a plain
/// tokenizer's sidecar is kept.
void forget_extension(const std::filesystem::path& model);

}  // namespace lm::tokenizer
