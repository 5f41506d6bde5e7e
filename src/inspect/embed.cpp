#include "inspect/embed.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "sample/sampler.h"
#include "tokenizer/corpus_text.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::inspect {
namespace fs = std::filesystem;

Pool parse_pool(const std::string& name) { return model::parse_pool(name, "[embed] --pool"); }

std::string describe(const EmbedOptions& o) {
  if (o.from_input) return "from-input";
  return "pool=" + model::to_string(o.pool) + " layer=" + (o.layer < 0 ? std::string("final") : std::to_string(o.layer));
}

std::vector<std::string> read_lines(const fs::path& path) {
  tokenizer::check_corpus_file(path, "--file");
  const std::string text = util::read_file(path, "--file");
  tokenizer::check_corpus_text(text, path);  // empty, NUL, invalid UTF-8, overlong lines
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      throw DataError("[embed] '" + path.string() + "' line " + std::to_string(lines.size() + 1) +
                      " is blank: expected one text per line (one vector each). Hint: remove blank lines, e.g. "
                      "`grep -v '^[[:space:]]*$'`.");
    }
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::vector<int32_t> line_ids(const tokenizer::Tokenizer& tok, const std::string& text, int64_t max_seq_len, size_t line) {
  auto ids = sample::prompt_context(tok, text);  // the implied line start, then the pieces
  if (ids.size() < 2) {
    throw DataError("[embed] line " + std::to_string(line) +
                    " encodes to no pieces (only characters the tokenizer drops, such as zero-width spaces): expected "
                    "text. Hint: remove the line.");
  }
  if (static_cast<int64_t>(ids.size()) > max_seq_len) ids.resize(static_cast<size_t>(max_seq_len));
  return ids;
}

LineCheck check_lines(const tokenizer::Tokenizer& tok, const std::vector<std::string>& texts, int64_t max_seq_len) {
  LineCheck c;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (static_cast<int64_t>(line_ids(tok, texts[i], max_seq_len + 1, i + 1).size()) > max_seq_len) ++c.cut;
    const auto unknown = tok.unknown_characters(texts[i]);
    if (unknown.empty()) continue;
    ++c.unknown_lines;
    for (const auto& u : unknown) {
      if (c.unknown_characters.size() < 10 &&
          std::find(c.unknown_characters.begin(), c.unknown_characters.end(), u) == c.unknown_characters.end()) {
        c.unknown_characters.push_back(u);
      }
    }
  }
  return c;
}

Embedded embed_texts(model::GptImpl& model, const tokenizer::Tokenizer& tok, const std::vector<std::string>& texts,
                     const EmbedOptions& o, const std::function<void(size_t, size_t)>& progress) {
  const int64_t L = static_cast<int64_t>(model.blocks->size()), T = model.config().max_seq_len;
  if (o.layer < -1 || o.layer > L) {
    throw ConfigError("[embed] --layer: expected 0.." + std::to_string(L) + " (0 = the input vectors, N = after block N-1), got " +
                      std::to_string(o.layer));
  }
  if (o.batch < 1) throw ConfigError("[embed] --batch: expected at least 1, got " + std::to_string(o.batch));
  model.eval();
  torch::NoGradGuard no_grad;
  Embedded out;
  const int64_t C = model.config().d_model;
  auto vectors = torch::empty({static_cast<int64_t>(texts.size()), C}, torch::kFloat64);
  const auto table = model.tok_emb->weight.detach().to(torch::kCPU, torch::kFloat64);
  const std::string want = o.layer == 0 ? "" : "blocks." + std::to_string(o.layer - 1);
  for (size_t from = 0; from < texts.size(); from += static_cast<size_t>(o.batch)) {
    const size_t n = std::min(static_cast<size_t>(o.batch), texts.size() - from);
    std::vector<std::vector<int32_t>> ids(n);
    int64_t longest = 0;
    for (size_t i = 0; i < n; ++i) {
      ids[i] = line_ids(tok, texts[from + i], T, from + i + 1);  // check_lines counts the cut ones
      longest = std::max(longest, static_cast<int64_t>(ids[i].size()));
    }
    torch::Tensor states;  // (n,longest,C): the hidden states pooled over, unless from_input
    if (!o.from_input) {
      // shorter lines are padded at the end: attention is causal, so padding never reaches their pieces
      auto idx = torch::full({static_cast<int64_t>(n), longest}, tok.eos_id(), torch::kInt64);
      for (size_t i = 0; i < n; ++i) {
        for (size_t p = 0; p < ids[i].size(); ++p) idx[static_cast<int64_t>(i)][static_cast<int64_t>(p)] = ids[i][p];
      }
      torch::Tensor input, picked;
      auto h = model.forward_hidden(idx, [&](const std::string& stage, const torch::Tensor& t) {
        if (stage == "tok_emb" || stage == "+pos_emb") input = t;
        if (stage == want) picked = t;
      });
      states = (o.layer < 0 ? h : o.layer == 0 ? input : picked).to(torch::kCPU, torch::kFloat64);
    }
    std::vector<int64_t> lengths(n);  // pieces, at positions 1..len
    for (size_t i = 0; i < n; ++i) lengths[i] = static_cast<int64_t>(ids[i].size()) - 1;
    if (o.from_input) {
      for (size_t i = 0; i < n; ++i) {
        vectors[static_cast<int64_t>(from + i)] =
            table.index_select(0, torch::tensor(std::vector<int64_t>(ids[i].begin() + 1, ids[i].end()))).mean(0);
      }
    } else {
      vectors.narrow(0, static_cast<int64_t>(from), static_cast<int64_t>(n)).copy_(model::pool_states(states, lengths, o.pool));
    }
    if (progress) progress(from + n, texts.size());
  }
  out.vectors = vectors.to(torch::kFloat32);
  return out;
}

namespace {

std::string npy_bytes(const torch::Tensor& v) {
  const auto c = v.to(torch::kCPU, torch::kFloat32).contiguous();
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(c.size(0)) + ", " +
                       std::to_string(c.size(1)) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<size_t>(c.numel()) * sizeof(float));
  return out;
}

std::string tsv_bytes(const torch::Tensor& v) {
  const auto c = v.to(torch::kCPU, torch::kFloat32).contiguous();
  const float* p = c.data_ptr<float>();
  std::string out;
  char buf[32];
  for (int64_t r = 0; r < c.size(0); ++r) {
    for (int64_t j = 0; j < c.size(1); ++j) {
      std::snprintf(buf, sizeof buf, "%s%.9g", j ? "\t" : "", static_cast<double>(p[r * c.size(1) + j]));
      out += buf;
    }
    out += '\n';
  }
  return out;
}

fs::path metadata_tsv(const fs::path& out) {
  fs::path m = out;
  m.replace_extension(".metadata.tsv");
  return m;
}

std::string head_of(const fs::path& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// The rows of a TSV of numbers, each with the same count of fields; 0 for anything else.
int64_t tsv_rows(const fs::path& path) {
  std::ifstream in(path);
  int64_t rows = 0;
  size_t width = 0;
  for (std::string line; std::getline(in, line); ++rows) {
    std::istringstream fields(line);
    size_t n = 0;
    for (std::string field; std::getline(fields, field, '\t'); ++n) {
      char* end = nullptr;
      std::strtod(field.c_str(), &end);
      if (field.empty() || *end != '\0') return 0;
    }
    if (n == 0 || (rows > 0 && n != width)) return 0;
    width = n;
  }
  return rows;
}

int64_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

bool is_embedding_file(const fs::path& path) {
  const std::string ext = path.extension().string();
  try {
    if (ext == ".safetensors") {
      const auto st = checkpoint::read_safetensors(path);
      const auto f = st.metadata.find("format");
      return f != st.metadata.end() && f->second == "lmtrain-embed";
    }
    if (ext == ".npy") {  // the header npy_bytes writes: float32, C order, two dimensions
      const std::string h = head_of(path, 128);
      return h.rfind("\x93NUMPY", 0) == 0 && h.find("'descr': '<f4'") != std::string::npos &&
             h.find("'fortran_order': False") != std::string::npos && std::regex_search(h, std::regex("'shape': \\(\\d+, \\d+\\)"));
    }
    if (ext == ".tsv") return tsv_rows(path) > 0;
  } catch (const std::exception&) {
    return false;
  }
  return false;
}

void check_embedding_output(const fs::path& out, const std::string& role) {
  const std::string ext = out.extension().string();
  if (ext != ".safetensors" && ext != ".npy" && ext != ".tsv") {
    throw ConfigError("[embed] " + role + ": expected a name ending in .safetensors, .npy or .tsv, got '" + out.string() + "'");
  }
  util::check_output_directory(out, "embed", role);
  for (const auto& p : ext == ".tsv" ? std::vector<fs::path>{out, metadata_tsv(out)} : std::vector<fs::path>{out}) {
    // a metadata.tsv is ours when an embedding .tsv with as many rows is beside it
    const bool ours = p == out ? is_embedding_file(p) : tsv_rows(out) > 0 && tsv_rows(out) == count_lines(p);
    if (fs::exists(p) && !ours) {
      throw ConfigError("[embed] " + role + ": '" + p.string() +
                        "' exists and is not an embedding file written by lmtrain embed: not overwritten. Hint: choose "
                        "another name or remove it.");
    }
  }
}

void write_embeddings(const fs::path& out, const torch::Tensor& vectors, const std::vector<std::string>& texts,
                      std::map<std::string, std::string> metadata, const std::string& role) {
  check_embedding_output(out, role);
  const std::string ext = out.extension().string();
  if (ext == ".safetensors") {
    metadata["format"] = "lmtrain-embed";
    checkpoint::SafeTensors st;
    st.tensors.emplace_back("embeddings", vectors.to(torch::kCPU, torch::kFloat32).contiguous());
    st.metadata = std::move(metadata);
    util::atomic_write_file(out, checkpoint::safetensors_bytes(st));
  } else if (ext == ".npy") {
    util::atomic_write_file(out, npy_bytes(vectors));
  } else {
    std::string names;
    for (auto t : texts) {  // one line per vector: tabs and line breaks inside a text become spaces
      for (char& c : t) {
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
      }
      names += t + "\n";
    }
    util::atomic_write_file(out, tsv_bytes(vectors));
    util::atomic_write_file(metadata_tsv(out), names);
  }
}

std::vector<std::pair<int64_t, double>> nearest_lines(const torch::Tensor& vectors, const torch::Tensor& query, int k) {
  const int64_t N = vectors.size(0);
  if (k < 1 || k > N) throw ConfigError("[embed] -k: expected 1.." + std::to_string(N) + " (the lines), got " + std::to_string(k));
  auto v = vectors.to(torch::kFloat64);
  auto q = query.to(torch::kFloat64);
  auto cos = v.matmul(q) / (v.norm(2, 1) * q.norm()).clamp_min(1e-300);  // (N)
  auto top = cos.topk(k);
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t i = 0; i < k; ++i) {
    out.emplace_back(std::get<1>(top)[i].item<int64_t>(), std::get<0>(top)[i].item<double>());
  }
  return out;
}

fs::path cache_path(const fs::path& lines) { return fs::path(lines.string() + ".embed-cache.safetensors"); }

}  // namespace lm::inspect
