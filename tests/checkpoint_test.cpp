// Checkpoints: save -> load gives identical logits; manifest catches corruption; names and shapes checked;
// the safetensors weights file: round trip, every malformed case refused, read by Python by the spec alone,
// and checkpoints from before it (model.pt) still load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "test_util.h"
#include "train/optimizer.h"
#include "train/resume.h"
#include "util/errors.h"
#include "util/hash.h"

namespace lm::test {

namespace {
model::GptConfig tiny(bool tied = true) { return tiny_config(128, tied); }

fs::path save_tiny(const fs::path& run, model::Gpt& m, int64_t step) {
  train::TrainConfig tc;
  train::RunOptimizer opt(train::split_decay_groups(*m), tc);
  checkpoint::SaveRequest req;
  req.model = m.get();
  req.optimizer = &opt.adamw();
  req.state.step = step;
  req.config_yaml = "run: {dir: x}\n";
  req.tokenizer_model = english_tokenizer_path();
  return checkpoint::save_checkpoint(run, checkpoint::step_name(step), req);
}
}  // namespace

TEST(Checkpoint, SaveThenLoadGivesIdenticalLogits) {
  ScratchDir run("ck");
  for (bool tied : {true, false}) {
    torch::manual_seed(10);
    model::Gpt m(tiny(tied));
    fs::path dir = save_tiny(run.path(), m, tied ? 5 : 6);
    auto loaded = checkpoint::load_checkpoint(dir);
    EXPECT_EQ(loaded.arch, m->config());
    EXPECT_EQ(loaded.state.step, tied ? 5 : 6);
    auto x = torch::randint(0, 128, {2, 8}, torch::kInt64);
    m->eval();
    loaded.model->eval();
    EXPECT_TRUE(torch::equal(m->forward(x), loaded.model->forward(x)));
  }
  EXPECT_EQ(checkpoint::resolve_checkpoint(run.path()), run / "step_00000006");
  for (auto& e : fs::directory_iterator(run.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "temp dir left: " << e.path();
  }
}

TEST(Checkpoint, CorruptionIsDetectedByTheManifest) {
  ScratchDir run("ckbad");
  torch::manual_seed(11);
  model::Gpt m(tiny());
  fs::path dir = save_tiny(run.path(), m, 1);
  EXPECT_NO_THROW(checkpoint::verify_checkpoint(dir));
  {
    std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  EXPECT_THROW(checkpoint::verify_checkpoint(dir), CheckpointError);
  std::ofstream(dir / "manifest.json") << "[1, 2]";  // valid JSON, wrong shape
  EXPECT_THROW(checkpoint::verify_checkpoint(dir), CheckpointError);
  fs::remove(dir / "manifest.json");
  EXPECT_THROW(checkpoint::load_checkpoint(dir), CheckpointError);
}

TEST(Checkpoint, WeightsWithWrongShapeOrNamesAreRejectedBeforeCopying) {
  ScratchDir run("ckshape");
  torch::manual_seed(12);
  model::Gpt small(tiny());
  fs::path dir = save_tiny(run.path(), small, 1);
  auto wide_cfg = tiny();
  wide_cfg.d_model = 32;
  model::Gpt wide(wide_cfg);
  auto before = wide->tok_emb->weight.clone();
  try {
    checkpoint::load_weights(*wide, dir);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("tok_emb.weight"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(torch::equal(before, wide->tok_emb->weight));
  model::Gpt untied(tiny(false));
  EXPECT_THROW(checkpoint::load_weights(*untied, dir), CheckpointError);
}

TEST(Checkpoint, PruneKeepsTheNewest) {
  ScratchDir run("ckprune");
  torch::manual_seed(13);
  model::Gpt m(tiny());
  for (int64_t s : {1, 2, 3, 4}) save_tiny(run.path(), m, s);
  checkpoint::prune_checkpoints(run.path(), 2);
  EXPECT_FALSE(fs::exists(run / "step_00000002"));
  EXPECT_TRUE(fs::exists(run / "step_00000003"));
  EXPECT_TRUE(fs::exists(run / "step_00000004"));
}

}  // namespace lm::test

namespace lm::test {

namespace {

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file from a header text and a data section.
std::string file_of(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

std::string parse_error(const std::string& bytes) {
  try {
    checkpoint::parse_safetensors(bytes, "t.safetensors");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no error)";
}

// Rewrites a checkpoint's manifest after its files were changed on purpose, so only the content is wrong.
void rehash_manifest(const fs::path& dir) {
  nlohmann::json files = nlohmann::json::array();
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n == "manifest.json") continue;
    files.push_back({{"name", n}, {"bytes", fs::file_size(e.path())}, {"sha256", util::sha256_file(e.path())}});
  }
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"format_version", checkpoint::kFormatVersion}, {"files", files}}.dump();
}

}  // namespace

TEST(Safetensors, RoundTripsEveryDtypeWithMetadataAndAlignedData) {
  checkpoint::SafeTensors st;
  st.tensors = {{"b.f32", torch::randn({3, 5})},
                {"a.bf16", torch::randn({4}).to(torch::kBFloat16)},
                {"c.i64", torch::arange(6, torch::kInt64).view({2, 3})},
                {"d.empty", torch::empty({0, 7})},
                {"e.bool", torch::tensor({true, false, true})}};
  st.metadata = {{"format", "pt"}, {"lmtrain_arch", "{\"d_model\":16}"}};
  const std::string bytes = checkpoint::safetensors_bytes(st);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data section not 8-byte aligned";
  auto back = checkpoint::parse_safetensors(bytes, "mem");
  EXPECT_EQ(back.metadata, st.metadata);
  ASSERT_EQ(back.tensors.size(), 5u);
  EXPECT_EQ(back.tensors[0].first, "a.bf16");  // sorted by name
  for (auto& entry : st.tensors) {  // (a lambda may not capture a structured binding before C++20)
    const std::string& name = entry.first;
    const torch::Tensor& t = entry.second;
    auto it = std::find_if(back.tensors.begin(), back.tensors.end(), [&](auto& p) { return p.first == name; });
    ASSERT_NE(it, back.tensors.end()) << name;
    EXPECT_EQ(it->second.scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(it->second, t)) << name;
  }
  EXPECT_EQ(checkpoint::safetensors_bytes(back), bytes) << "not byte-stable";
}

TEST(Safetensors, MalformedFilesAreRefusedWithAReason) {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(parse_error(file_of(ok, std::string(8, '\0'))), "(no error)");
  EXPECT_NE(parse_error("abc").find("expected at least 8 bytes"), std::string::npos);
  EXPECT_NE(parse_error(le64(1000) + "{}").find("header length 1000 is too long"), std::string::npos);
  EXPECT_NE(parse_error(le64(uint64_t{1} << 40) + std::string(64, ' ')).find("too long"), std::string::npos);
  EXPECT_NE(parse_error(file_of("{not json", "")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error(file_of(R"({"w":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", "ab")).find("unknown dtype \"F8\""),
            std::string::npos);
  EXPECT_NE(parse_error(file_of(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')))
                .find("needs 12 bytes, data_offsets give 8"),
            std::string::npos);
  EXPECT_NE(parse_error(file_of(ok, std::string(4, '\0'))).find("runs past the end"), std::string::npos);
  const std::string overlap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_NE(parse_error(file_of(overlap, std::string(8, '\0'))).find("overlap"), std::string::npos);
  const std::string hole = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_NE(parse_error(file_of(hole, std::string(8, '\0'))).find("hole"), std::string::npos);
  EXPECT_NE(parse_error(file_of(ok, std::string(12, '\0'))).find("trailing bytes"), std::string::npos);
  EXPECT_NE(parse_error(file_of(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", "")).find("non-negative"),
            std::string::npos);
  // a size that overflows 64 bits, and a deeply nested value (messages never dump untrusted JSON)
  EXPECT_NE(parse_error(file_of(R"({"w":{"dtype":"F32","shape":[1099511627775,1099511627775],"data_offsets":[0,0]}})", ""))
                .find("larger than any file"),
            std::string::npos);
  const std::string deep = "{\"w\":{\"dtype\":" + std::string(100000, '[') + std::string(100000, ']') +
                           ",\"shape\":[1],\"data_offsets\":[0,4]}}";
  EXPECT_NE(parse_error(file_of(deep, std::string(4, '\0'))).find("unknown dtype a JSON array"), std::string::npos);
  // an empty tensor at the offset where another starts is valid
  const std::string empty_first = R"({"z":{"dtype":"F64","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(parse_error(file_of(empty_first, std::string(8, '\0'))), "(no error)");
}

TEST(Safetensors, CheckpointsHoldModelSafetensorsThatPythonReadsByTheSpec) {
  ScratchDir run("stpy");
  torch::manual_seed(14);
  model::Gpt m(tiny(false));
  const fs::path dir = save_tiny(run.path(), m, 1);
  EXPECT_TRUE(fs::is_regular_file(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.pt"));
  auto r = run_command("/usr/bin/python3 " + std::string(LMTRAIN_SOURCE_DIR) + "/scripts/read_safetensors.py " +
                       (dir / "model.safetensors").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The same lines from LibTorch's tensors: name, dtype, shape, SHA-256 of the little-endian bytes.
  std::vector<std::string> expected;
  for (auto& [name, t] : model::named_weights(*m)) {
    std::string shape;
    for (auto d : t.sizes()) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    auto c = t.detach().contiguous();
    expected.push_back(name + " F32 " + shape + " " +
                       util::sha256_hex(std::string_view(static_cast<const char*>(c.data_ptr()), c.nbytes())));
  }
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> got;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("metadata ", 0) != 0) got.push_back(line);
  }
  EXPECT_EQ(got, expected);
  EXPECT_NE(r.output.find("metadata lmtrain_arch {"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"tie_embeddings\":false"), std::string::npos) << r.output;
}

TEST(Safetensors, AnOldCheckpointWithOnlyModelPtStillLoadsAndABadFileIsACheckpointError) {
  ScratchDir run("stold");
  torch::manual_seed(15);
  model::Gpt m(tiny());
  const fs::path dir = save_tiny(run.path(), m, 1);
  // what checkpoints held before model.safetensors: a torch::pickle_save dict in model.pt
  c10::Dict<std::string, torch::Tensor> dict;
  for (auto& [name, t] : model::named_weights(*m)) dict.insert(name, t.detach().clone());
  const std::vector<char> pt = torch::pickle_save(dict);
  fs::remove(dir / "model.safetensors");
  std::ofstream(dir / "model.pt", std::ios::binary).write(pt.data(), static_cast<std::streamsize>(pt.size()));
  rehash_manifest(dir);
  auto old = checkpoint::load_checkpoint(dir);
  for (auto& [name, t] : model::named_weights(*old.model)) {
    bool same = false;
    for (auto& [n2, t2] : model::named_weights(*m)) same = same || (n2 == name && torch::equal(t, t2));
    EXPECT_TRUE(same) << name;
  }
  // a malformed model.safetensors whose manifest agrees (a bug, not a disk error): refused, exit 4
  std::ofstream(dir / "model.safetensors", std::ios::binary) << le64(1 << 20) << "{}";
  rehash_manifest(dir);
  EXPECT_THROW(checkpoint::load_checkpoint(dir), CheckpointError);
  auto r = run_lmtrain("inspect probs --checkpoint " + dir.string() + " --text 'The river'");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("[safetensors]"), std::string::npos) << r.output;
}

// TrainerState's fields are listed once (checkpoint.h visit_state_fields): changing any one of them changes
// exactly its key of trainer_state.json and reads back; a field an older file may lack keeps its default
// when missing, and a required one is refused. A member missing from the list fails a static_assert.
TEST(TrainerState, EveryListedFieldReachesTheJsonAndReadsBack) {
  const checkpoint::TrainerState base;
  const auto base_json = nlohmann::json::parse(checkpoint::trainer_state_json(base));
  size_t n = 0;
  checkpoint::visit_state_fields(base, [&](const char*, const auto&, checkpoint::Presence) { ++n; });
  EXPECT_EQ(base_json.size(), n);
  for (size_t i = 0; i < n; ++i) {
    checkpoint::TrainerState other = base;
    size_t at = 0;
    std::string key;
    checkpoint::Presence presence{};
    checkpoint::visit_state_fields(other, [&](const char* k, auto& v, checkpoint::Presence p) {
      if (at++ != i) return;
      key = k;
      presence = p;
      using T = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<T, bool>) {
        v = !v;
      } else if constexpr (std::is_same_v<T, std::string>) {
        v = "changed";
      } else if constexpr (std::is_same_v<T, checkpoint::DataIdentity>) {
        v.train_tokens = 7;
      } else {
        v = static_cast<T>(3);
      }
    });
    const std::string text = checkpoint::trainer_state_json(other);
    const auto j = nlohmann::json::parse(text);
    size_t differing = 0;
    for (const auto& [k, v] : j.items()) differing += v != base_json.at(k) ? 1 : 0;
    EXPECT_EQ(differing, 1u) << key;
    EXPECT_EQ(checkpoint::trainer_state_json(checkpoint::trainer_state_from_json(text)), text) << key << " reads back";
    auto lacking = j;
    lacking.erase(key);
    if (presence == checkpoint::Presence::kMayLack) {
      EXPECT_EQ(checkpoint::trainer_state_json(checkpoint::trainer_state_from_json(lacking.dump())),
                checkpoint::trainer_state_json(base)) << key << " missing keeps its default";
    } else {
      EXPECT_THROW(checkpoint::trainer_state_from_json(lacking.dump()), nlohmann::json::exception) << key;
    }
  }
}

// The resume's data check walks the same list (checkpoint.h visit_identity_fields): a difference in any one
// field of the recorded data is refused, naming it.
TEST(TrainerState, EveryDataIdentityFieldIsComparedOnResume) {
  const checkpoint::DataIdentity base{"aa", "bb", "cc", 10, 20};
  EXPECT_NO_THROW(train::check_data_identity(base, base));
  size_t n = 0;
  checkpoint::visit_identity_fields(base, [&](const char*, const auto&, checkpoint::Presence) { ++n; });
  for (size_t i = 0; i < n; ++i) {
    checkpoint::DataIdentity other = base;
    size_t at = 0;
    std::string key;
    checkpoint::visit_identity_fields(other, [&](const char* k, auto& v, checkpoint::Presence) {
      if (at++ != i) return;
      key = k;
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
        v = "dd";
      } else {
        v = 3;
      }
    });
    try {
      train::check_data_identity(base, other);
      ADD_FAILURE() << key << " differs but the resume was accepted";
    } catch (const CheckpointError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("does not match this run"), std::string::npos) << key << ": " << what;
      size_t mismatches = 0;
      for (size_t at_text = what.find(" vs config "); at_text != std::string::npos;
           at_text = what.find(" vs config ", at_text + 1)) {
        ++mismatches;
      }
      EXPECT_EQ(mismatches, 1u) << key << ": " << what;
    }
  }
}

}  // namespace lm::test
