// A checkpoint's trainer state as text, one line a field, from its field list (checkpoint.h
// visit_state_fields): what `ckpt info` prints, so a field added to the list shows there without further edits.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace lm::checkpoint {

/// (key, value) for every field of `s`, in list order: numbers as written (a NaN loss as "-"), booleans as
/// true/false, the RNG state as its length in hex digits, and the data identity's fields as "data.KEY" (hashes
/// cut to 16 digits).
std::vector<std::pair<std::string, std::string>> describe_state(const TrainerState& s);

}  // namespace lm::checkpoint
