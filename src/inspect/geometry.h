// Embedding geometry: cosine nearest neighbours of a piece (and a - b + c analogies) in the token table
// or an untied head, how a neighbour list changed between checkpoints, and the position vectors.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "tokenizer/tokenizer.h"

namespace lm::inspect {

struct Neighbour {
  int32_t id = 0;
  std::string piece;
  double cosine = 0.0;
};

/// The id of a piece given as the piece itself ("▁God") or as a word ("God" -> "▁God"). Throws
/// ConfigError naming both spellings when neither is in the vocabulary.
int32_t find_piece(const tokenizer::Tokenizer& tok, const std::string& text);

/// The k rows of table (V,C) most cosine-similar to query (C), most similar first, skipping `exclude`.
std::vector<Neighbour> nearest(const torch::Tensor& table, const torch::Tensor& query, int k,
                               const std::vector<int32_t>& exclude, const tokenizer::Tokenizer& tok);

/// For each id, the k rows of table (V,C) most cosine-similar to row `id`, the row itself left out: what
/// `nearest(table, table[id], k, {id}, tok)` returns, for many ids in a few matrix products (the report).
std::vector<std::vector<Neighbour>> nearest_each(const torch::Tensor& table, const std::vector<int32_t>& ids, int k,
                                                 const tokenizer::Tokenizer& tok);

/// Cosine similarity of each row of queries (Q,C) with each row of table (V,C) -> (Q,V), float64.
torch::Tensor cosine_to_table(const torch::Tensor& table, const torch::Tensor& queries);

/// Rows of x (N,C) centred and projected onto their first `dims` principal axes, and the share of the
/// variance each axis explains. Each axis's sign is fixed (its largest loading is positive), so the same
/// table always gives the same picture.
struct Projection {
  torch::Tensor coords;            ///< (N,dims) float64
  std::vector<double> explained;   ///< dims fractions in [0,1], largest first
};
Projection pca(const torch::Tensor& x, int dims);

std::string format_neighbours(const std::string& title, const std::vector<Neighbour>& list);

/// Side-by-side lists of one piece in two checkpoints: rank in each, entries that joined or left.
std::string format_neighbour_change(const std::vector<Neighbour>& before, const std::vector<Neighbour>& after);

/// `inspect positions`: the vectors at the chosen positions and dimensions, the cosine similarity between
/// positions (matrix and by distance), and for learned positions how close they are to sinusoidal ones.
/// For rope: each pair's frequency and wavelength, and the cosine between a unit vector rotated to two
/// positions (by offset, from two starts, and as a matrix over `positions`); `dims` is not used.
std::string format_positions(model::GptImpl& model, const std::vector<int64_t>& positions, const std::vector<int64_t>& dims);

/// A unit vector with equal components (1/sqrt(D)) rotated to each of `positions` by `rope`: (P, D) float64.
/// Their cosines depend on the positions' offsets only.
torch::Tensor rotated_unit_rows(const model::RotaryImpl& rope, const std::vector<int64_t>& positions);

/// Cosine similarity matrix of the rows of x (N,C) -> (N,N).
torch::Tensor cosine_matrix(const torch::Tensor& x);

}  // namespace lm::inspect
