#include "tokenizer/model_spec.h"

#include <cstring>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::tokenizer {
namespace {

// One protobuf message's bytes, read field by field (wire types 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32). Field numbers are sentencepiece_model.proto's.
class Wire {
 public:
  Wire(const std::string& bytes, size_t begin, size_t end, const std::string& file)
      : b_(bytes), at_(begin), end_(end), file_(file) {}

  bool done() const { return at_ >= end_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto byte = static_cast<uint8_t>(b_[at_++]);
      v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    bad("a varint longer than 10 bytes");
  }

  /// The next field's number and wire type.
  std::pair<uint32_t, uint32_t> tag() {
    const uint64_t t = varint();
    return {static_cast<uint32_t>(t >> 3), static_cast<uint32_t>(t & 7)};
  }

  /// A length-delimited field's extent, skipped over.
  Wire sub() {
    const uint64_t n = varint();
    need(n);
    Wire w(b_, at_, at_ + n, file_);
    at_ += n;
    return w;
  }

  std::string text() {
    Wire w = sub();
    return b_.substr(w.at_, w.end_ - w.at_);
  }

  float fixed32_float() {
    need(4);
    float f;
    std::memcpy(&f, b_.data() + at_, 4);  // little-endian, as protobuf and this machine
    at_ += 4;
    return f;
  }

  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: need(8); at_ += 8; return;
      case 2: sub(); return;
      case 5: need(4); at_ += 4; return;
      default: bad("wire type " + std::to_string(wire_type));
    }
  }

  [[noreturn]] void bad(const std::string& what) const {
    throw DataError("[tokenizer] '" + file_ + "': expected a SentencePiece model (protobuf ModelProto), got " + what +
                    " at byte " + std::to_string(at_) + ". Hint: pass a tokenizer.model written by SentencePiece.");
  }

 private:
  void need(uint64_t n) const {
    if (n > end_ - at_) bad("a field running past its message");
  }

  const std::string& b_;
  size_t at_, end_;
  const std::string& file_;
};

PieceSpec read_piece(Wire w) {
  PieceSpec p;
  while (!w.done()) {
    const auto [field, type] = w.tag();
    if (field == 1 && type == 2) {
      p.piece = w.text();
    } else if (field == 2 && type == 5) {
      p.score = w.fixed32_float();
    } else if (field == 3 && type == 0) {
      const uint64_t t = w.varint();
      if (t < 1 || t > 6) w.bad("piece type " + std::to_string(t));
      p.type = static_cast<PieceType>(t);
    } else {
      w.skip(type);
    }
  }
  return p;
}

void read_trainer_spec(Wire w, ModelSpec& s) {
  static const char* const kAlgorithms[] = {"", "unigram", "bpe", "word", "char"};
  while (!w.done()) {
    const auto [field, type] = w.tag();
    if (field == 3 && type == 0) {
      const uint64_t t = w.varint();
      s.algorithm = t >= 1 && t <= 4 ? kAlgorithms[t] : "type " + std::to_string(t);
    } else if (field == 35 && type == 0) {
      s.byte_fallback = w.varint() != 0;
    } else {
      w.skip(type);
    }
  }
}

void read_normalizer_spec(Wire w, ModelSpec& s) {
  while (!w.done()) {
    const auto [field, type] = w.tag();
    if (field == 1 && type == 2) {
      s.normalization = w.text();
    } else if (field == 3 && type == 0) {
      s.add_dummy_prefix = w.varint() != 0;
    } else if (field == 4 && type == 0) {
      s.remove_extra_whitespaces = w.varint() != 0;
    } else {
      w.skip(type);
    }
  }
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// A length-delimited field (wire type 2).
void put_message(std::string& out, uint32_t field, const std::string& body) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(out, body.size());
  out += body;
}

}  // namespace

std::string append_pieces(const std::string& model_bytes, const std::vector<std::string>& pieces,
                          const std::vector<float>& scores, int32_t vocab_size) {
  std::string out = model_bytes;
  for (size_t i = 0; i < pieces.size(); ++i) {  // ModelProto.pieces (1): {piece 1, score 2 (fixed32), type 3}
    std::string body;
    put_message(body, 1, pieces[i]);
    body += static_cast<char>((2 << 3) | 5);
    char f[4];
    std::memcpy(f, &scores[i], 4);  // little-endian, as protobuf and this machine
    body.append(f, 4);
    body += static_cast<char>(3 << 3);
    put_varint(body, static_cast<uint64_t>(PieceType::kNormal));
    put_message(out, 1, body);
  }
  std::string spec;  // ModelProto.trainer_spec (2): vocab_size (4)
  spec += static_cast<char>(4 << 3);
  put_varint(spec, static_cast<uint64_t>(vocab_size));
  put_message(out, 2, spec);
  return out;
}

std::string verbatim_model(const std::string& model_bytes) {
  // ModelProto.normalizer_spec (3): add_dummy_prefix (3) = false, remove_extra_whitespaces (4) = false
  const std::string spec = {static_cast<char>(3 << 3), '\0', static_cast<char>(4 << 3), '\0'};
  std::string out = model_bytes;
  put_message(out, 3, spec);
  return out;
}

std::string normalization_name(const ModelSpec& s) {
  return s.normalization == "nmt_nfkc" ? "nfkc" : s.normalization;
}

ModelSpec read_model_spec(const std::filesystem::path& model_file) {
  const std::string bytes = util::read_file(model_file, "tokenizer model");
  const std::string name = model_file.string();
  ModelSpec s;
  Wire w(bytes, 0, bytes.size(), name);
  while (!w.done()) {
    const auto [field, type] = w.tag();
    if (field == 1 && type == 2) {
      s.pieces.push_back(read_piece(w.sub()));
    } else if (field == 2 && type == 2) {
      read_trainer_spec(w.sub(), s);
    } else if (field == 3 && type == 2) {
      read_normalizer_spec(w.sub(), s);
    } else {
      w.skip(type);
    }
  }
  if (s.pieces.empty()) {
    throw DataError("[tokenizer] '" + name + "': expected a SentencePiece model with pieces, got none. Hint: pass a "
                    "tokenizer.model written by SentencePiece.");
  }
  return s;
}

}  // namespace lm::tokenizer
