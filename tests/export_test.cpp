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
    r = run_lmtrain("inspect probs --checkpoint " + run.string() + " --text 'The river flows to the sea' --json -k 5");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ofstream(dir / (name + ".json")) << r.output.substr(r.output.find('['));
    r = run_command("/usr/bin/python3 " + std::string(LMTRAIN_SOURCE_DIR) + "/scripts/check_hf_export.py " +
                    out.string() + " " + (dir / (name + ".json")).string());
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.output;
    EXPECT_NE(r.output.find("max |p_gpt2 - p_lmtrain|"), std::string::npos) << r.output;
  }
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
}

}  // namespace lm::test
