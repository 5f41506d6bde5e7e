// The GGUF v3 format (llama.cpp's model file), written by our own code: the magic "GGUF", version 3, the
// tensor and key/value counts (u64), typed key/value metadata, one info per tensor (name, dimensions
// innermost first, ggml type, offset), then the tensor data, each tensor starting on a 32-byte boundary
// (general.alignment's default). Only what `export --format gguf` writes is here
// (docs/formats.md "GGUF (`lmtrain export --format gguf`)").
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace lm::exporter::gguf {

/// ggml's tensor types that the export writes, with ggml's numbers.
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8 };

/// Values in 32-element blocks of q8_0: one f16 scale d = max|x| / 127 and 32 int8 q = round(x / d).
inline constexpr int64_t kQ8Block = 32;

/// Parses "f32" | "f16" | "q8_0"; throws ConfigError otherwise.
TensorType parse_type(const std::string& s);
std::string to_string(TensorType t);

/// One metadata value: u32, i32, f32, bool, string, or an array of strings, f32 or i32.
using Value = std::variant<uint32_t, int32_t, float, bool, std::string, std::vector<std::string>, std::vector<float>,
                           std::vector<int32_t>>;

struct KeyValue {
  std::string key;
  Value value;
};

/// A tensor ready for the file: `shape` in LibTorch's order (outermost first; the file lists it reversed)
/// and its bytes in `type`.
struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorType type = TensorType::kF32;
  std::string data;
};

/// `t` (float, contiguous rows along the last dimension) as `type`: f32 as it is; f16 rounded to nearest
/// even; q8_0 block by block as ggml's reference quantiser does (d = amax / 127, q = roundf(x / d), d stored
/// as f16). Throws ConfigError for q8_0 when the last dimension is not a multiple of 32.
Tensor make_tensor(const std::string& name, const torch::Tensor& t, TensorType type);

/// The whole file: header, metadata in the order given, tensor infos and data in the order given.
std::string file_bytes(const std::vector<KeyValue>& metadata, const std::vector<Tensor>& tensors);

/// Whether `bytes` start with GGUF's magic.
bool has_magic(const std::string& bytes);

}  // namespace lm::exporter::gguf
