// What each libFuzzer target does with one input, shared by the targets (tests/fuzz/fuzz_*.cpp, built with
// clang by scripts/fuzz.sh) and by the regression test (tests/fuzz_regression_test.cpp), which replays every
// saved input under tests/fuzz/regressions/<target>/ in the normal build. The contract being fuzzed: bad
// bytes end in an lm::Error (a clear message and a documented exit code), never a crash, a hang, undefined
// behaviour or another exception type (which main() would report as an internal error, exit 1).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/tensor_files.h"
#include "config/config.h"
#include "data/token_file.h"
#include "model/gpt.h"
#include "util/errors.h"

namespace lm::fuzz {

namespace fs = std::filesystem;

/// Splits an input at NUL bytes (a way to pack several files, or a file and --set values, into one input).
inline std::vector<std::string> split_nul(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(data[i]));
    }
  }
  return parts;
}

/// A per-process scratch directory for targets that read files.
inline const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("lmtrain-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

inline void write_bytes(const fs::path& p, std::string_view bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The config loader: the part before the first NUL is the YAML file, each later part one --set value.
inline void config_input(const uint8_t* data, size_t size) {
  auto parts = split_nul(data, size, 8);
  const std::string yaml = parts.front();
  parts.erase(parts.begin());
  try {
    config::parse_config(yaml, "fuzz.yaml", parts);
  } catch (const Error&) {
  }
}

/// The token-file reader: the input is a whole token file, opened (header, size, every id) and read.
inline void token_file_input(const uint8_t* data, size_t size) {
  const fs::path p = scratch() / "fuzz.bin";
  write_bytes(p, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    data::read_token_file_info(p);
    data::TokenFile f(p);
    int64_t sum = 0;
    for (uint64_t i = 0; i < f.size(); ++i) sum += f.at(i);
    if (sum < 0) __builtin_trap();  // ids are unsigned: a negative sum is a reader bug
  } catch (const Error&) {
  }
}

/// The safetensors reader on the input's bytes.
inline void safetensors_input(const uint8_t* data, size_t size) {
  try {
    checkpoint::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
  } catch (const Error&) {
  }
}

/// A checkpoint whose manifest.json, model.safetensors, arch.json and trainer_state.json are the input's
/// NUL-separated parts, in that order, beside a real config.yaml and tokenizer.model: the manifest
/// verification, the weight loader (into the tiny model of the unit tests), and the two JSON readers.
inline void checkpoint_input(const uint8_t* data, size_t size) {
  static const fs::path dir = [] {
    const fs::path d = scratch() / "ckpt";
    fs::create_directories(d);
    write_bytes(d / "config.yaml", "run: {seed: 1}\n");
    write_bytes(d / "tokenizer.model", "not read by these readers\n");
    return d;
  }();
  static model::Gpt model = [] {
    model::GptConfig c;
    c.vocab_size = 128;
    c.d_model = 16;
    c.n_layers = 2;
    c.n_heads = 2;
    c.max_seq_len = 8;
    return model::Gpt(c);
  }();
  const auto parts = split_nul(data, size, 4);
  const char* names[] = {"manifest.json", "model.safetensors", "arch.json", "trainer_state.json"};
  for (size_t i = 0; i < 4; ++i) write_bytes(dir / names[i], i < parts.size() ? parts[i] : std::string());
  try {
    checkpoint::verify_checkpoint(dir);
  } catch (const Error&) {
  }
  try {
    checkpoint::load_weights(*model, dir);
  } catch (const Error&) {
  }
  try {
    checkpoint::read_arch(dir);
  } catch (const Error&) {
  }
  try {
    checkpoint::read_trainer_state(dir);
  } catch (const Error&) {
  }
}

}  // namespace lm::fuzz
