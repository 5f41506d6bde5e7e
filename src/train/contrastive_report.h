// The end of a contrastive fine-tune: what its held-out pairs' vectors are worth before and after.
#pragma once

#include <nlohmann/json.hpp>

#include "model/gpt.h"
#include "train/contrastive.h"

namespace lm::train {

/// Retrieval (each anchor's positive among all N held-out positives: top-1, top-10, MRR) and the cosines of
/// positive pairs and of random pairs (anchor i with positive (i + N/2) mod N), for the model
/// `before` and `after` the fine-tune, with what chance scores. Prints the table to stdout and returns it as
/// JSON (RUN/sentence_vectors.json; the report's "Sentence vectors" section reads it).
nlohmann::json sentence_vector_report(model::GptImpl& before, model::GptImpl& after, const std::vector<LinePair>& pairs,
                                      const ContrastiveSpec& spec, int32_t pad, int64_t batch);

}  // namespace lm::train
