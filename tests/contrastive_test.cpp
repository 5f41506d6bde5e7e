// finetune.objective contrastive: InfoNCE against a hand computation and finite differences, next_line pairs
// within a file, pairs files refused by line, the retrieval metric against scripts/retrieval_score.py, and
// through the binary: the encoder's pooling as embed's default, a frozen table bit-identical, bitwise resume,
// and --nproc 2 against one process with grad_accum 2.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "inspect/embed.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/contrastive.h"

namespace lm::test {

namespace {

// Pretrains 4 steps on tiny_en.txt; returns the run directory.
fs::path pretrain(const ScratchDir& dir) {
  RunSpec spec;
  spec.run = "pre";
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / "pre";
}

// The arguments of a contrastive fine-tune of `from` on tiny_en.txt (next_line positives) into dir/<run>.
std::string contrastive_args(const ScratchDir& dir, const fs::path& from, const std::string& run, const std::string& extra,
                             const std::string& train = "batch_size: 4, max_steps: 5, warmup_steps: 1, lr: 0.01, eval_every: 0") {
  RunSpec spec;
  spec.run = run;
  spec.tokenizer = spec.model = "";
  spec.train = train;
  spec.extra = "finetune: {objective: contrastive, positives: next_line, drift_top_k: 3}\n";
  return "finetune --from " + from.string() + " -c " + write_run_config(dir, spec).string() + " " + extra;
}

torch::Tensor weights(const fs::path& ckpt, const std::string& name) {
  auto c = checkpoint::load_checkpoint(ckpt);
  for (auto& [n, p] : model::named_weights(*c.model)) {
    if (n == name) return p.detach().clone();
  }
  return {};
}

}  // namespace

TEST(Contrastive, InfoNceMatchesAHandComputationAndFiniteDifferences) {
  auto a = torch::tensor({{1.0, 0.0, 0.5}, {0.2, 1.0, -0.3}, {-0.4, 0.3, 1.0}}, torch::kDouble).requires_grad_(true);
  auto b = torch::tensor({{0.9, 0.1, 0.4}, {0.5, -0.2, 0.1}, {0.0, 0.6, 0.8}}, torch::kDouble).requires_grad_(true);
  const double t = 0.5;
  // by hand: s_ij = cos(a_i, b_j) / t; mean over i of -log softmax(s_i.)_i and over j of -log softmax(s_.j)_j, halved
  double s[3][3], rows = 0, cols = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      double dot = 0, na = 0, nb = 0;
      for (int k = 0; k < 3; ++k) {
        const double x = a[i][k].item<double>(), y = b[j][k].item<double>();
        dot += x * y;
        na += x * x;
        nb += y * y;
      }
      s[i][j] = dot / std::sqrt(na * nb) / t;
    }
  }
  for (int i = 0; i < 3; ++i) {
    double zr = 0, zc = 0;
    for (int j = 0; j < 3; ++j) {
      zr += std::exp(s[i][j]);
      zc += std::exp(s[j][i]);
    }
    rows += std::log(zr) - s[i][i];
    cols += std::log(zc) - s[i][i];
  }
  const double expected = (rows / 3 + cols / 3) / 2;
  auto loss = train::info_nce(a, b, t);
  EXPECT_NEAR(loss.item<double>(), expected, 1e-12);
  loss.backward();
  // central differences, every element of a and b
  const double eps = 1e-6;
  for (auto* x : {&a, &b}) {
    const auto grad = x->grad().clone();
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t k = 0; k < 3; ++k) {
        torch::NoGradGuard no_grad;
        const double keep = (*x)[i][k].item<double>();
        (*x)[i][k].fill_(keep + eps);
        const double up = train::info_nce(a, b, t).item<double>();
        (*x)[i][k].fill_(keep - eps);
        const double down = train::info_nce(a, b, t).item<double>();
        (*x)[i][k].fill_(keep);
        EXPECT_NEAR(grad[i][k].item<double>(), (up - down) / (2 * eps), 1e-7) << i << "," << k;
      }
    }
  }
}

TEST(Contrastive, NextLinePairsNeverCrossAFileOrABlankLine) {
  ScratchDir dir("contrastive_next_line");
  tokenizer::TokenizerConfig cfg;
  cfg.vocab_size = 128;
  const fs::path model = dir / "t.model";
  tokenizer::train_tokenizer({data_file("tiny_en.txt")}, model, cfg, 1);
  tokenizer::Tokenizer tok(model);
  std::ofstream(dir / "a.txt") << "the first line\nthe second line\n\nthe third line\nthe fourth line\nan odd line\n";
  std::ofstream(dir / "b.txt") << "the fifth line\nthe sixth line\n";
  const auto pairs = train::next_line_pairs({dir / "a.txt", dir / "b.txt"}, tok, 64);
  // 1-2, 3-4, 5-6: not 2-3 (a blank line between), not the odd line with the fifth (another file)
  ASSERT_EQ(pairs.size(), 3u);
  auto line = [&](const std::string& text) {
    std::vector<int32_t> ids{tok.eos_id()};
    for (int32_t id : tok.encode(text)) ids.push_back(id);
    return ids;
  };
  EXPECT_EQ(pairs[0].anchor, line("the first line"));
  EXPECT_EQ(pairs[0].positive, line("the second line"));
  EXPECT_EQ(pairs[1].anchor, line("the third line"));
  EXPECT_EQ(pairs[2].anchor, line("the fifth line"));
  EXPECT_EQ(pairs[2].positive, line("the sixth line"));
}

TEST(Contrastive, RetrievalScoresMatchTheScript) {
  ScratchDir dir("contrastive_retrieval");
  torch::manual_seed(5);
  auto q = torch::randn({40, 6});
  auto d = q + 0.8 * torch::randn({40, 6});
  d[7] = d[3];  // a tie: query 3 and 7 see two equal documents
  q[9] = q[8] * 3.0;  // cosine ignores length
  const auto r = train::retrieval_scores(q, d);
  inspect::write_embeddings(dir / "q.npy", q, std::vector<std::string>(40, "q"), {});
  inspect::write_embeddings(dir / "d.npy", d, std::vector<std::string>(40, "d"), {});
  auto py = run_command("/usr/bin/python3 " + std::string(LMTRAIN_SOURCE_DIR) + "/scripts/retrieval_score.py" + " " +
                        (dir / "q.npy").string() + " " + (dir / "d.npy").string());
  ASSERT_EQ(py.exit_code, 0) << py.output;
  auto field = [&](const std::string& key) {
    const auto at = py.output.find("\t" + key + "=");
    EXPECT_NE(at, std::string::npos) << py.output;
    return std::stod(py.output.substr(at + key.size() + 2));
  };
  // the script prints 4 decimals
  EXPECT_NEAR(r.top1, field("top1"), 5.1e-5);
  EXPECT_NEAR(r.top10, field("top10"), 5.1e-5);
  EXPECT_NEAR(r.mrr, field("mrr"), 5.1e-5);
  EXPECT_GT(r.top1, 0.1);  // the pairs are related: well above chance (0.025)
}

// Through the binary: a pairs file with a missing tab, an empty side or invalid UTF-8 is refused with exit 3,
// naming the line.
TEST(Contrastive, BadPairsFilesExitThreeNamingTheLine) {
  ScratchDir dir("contrastive_pairs");
  const fs::path pre = pretrain(dir);
  std::ofstream(dir / "good.tsv") << "in the beginning\tthe heaven and the earth\nand god said\tlet there be light\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"and the earth\twas without form\nno tab on this line\n", "line 2: expected `anchor<TAB>positive`"},
      {"and the earth\t \n", "line 1: expected text on both sides"},
      {"and the earth\n", "line 1: expected `anchor<TAB>positive` (one tab), got 0 tabs"},
      {"and the earth\twas without form\t\n", "line 1: expected `anchor<TAB>positive` (one tab), got 2 tabs"},
      {"and the earth\twas without form\n\nand void\tand darkness\n", "line 2: expected `anchor<TAB>positive`"},
      {"and the earth\t\n", "line 1: expected text on both sides of the tab, got an empty positive"},
      {"and the earth\twas without form\nand void\t\xff\xfe\n", ".tsv:2:"}};
  for (size_t i = 0; i < bad.size(); ++i) {
    const fs::path tsv = dir / ("bad" + std::to_string(i) + ".tsv");
    std::ofstream(tsv) << bad[i].first;
    RunSpec spec;
    spec.run = "bad" + std::to_string(i);
    spec.tokenizer = spec.model = "";
    spec.train = "batch_size: 2, max_steps: 2, warmup_steps: 1, eval_every: 0";
    spec.extra = "finetune: {objective: contrastive, pairs: " + tsv.string() + ", val_pairs: " +
                 (dir / "good.tsv").string() + "}\n";
    auto r = run_lmtrain("finetune --from " + pre.string() + " -c " + write_run_config(dir, spec).string());
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_NE(r.output.find(bad[i].second), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(tsv.string()), std::string::npos) << r.output;
  }
  // pairs without held-out pairs, and the contrastive keys without the objective: exit 2
  auto r = run_lmtrain("finetune --from " + pre.string() + " -c " +
                       write_run_config(dir, RunSpec{"nv", 3, "tiny_en.txt", "tiny_en_val.txt", "", "",
                                                     "batch_size: 2, max_steps: 2, warmup_steps: 1",
                                                     "finetune: {objective: contrastive, pairs: " +
                                                         (dir / "good.tsv").string() + "}\n"}).string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("finetune.val_pairs: expected held-out pairs"), std::string::npos) << r.output;
  r = run_lmtrain(contrastive_args(dir, pre, "nt", "--set finetune.objective=next_token"));
  EXPECT_EQ(r.exit_code, 2) << r.output;

  // a resume whose pairs file changed is refused (exit 4) before it trains
  std::ofstream(dir / "train.tsv") << "in the beginning\tgod created\nthe heaven\tand the earth\nand the earth\twas "
                                      "without form\nand void\tand darkness\n";
  RunSpec spec{"pairs", 3, "tiny_en.txt", "tiny_en_val.txt", "", "",
               "batch_size: 2, max_steps: 3, warmup_steps: 1, eval_every: 0",
               "checkpoint: {every: 1, keep_last: 5}\nfinetune: {objective: contrastive, pairs: " +
                   (dir / "train.tsv").string() + ", val_pairs: " + (dir / "good.tsv").string() + "}\n"};
  const std::string args = "finetune --from " + pre.string() + " -c " + write_run_config(dir, spec).string();
  r = run_lmtrain(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ofstream(dir / "train.tsv", std::ios::app) << "and god said\tlet there be light\n";
  r = run_lmtrain(args + " --resume " + (dir / "pairs" / checkpoint::step_name(2)).string());
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("finetune pairs"), std::string::npos) << r.output;
}

// A contrastive fine-tune with the token table frozen: the table bit-identical, the report's before/after
// retrieval written, the checkpoint's pooling embed's default, and sample's warning.
TEST(Contrastive, FinetuneKeepsAFrozenTableAndEmbedUsesItsPooling) {
  ScratchDir dir("contrastive_ft");
  const fs::path pre = pretrain(dir);
  auto r = run_lmtrain(contrastive_args(dir, pre, "enc", "--set finetune.freeze_embeddings=true --set finetune.pool=last"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("in-batch InfoNCE over last pooling"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("frozen tensors unchanged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sentence vectors: 4 held-out pairs"), std::string::npos) << r.output;
  EXPECT_TRUE(torch::equal(weights(pre, "tok_emb.weight"), weights(dir / "enc", "tok_emb.weight")));
  EXPECT_FALSE(torch::equal(weights(pre, "blocks.0.attn.qkv.weight"), weights(dir / "enc", "blocks.0.attn.qkv.weight")));
  const auto j = nlohmann::json::parse(slurp(dir / "enc" / "sentence_vectors.json"));
  EXPECT_EQ(j["pairs"].get<int>(), 4);
  EXPECT_EQ(j["pool"].get<std::string>(), "last");
  EXPECT_EQ(j["after"]["cosines_positive"].size(), 4u);
  ASSERT_TRUE(fs::is_regular_file(dir / "enc" / "forgetting.json"));
  // metrics.jsonl names the unit of its losses, and an InfoNCE has no perplexity
  int vals = 0;
  std::istringstream metrics(slurp(dir / "enc" / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    const auto rec = nlohmann::json::parse(line);
    if (rec["kind"] == "start") {
      EXPECT_EQ(rec["loss_unit"].get<std::string>(), "InfoNCE") << line;
    }
    if (rec["kind"] != "val") continue;
    EXPECT_TRUE(rec["ppl"].is_null()) << line;
    ++vals;
  }
  EXPECT_GT(vals, 0);
  r = run_lmtrain("report " + (dir / "enc").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = slurp(dir / "enc" / "report.html");
  EXPECT_NE(html.find("\"loss_unit\":\"InfoNCE\""), std::string::npos) << "the curves' axis label";
  EXPECT_NE(html.find("\"unit\":\"InfoNCE of the held-out pairs\""), std::string::npos) << "the summary card";

  const std::string text = " --text 'in the beginning' --text 'and the earth'";
  r = run_lmtrain("embed --checkpoint " + (dir / "enc").string() + text + " --out " + (dir / "default.npy").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--pool last: the pooling this encoder was trained with"), std::string::npos) << r.output;
  r = run_lmtrain("embed --checkpoint " + (dir / "enc").string() + text + " --pool last --out " + (dir / "last.npy").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lmtrain("embed --checkpoint " + (dir / "enc").string() + text + " --pool mean --out " + (dir / "mean.npy").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("this encoder was trained with finetune.pool last"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir / "default.npy"), slurp(dir / "last.npy"));
  EXPECT_NE(slurp(dir / "default.npy"), slurp(dir / "mean.npy"));
  r = run_lmtrain("sample --checkpoint " + (dir / "enc").string() + " --prompt 'in the' --generate 2 --seed 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("is a sentence encoder"), std::string::npos) << r.output;
}

TEST(Contrastive, ResumeIsBitwiseAndTwoProcessesMatchGradAccum) {
  ScratchDir dir("contrastive_resume");
  const fs::path pre = pretrain(dir);
  const std::string extra = "--set checkpoint.every=1 --set checkpoint.keep_last=10 --set finetune.lm_weight=0.5 ";
  auto straight = run_lmtrain(contrastive_args(dir, pre, "straight", extra));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  pid_t pid = spawn_lmtrain(contrastive_args(dir, pre, "split", extra), dir / "split1.log", hold_at(dir, "step:3"));
  ASSERT_TRUE(held(dir, "step:3")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  auto again = run_lmtrain(contrastive_args(dir, pre, "split", extra + "--resume auto"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("resumed from"), std::string::npos) << again.output;
  const fs::path s5 = dir / "straight" / checkpoint::step_name(5), r5 = dir / "split" / checkpoint::step_name(5);
  EXPECT_EQ(manifest_sha(s5, "model.safetensors"), manifest_sha(r5, "model.safetensors"));
  EXPECT_EQ(manifest_sha(s5, "optimizer.pt"), manifest_sha(r5, "optimizer.pt"));

  // two processes of 2 pairs each (each rank's negatives: its own 2) against one process of 2 pairs x 2
  // micro-batches: the same chunks, the same negatives, the gradients summed in another order
  const std::string train2 = "batch_size: 2, max_steps: 5, warmup_steps: 1, lr: 0.01, eval_every: 0";
  auto one = run_lmtrain(contrastive_args(dir, pre, "accum", "--set train.grad_accum=2", train2));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = run_lmtrain(contrastive_args(dir, pre, "two", "--nproc 2", train2));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("on its own process"), std::string::npos) << two.output;
  for (const std::string name : {"tok_emb.weight", "blocks.1.mlp.fc.weight"}) {
    const auto a = weights(dir / "accum", name), b = weights(dir / "two", name);
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-5) << name;
  }
}

}  // namespace lm::test
