// The safetensors format (https://huggingface.co/docs/safetensors, written and read by our own code): an
// 8-byte little-endian header length N, N bytes of JSON header ({"name": {"dtype", "shape",
// "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}), then the raw little-endian bytes
// of every tensor, offsets relative to the start of that data. Every current tool reads it without
// running code (unlike a pickle). lmtrain's weights file `model.safetensors` is one.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lm::checkpoint {

/// Named tensors and the string metadata of one safetensors file.
struct SafeTensors {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  ///< in file order (sorted by name when written)
  std::map<std::string, std::string> metadata;                ///< the header's "__metadata__"
};

/// The largest header the reader accepts (the reference implementation's limit): 100 MB.
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// The bytes of a safetensors file holding `st` (tensors copied to contiguous CPU memory, sorted by name;
/// the header padded with spaces so the data starts 8-byte aligned). dtypes: F64, F32, F16, BF16, I64, I32,
/// I16, I8, U8, BOOL. Throws Error (internal) for another dtype.
std::string safetensors_bytes(const SafeTensors& st);

/// Parses a safetensors file's bytes; `origin` names it in errors. Throws CheckpointError ("[safetensors]
/// ...") for: fewer than 8 bytes, a header longer than kMaxSafetensorsHeader or than the file, malformed
/// JSON or entries, an unknown dtype, a shape that disagrees with its byte count, offsets that run past the
/// end, overlap, or leave a hole.
SafeTensors parse_safetensors(std::string_view bytes, const std::string& origin);

/// Reads and parses a file. Throws CheckpointError as parse_safetensors, or when it cannot be read.
SafeTensors read_safetensors(const std::filesystem::path& path);

}  // namespace lm::checkpoint
