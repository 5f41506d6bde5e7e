// `lmtrain export`: the Hugging Face GPT-2 directory reproduces lmtrain's probabilities in an independent
// GPT-2 forward pass written in Python from config.json and model.safetensors alone (learned and sinusoidal
// positions, tied and untied heads); what GPT-2 cannot express is refused; --format safetensors.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint/safetensors.h"
#include "test_util.h"

namespace lm::test {

namespace {

// Trains a 3-step tiny model with these extra model keys; returns the run directory.
fs::path train_variant(const ScratchDir& dir, const std::string& run, const std::string& model_keys) {
  RunSpec spec;
  spec.run = run;
  spec.model += ", " + model_keys;
  spec.train = "batch_size: 4, max_steps: 3, warmup_steps: 1, eval_every: 0";
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / run;
}

// `inspect probs --json` of the checkpoint `run` against scripts/check_hf_export.py's independent forward of
// its export `out` (model_type `family`), to the script's 1e-5.
void expect_independent_forward_agrees(const ScratchDir& dir, const std::string& name, const fs::path& run,
                                       const fs::path& out, const std::string& family) {
  auto r = run_lmtrain("inspect probs --checkpoint " + run.string() + " --text 'The river flows to the sea' --json -k 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ofstream(dir / (name + ".json")) << r.output.substr(r.output.find('['));
  r = run_command("/usr/bin/python3 " + std::string(LMTRAIN_SOURCE_DIR) + "/scripts/check_hf_export.py " +
                  out.string() + " " + (dir / (name + ".json")).string());
  EXPECT_EQ(r.exit_code, 0) << name << ": " << r.output;
  EXPECT_NE(r.output.find("max |p_" + family + " - p_lmtrain|"), std::string::npos) << r.output;
}

}  // namespace

TEST(Export, HfDirectoryReproducesInspectProbsInAnIndependentGpt2Forward) {
  ScratchDir dir("export");
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"learned_tied", "positions: learned, tie_embeddings: true"},
      {"sin_untied", "positions: sinusoidal, tie_embeddings: false"},
      {"sqrtd_untied", "positions: learned, tie_embeddings: false, embedding_scale: sqrt_d"}};
  for (const auto& [name, keys] : variants) {
    const fs::path run = train_variant(dir, name, keys);
    const fs::path out = dir / (name + "_hf");
    auto r = run_lmtrain("export --checkpoint " + run.string() + " --format hf --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.model",
                          "tokenizer_config.json"}) {
      EXPECT_TRUE(fs::is_regular_file(out / f)) << name << ": " << f;
    }
    const std::string config = slurp(out / "config.json");
    EXPECT_NE(config.find("\"activation_function\": \"gelu\""), std::string::npos) << config;
    EXPECT_NE(config.find("\"model_type\": \"gpt2\""), std::string::npos) << config;
    const bool tied = keys.find("tie_embeddings: true") != std::string::npos;
    EXPECT_NE(config.find(std::string("\"tie_word_embeddings\": ") + (tied ? "true" : "false")), std::string::npos);
    auto st = checkpoint::read_safetensors(out / "model.safetensors");
    bool has_head = false;
    for (auto& [n, t] : st.tensors) has_head = has_head || n == "lm_head.weight";
    EXPECT_EQ(has_head, !tied) << name;
    expect_independent_forward_agrees(dir, name, run, out, "gpt2");
  }
}

// A rope model exports as GPT-NeoX (query_key_value head by head, rotary on every head dimension), checked
// by the independent NeoX forward of scripts/check_hf_export.py; what NeoX computes otherwise is refused.
TEST(Export, RopeModelsExportAsGptNeoxAndReproduceInspectProbs) {
  ScratchDir dir("export_neox");
  for (const auto& [name, keys] : std::vector<std::pair<std::string, std::string>>{
           {"rope_tied", "positions: rope, rope_base: 500"}, {"rope_untied", "positions: rope, tie_embeddings: false"}}) {
    const fs::path run = train_variant(dir, name, keys);
    const fs::path out = dir / (name + "_hf");
    auto r = run_lmtrain("export --checkpoint " + run.string() + " --format hf --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    const std::string config = slurp(out / "config.json");
    EXPECT_NE(config.find("\"model_type\": \"gpt_neox\""), std::string::npos) << config;
    EXPECT_NE(config.find("\"rotary_pct\": 1.0"), std::string::npos) << config;
    EXPECT_NE(config.find("\"use_parallel_residual\": false"), std::string::npos) << config;
    auto st = checkpoint::read_safetensors(out / "model.safetensors");
    bool has_qkv = false;
    for (auto& [n, t] : st.tensors) has_qkv = has_qkv || n == "gpt_neox.layers.0.attention.query_key_value.weight";
    EXPECT_TRUE(has_qkv) << name;
    expect_independent_forward_agrees(dir, name, run, out, "gpt_neox");
  }
  const fs::path relu = train_variant(dir, "rope_relu2", "positions: rope, mlp_activation: relu2");
  auto r = run_lmtrain("export --checkpoint " + relu.string() + " --format hf --out " + (dir / "relu_hf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected a model GPT-NeoX can express, got mlp_activation relu2"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "relu_hf")) << "nothing is written for a refused export";
}

TEST(Export, TiedSqrtDIsRefusedAndTheSafetensorsFormatKeepsLmtrainNames) {
  ScratchDir dir("export_bad");
  const fs::path run = train_variant(dir, "sqrtd_tied", "tie_embeddings: true, embedding_scale: sqrt_d");
  auto r = run_lmtrain("export --checkpoint " + run.string() + " --format hf --out " + (dir / "hf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("embedding_scale sqrt_d with a tied head"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "hf")) << "nothing is written for a refused export";
  r = run_lmtrain("export --checkpoint " + run.string() + " --format safetensors --out " + (dir / "w.safetensors").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(slurp(dir / "w.safetensors"), slurp(fs::path(run / slurp(run / "latest").substr(0, 13)) / "model.safetensors"));
  r = run_lmtrain("export --checkpoint " + run.string() + " --format onnx --out " + (dir / "x").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // --format hf writes a directory: onto an existing file it is refused (exit 2, as GGUF's), the file kept
  const std::string before = slurp(dir / "w.safetensors");
  r = run_lmtrain("export --checkpoint " + run.string() + " --format hf --out " + (dir / "w.safetensors").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected a directory for --format hf"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Hint: choose a directory name"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir / "w.safetensors"), before);
}

namespace {

// The next-token probabilities of `inspect probs --json` (each position's actual token and alternatives).
std::vector<double> probs_of(const fs::path& ckpt) {
  auto r = run_lmtrain("inspect probs --checkpoint " + ckpt.string() + " --text 'The river flows to the sea' --json -k 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> out;
  for (size_t at = r.output.find("\"prob\": "); at != std::string::npos; at = r.output.find("\"prob\": ", at + 1)) {
    out.push_back(std::stod(r.output.substr(at + 8)));
  }
  return out;
}

}  // namespace

TEST(Export, ExportImportExportKeepsEveryTensorAndProbability) {
  ScratchDir dir("roundtrip");
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"tied", "positions: learned, tie_embeddings: true"},
      {"sin_sqrtd_untied", "positions: sinusoidal, tie_embeddings: false, embedding_scale: sqrt_d"}};
  for (const auto& [name, keys] : variants) {
    const fs::path run = train_variant(dir, name, keys);
    const fs::path hf1 = dir / (name + "_hf1"), ck = dir / (name + "_imported") / "step_00000000", hf2 = dir / (name + "_hf2");
    ASSERT_EQ(run_lmtrain("export --checkpoint " + run.string() + " --out " + hf1.string()).exit_code, 0);
    auto r = run_lmtrain("import --from-hf " + hf1.string() + " --out " + ck.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(run_lmtrain("ckpt verify " + ck.string()).exit_code, 0);
    ASSERT_EQ(run_lmtrain("export --checkpoint " + ck.string() + " --out " + hf2.string()).exit_code, 0);
    EXPECT_EQ(slurp(hf1 / "model.safetensors"), slurp(hf2 / "model.safetensors")) << name;
    EXPECT_EQ(slurp(hf1 / "config.json"), slurp(hf2 / "config.json")) << name;
    const auto a = probs_of(run), b = probs_of(ck);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_GT(a.size(), 10u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << name << " value " << i;
  }
  // the imported checkpoint is a starting point like any other
  auto r = run_lmtrain("sample --checkpoint " + (dir / "tied_imported" / "step_00000000").string() + " --generate 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  RunSpec spec;
  spec.run = "ft";
  spec.tokenizer = spec.model = "";
  spec.train = "batch_size: 4, max_steps: 2, warmup_steps: 1, eval_every: 0";
  spec.extra = "finetune: {original_val: " + data_file("tiny_en_val.txt").string() + "}\n";
  r = run_lmtrain("finetune --from " + (dir / "tied_imported" / "step_00000000").string() + " -c " +
                  write_run_config(dir, spec).string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // without original_val there is no corpus for the forgetting report: refused before training
  spec.run = "ft2";
  spec.extra = "";
  r = run_lmtrain("finetune --from " + (dir / "tied_imported" / "step_00000000").string() + " -c " +
                  write_run_config(dir, spec).string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_FALSE(fs::exists(dir / "ft2" / "latest"));
}

TEST(Export, ImportRefusesWhatLmtrainWouldComputeDifferently) {
  ScratchDir dir("import_bad");
  const fs::path run = train_variant(dir, "run", "tie_embeddings: true");
  const fs::path hf = dir / "hf";
  ASSERT_EQ(run_lmtrain("export --checkpoint " + run.string() + " --out " + hf.string()).exit_code, 0);
  auto r = run_lmtrain("import --from-hf " + hf.string() + " --out " + run.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;  // an existing path is never overwritten
  std::string config = slurp(hf / "config.json");
  config.replace(config.find("\"gelu\""), 6, "\"gelu_new\"");
  std::ofstream(hf / "config.json") << config;
  r = run_lmtrain("import --from-hf " + hf.string() + " --out " + (dir / "ck").string());
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("gelu_new"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "ck"));
}

}  // namespace lm::test
