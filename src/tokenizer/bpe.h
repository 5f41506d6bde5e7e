// SentencePiece's BPE encoder replayed on piece strings (bpe_model.cc): what a text merges into and the pieces
// formed on the way, and what a vocabulary extension (extend.h) must append so that each new piece is the
// result of merges, scored below every old piece.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace lm::tokenizer {

/// SentencePiece BPE's encoding of one already-normalised text: start from its UTF-8 characters and merge
/// the adjacent pair whose concatenation has the highest score in `mergeable`, the leftmost on a tie, until no
/// pair is in it. `formed`, when given, receives each merged piece in order. (User-defined pieces, which
/// SentencePiece matches first, are not modelled: lmtrain's tokenizers have none.)
std::vector<std::string> bpe_segment(const std::string& text, const std::unordered_map<std::string, float>& mergeable,
                                     std::vector<std::string>* formed = nullptr);

/// Up to `want` of `candidates` in order, each after the pieces `mergeable` forms on the way to it that
/// `known` (every old piece) lacks; those are also added to `intermediate`.
std::vector<std::string> with_merge_paths(const std::vector<std::string>& candidates,
                                          const std::unordered_map<std::string, int32_t>& known,
                                          const std::unordered_map<std::string, float>& mergeable, int64_t want,
                                          std::set<std::string>& intermediate);

/// Makes each piece of `order` reachable once appended to `old_mergeable` with scores `lowest` - 1 - i: a
/// piece that BPE leaves as several symbols gets the left-to-right joins of those symbols before it (added to
/// `order` and `intermediate`). Returns the pieces still unreachable after a few rounds.
std::vector<std::string> make_reachable(std::vector<std::string>& order,
                                        const std::unordered_map<std::string, float>& old_mergeable, float lowest,
                                        const std::unordered_map<std::string, int32_t>& known,
                                        std::set<std::string>& intermediate);

}  // namespace lm::tokenizer
