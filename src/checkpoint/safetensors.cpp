#include "checkpoint/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::checkpoint {
namespace {

using json = nlohmann::json;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian; so is this host");

struct Dtype {
  const char* name;
  torch::ScalarType type;
  size_t bytes;
};

const std::vector<Dtype>& dtypes() {
  static const std::vector<Dtype> kDtypes = {
      {"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2},
      {"BF16", torch::kBFloat16, 2}, {"I64", torch::kInt64, 8}, {"I32", torch::kInt32, 4},
      {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},     {"U8", torch::kUInt8, 1},
      {"BOOL", torch::kBool, 1}};
  return kDtypes;
}

// A value from the file for a message: strings (cut to 40 characters) and numbers as they are, anything
// else by its type only (dumping untrusted nested JSON would recurse once per level).
std::string shown(const json& j) {
  if (j.is_string()) return "\"" + j.get<std::string>().substr(0, 40) + "\"";
  if (j.is_number() || j.is_boolean() || j.is_null()) return j.dump();
  return std::string("a JSON ") + j.type_name();
}

std::string shown_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw CheckpointError("[safetensors] " + origin + ": " + what);
}

// One header entry, checked: dtype known, shape non-negative, byte count = numel x element size.
struct Entry {
  std::string name;
  const Dtype* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& name, const json& j, const std::string& origin) {
  Entry e;
  e.name = name;
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets")) {
    bad(origin, "tensor '" + name + "': expected an object with dtype, shape and data_offsets");
  }
  const auto& dt = j.at("dtype");
  for (const auto& d : dtypes()) {
    if (dt.is_string() && dt.get<std::string>() == d.name) e.dtype = &d;
  }
  if (!e.dtype) bad(origin, "tensor '" + name + "': unknown dtype " + shown(dt) + " (expected F32, F16, BF16, ...)");
  const auto& off = j.at("data_offsets");
  if (!j.at("shape").is_array() || !off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    bad(origin, "tensor '" + name + "': expected a shape list and data_offsets [begin, end]");
  }
  uint64_t nbytes = e.dtype->bytes;
  for (const auto& d : j.at("shape")) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) {
      bad(origin, "tensor '" + name + "': expected non-negative dimensions below 2^40, got " + shown(d));
    }
    e.shape.push_back(d.get<int64_t>());
    if (__builtin_mul_overflow(nbytes, d.get<uint64_t>(), &nbytes)) {
      bad(origin, "tensor '" + name + "': shape " + shown_shape(e.shape) + "... is larger than any file");
    }
  }
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.end < e.begin) bad(origin, "tensor '" + name + "': data_offsets end before begin");
  if (nbytes != e.end - e.begin) {
    bad(origin, "tensor '" + name + "': shape " + shown_shape(e.shape) + " of " + e.dtype->name + " needs " +
                    std::to_string(nbytes) + " bytes, data_offsets give " + std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

std::string safetensors_bytes(const SafeTensors& st) {
  auto sorted = st.tensors;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  json header = json::object();
  if (!st.metadata.empty()) header["__metadata__"] = st.metadata;
  std::string data;
  for (const auto& [name, tensor] : sorted) {
    const auto t = tensor.detach().cpu().contiguous();
    const auto it = std::find_if(dtypes().begin(), dtypes().end(), [&](const Dtype& d) { return d.type == t.scalar_type(); });
    if (it == dtypes().end()) throw Error(ExitCode::kInternal, "[safetensors] no safetensors dtype for tensor " + name);
    const uint64_t begin = data.size();
    data.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
    header[name] = {{"dtype", it->name}, {"shape", t.sizes().vec()}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out.reserve(8 + text.size() + data.size());  // one copy of the tensor bytes, not three
  out += text;
  out += data;
  return out;
}

SafeTensors parse_safetensors(std::string_view bytes, const std::string& origin) {
  if (bytes.size() < 8) bad(origin, "expected at least 8 bytes (the header length), got " + std::to_string(bytes.size()));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxSafetensorsHeader || n > bytes.size() - 8) {
    bad(origin, "header length " + std::to_string(n) + " is too long: expected at most " +
                    std::to_string(std::min<uint64_t>(kMaxSafetensorsHeader, bytes.size() - 8)) + " bytes");
  }
  json header;
  try {
    header = json::parse(bytes.substr(8, n));
  } catch (const json::exception& e) {
    bad(origin, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad(origin, "expected a JSON object as header");
  SafeTensors out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad(origin, "__metadata__: expected a map of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad(origin, "__metadata__." + k + ": expected a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(key, value, origin));
  }
  // The data must be covered exactly: no tensor past the end, no overlap, no hole (the format's rules).
  const std::string_view data = bytes.substr(8 + n);
  std::sort(entries.begin(), entries.end(),  // (begin, end): an empty tensor sorts before one starting there
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t covered = 0;
  for (const auto& e : entries) {
    if (e.end > data.size()) {
      bad(origin, "tensor '" + e.name + "': data_offsets end " + std::to_string(e.end) + " runs past the end of the " +
                      std::to_string(data.size()) + " data bytes");
    }
    if (e.begin < covered) bad(origin, "tensor '" + e.name + "': data_offsets overlap another tensor");
    if (e.begin > covered) bad(origin, "tensor '" + e.name + "': a hole of unindexed bytes before it");
    covered = e.end;
  }
  if (covered != data.size()) bad(origin, std::to_string(data.size() - covered) + " trailing bytes after the last tensor");
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, e.dtype->type);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data.data() + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

SafeTensors read_safetensors(const std::filesystem::path& path) {
  std::string bytes;
  try {
    bytes = util::read_file(path, "weights");
  } catch (const DataError& e) {
    throw CheckpointError(e.what());
  }
  return parse_safetensors(bytes, path.string());
}

}  // namespace lm::checkpoint
