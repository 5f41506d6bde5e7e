#include "export/gguf_format.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "util/errors.h"

namespace lm::exporter::gguf {
namespace {

constexpr uint64_t kAlignment = 32;

// gguf_type numbers of the metadata values.
enum : uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };

class Out {
 public:
  template <typename T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);  // little-endian, as GGUF and this machine
  }
  void text(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes += s;
  }
  void pad() { bytes.append((kAlignment - bytes.size() % kAlignment) % kAlignment, '\0'); }
  std::string bytes;
};

template <typename T>
void array(Out& o, uint32_t type, const std::vector<T>& items) {
  o.pod<uint32_t>(kArray);
  o.pod<uint32_t>(type);
  o.pod<uint64_t>(items.size());
  for (const auto& v : items) {
    if constexpr (std::is_same_v<T, std::string>) {
      o.text(v);
    } else {
      o.pod(v);
    }
  }
}

void value(Out& o, const Value& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint32_t>) {
          o.pod<uint32_t>(kU32), o.pod(x);
        } else if constexpr (std::is_same_v<T, int32_t>) {
          o.pod<uint32_t>(kI32), o.pod(x);
        } else if constexpr (std::is_same_v<T, float>) {
          o.pod<uint32_t>(kF32), o.pod(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          o.pod<uint32_t>(kBool), o.pod<uint8_t>(x ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::string>) {
          o.pod<uint32_t>(kString), o.text(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          array(o, kString, x);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          array(o, kF32, x);
        } else {
          array(o, kI32, x);
        }
      },
      v);
}

std::string raw_bytes(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel() * c.element_size()));
}

// ggml's quantize_row_q8_0_ref, block by block: {f16 d, int8 q[32]}.
std::string q8_0_bytes(const torch::Tensor& t) {
  const auto x = t.contiguous();
  const float* v = x.data_ptr<float>();
  const int64_t blocks = x.numel() / kQ8Block;
  std::vector<float> scales(static_cast<size_t>(blocks));
  std::vector<int8_t> q(static_cast<size_t>(x.numel()));
  for (int64_t b = 0; b < blocks; ++b) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(v[b * kQ8Block + j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[static_cast<size_t>(b)] = d;
    for (int64_t j = 0; j < kQ8Block; ++j) {
      q[static_cast<size_t>(b * kQ8Block + j)] = static_cast<int8_t>(std::round(v[b * kQ8Block + j] * id));
    }
  }
  const auto d16 = torch::from_blob(scales.data(), {blocks}, torch::kFloat32).to(torch::kHalf);
  const auto* d16p = static_cast<const char*>(d16.data_ptr());
  std::string out;
  out.reserve(static_cast<size_t>(blocks) * (2 + kQ8Block));
  for (int64_t b = 0; b < blocks; ++b) {
    out.append(d16p + 2 * b, 2);
    out.append(reinterpret_cast<const char*>(q.data() + b * kQ8Block), kQ8Block);
  }
  return out;
}

}  // namespace

TensorType parse_type(const std::string& s) {
  if (s == "f32") return TensorType::kF32;
  if (s == "f16") return TensorType::kF16;
  if (s == "q8_0") return TensorType::kQ8_0;
  throw ConfigError("[export] --type: expected f32 | f16 | q8_0, got '" + s + "'");
}

std::string to_string(TensorType t) {
  switch (t) {
    case TensorType::kF32: return "f32";
    case TensorType::kF16: return "f16";
    case TensorType::kQ8_0: return "q8_0";
  }
  return "?";
}

Tensor make_tensor(const std::string& name, const torch::Tensor& t, TensorType type) {
  const auto f = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  Tensor out{name, f.sizes().vec(), type, {}};
  if (type == TensorType::kQ8_0 && (f.dim() == 0 || f.size(-1) % kQ8Block != 0)) {
    throw ConfigError("[export] gguf q8_0: expected rows of a multiple of 32 values in " + name + ", got " +
                      std::to_string(f.dim() ? f.size(-1) : 0) + ". Hint: --type f16 or f32.");
  }
  switch (type) {
    case TensorType::kF32: out.data = raw_bytes(f); break;
    case TensorType::kF16: out.data = raw_bytes(f.to(torch::kHalf)); break;
    case TensorType::kQ8_0: out.data = q8_0_bytes(f); break;
  }
  return out;
}

std::string file_bytes(const std::vector<KeyValue>& metadata, const std::vector<Tensor>& tensors) {
  Out o;
  o.bytes = "GGUF";
  o.pod<uint32_t>(3);
  o.pod<uint64_t>(tensors.size());
  o.pod<uint64_t>(metadata.size());
  for (const auto& kv : metadata) {
    o.text(kv.key);
    value(o, kv.value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    o.text(t.name);
    o.pod<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) o.pod<uint64_t>(static_cast<uint64_t>(*d));  // innermost first
    o.pod<uint32_t>(static_cast<uint32_t>(t.type));
    o.pod<uint64_t>(offset);
    offset += (t.data.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  o.pad();
  for (const auto& t : tensors) {
    o.bytes += t.data;
    o.pad();
  }
  return std::move(o.bytes);
}

bool has_magic(const std::string& bytes) { return bytes.size() >= 4 && bytes.compare(0, 4, "GGUF") == 0; }

}  // namespace lm::exporter::gguf
