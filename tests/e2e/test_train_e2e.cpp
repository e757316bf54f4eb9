// End-to-end: `shoplens train` on a tiny catalog the test makes: outputs, SIGTERM + resume
// equivalence, and bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/train_state.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::run_shoplens;

using testing::read_json;

std::vector<std::pair<long, double>> train_losses(const fs::path& run) {
  std::vector<std::pair<long, double>> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j["phase"] == "train") out.emplace_back(j["step"].get<long>(), j["loss"].get<double>());
  }
  return out;
}

// One catalog and its shards for every test in this file, built once (testing::shared_image_data).
class E2eTrain : public testing::ScratchSuite<E2eTrain> {
 protected:
  static void SetUpTestSuite() { data_ = testing::shared_image_data({240, "48:72", 4, 40, 64}); }
  static fs::path shards() { return data_ / "shards"; }
  static std::string train_args(const fs::path& run) {
    return "train --shards " + shards().string() + " --out " + run.string() +
           " --model small_cnn --epochs 3 --batch-size 16 --threads 2 --lr 0.003 --set augment.image_size=32"
           " --set train.log_every_steps=1 --set train.deterministic=true --set loader.workers=2";
  }
  static fs::path data_;
};
fs::path E2eTrain::data_;

TEST_F(E2eTrain, TrainsEvaluatesAndLeavesACompleteRunDirectory) {
  const fs::path run = scratch() / "run";
  auto r = run_shoplens(train_args(run) + " --accumulation 2 --set train.class_balance=weighted_loss");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"config.json", "train.log", "metrics.jsonl", "metrics.csv", "summary.json", "test_report.md",
                        "checkpoints/best.ckpt"})
    EXPECT_TRUE(fs::exists(run / f)) << f;
  bool has_events = false;
  for (const auto& e : fs::directory_iterator(run))
    has_events |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_TRUE(has_events);

  // Without a terminal (no bar), one line per epoch with loss, throughput and time left.
  for (int epoch = 1; epoch <= 3; ++epoch)
    EXPECT_NE(r.output.find("train: epoch " + std::to_string(epoch) + "/3 done at step"), std::string::npos)
        << r.output;
  EXPECT_NE(r.output.find("img/s, eta "), std::string::npos) << r.output;

  auto summary = read_json(run / "summary.json");
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["global_batch"], 32);
  EXPECT_GT(summary["steps"].get<int>(), 0);
  EXPECT_GT(summary["images_per_second"].get<double>(), 0.0);
  EXPECT_GT(summary["peak_rss_bytes"].get<double>(), 0.0);
  ASSERT_TRUE(summary["test_macro_f1"].is_number());
  EXPECT_GE(summary["test_macro_f1"].get<double>(), 0.0);
  EXPECT_TRUE(summary["test"]["confusion_matrix"].is_array() || summary["test"]["confusion"].is_array())
      << summary["test"];
  EXPECT_EQ(read_json(run / "config.json")["train"]["accumulation_steps"], 2);
  EXPECT_NE(testing::read_text(run / "metrics.csv").find("step,epoch,phase,name,value"), std::string::npos);

  // Resuming a finished run trains nothing and says so (it once drew "54/40" at millions of step/s).
  auto again = run_shoplens("train --out " + run.string() + " --resume auto");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing left to train"), std::string::npos) << again.output;
  EXPECT_EQ(read_json(run / "summary.json")["steps"], summary["steps"]);
}

// On a terminal the progress bar leaves its line open; a log line printed then used to start
// right after the bar's text. Run under a pseudo-terminal (util-linux `script`), every log line
// must start on a line of its own: at a newline, or after the bar's line was cleared.
TEST_F(E2eTrain, LogLinesNeverStartInsideTheProgressBarOnATerminal) {
  if (testing::run_shell("command -v script >/dev/null").exit_code != 0) GTEST_SKIP() << "no `script` (util-linux)";
  const fs::path run = scratch() / "tty-run";
  const std::string cmd = testing::shoplens_bin() + " " + train_args(run);
  auto r = testing::run_shell("script -qefc '" + cmd + "' /dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("\x1b[K"), std::string::npos) << "no progress bar was drawn: not a terminal?";
  // A log line: the level letter (coloured or not), then the time: "I 18:25:55 ".
  const std::regex log_start("(\\x1b\\[[0-9;]*m)?[TDIWEC](\\x1b\\[m)? [0-9]{2}:[0-9]{2}:[0-9]{2} ");
  int log_lines = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), log_start); it != std::sregex_iterator();
       ++it) {
    const std::size_t at = static_cast<std::size_t>(it->position());
    ++log_lines;
    const bool after_newline = at == 0 || r.output[at - 1] == '\n';
    const bool after_cleared_line = at >= 4 && r.output.compare(at - 4, 4, "\r\x1b[K") == 0;
    EXPECT_TRUE(after_newline || after_cleared_line)
        << "a log line starts inside the bar: ..." << r.output.substr(at >= 60 ? at - 60 : 0, 80);
  }
  EXPECT_GT(log_lines, 5);
}

TEST_F(E2eTrain, SigtermCheckpointsAndResumeMatchesAnUninterruptedRun) {
  const fs::path reference = scratch() / "reference", run = scratch() / "interrupted";
  auto ref = run_shoplens(train_args(reference));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto expected = train_losses(reference);
  ASSERT_GE(expected.size(), 8u);

  const std::string cmd = testing::shoplens_bin() + " " + train_args(run);
  ASSERT_EQ(testing::interrupt_when(
                cmd, [&] { return train_losses(run).size() >= 4; }, 120),
            130)
      << "SIGTERM must end the run with the documented code";
  ASSERT_FALSE(fs::exists(run / "summary.json"));
  bool has_checkpoint = false;
  for (const auto& e : fs::directory_iterator(run / "checkpoints")) has_checkpoint |= e.path().extension() == ".ckpt";
  ASSERT_TRUE(has_checkpoint);

  auto resumed = run_shoplens("train --out " + run.string() + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  const auto got = train_losses(run);
  ASSERT_EQ(got.size(), expected.size());  // each step once: the log was cut back to the checkpoint
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, expected[i].first);
    EXPECT_NEAR(got[i].second, expected[i].second, 1e-4) << "step " << got[i].first;
  }
  EXPECT_NEAR(read_json(run / "summary.json")["test_macro_f1"].get<double>(),
              read_json(reference / "summary.json")["test_macro_f1"].get<double>(), 1e-6);
}

// A first attempt that died before its first checkpoint left only config.json: --resume auto
// starts afresh from it (no --shards needed), as it would from a checkpoint's saved config.
TEST_F(E2eTrain, ResumeAutoBeforeTheFirstCheckpointStartsFromTheSavedConfig) {
  const fs::path run = scratch() / "no-checkpoint-yet";
  std::string args = train_args(run);
  args.replace(args.find("--epochs 3"), 10, "--epochs 1");
  auto printed = run_shoplens(args + " --print-config 2>/dev/null");
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  fs::create_directories(run);
  testing::write_text(run / "config.json", printed.output);
  auto r = run_shoplens("train --out " + run.string() + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("starting afresh from the saved config"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(run / "summary.json")["status"], "completed");
  EXPECT_EQ(read_json(run / "config.json")["train"]["epochs"], 1);
}

// --resume auto over a run whose every step checkpoint is damaged once said "starting a fresh
// run" and then refused because the folder "already holds checkpoints; continue it with --resume
// auto". It starts nothing, names each file with its damage, says what to do and names best.ckpt
// while that still reads back; the checkpoints are left as they were.
TEST_F(E2eTrain, ResumeAutoWhenEveryCheckpointIsDamagedNamesThemAndStartsNothing) {
  const fs::path run = scratch() / "all-damaged";
  std::string args = train_args(run);
  args.replace(args.find("--epochs 3"), 10, "--epochs 1");
  auto trained = run_shoplens(args);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const fs::path checkpoints = run / "checkpoints", best = checkpoints / "best.ckpt";
  // best.ckpt is a hard link to a step checkpoint: its own copy stays whole while the steps break.
  fs::copy_file(best, scratch() / "best.copy");
  fs::remove(best);
  fs::copy_file(scratch() / "best.copy", best);
  std::vector<fs::path> steps;
  for (const auto& e : fs::directory_iterator(checkpoints))
    if (e.path().filename().string().rfind("step-", 0) == 0) steps.push_back(e.path());
  ASSERT_FALSE(steps.empty());
  for (const auto& step : steps) {
    std::fstream f(step, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(step) / 2));
    f.put('\x5a');
  }
  const std::string damaged_bytes = testing::read_text(steps.front());

  auto resumed = run_shoplens("train --out " + run.string() + " --resume auto");
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  EXPECT_NE(resumed.output.find("every checkpoint in " + checkpoints.string() + " is damaged"), std::string::npos)
      << resumed.output;
  for (const auto& step : steps)
    EXPECT_NE(resumed.output.find(step.filename().string() + "' is unusable: checksum mismatch"), std::string::npos)
        << resumed.output;
  EXPECT_NE(resumed.output.find("Move the damaged files out of"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("--resume " + best.string() + " continues from it"), std::string::npos)
      << resumed.output;
  EXPECT_EQ(resumed.output.find("starting a fresh run"), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("already holds checkpoints"), std::string::npos) << resumed.output;
  EXPECT_EQ(testing::read_text(steps.front()), damaged_bytes) << "the damaged checkpoints are left for the user";

  // best.ckpt damaged too: it is named with the others, and no file is offered.
  testing::write_text(best, "not a checkpoint");
  auto none = run_shoplens("train --out " + run.string() + " --resume auto");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("best.ckpt' is unusable"), std::string::npos) << none.output;
  EXPECT_EQ(none.output.find("continues from it"), std::string::npos) << none.output;

  // Only best.ckpt left (the step files removed): no silent fresh start over it either.
  for (const auto& step : steps) fs::remove(step);
  fs::copy_file(scratch() / "best.copy", best, fs::copy_options::overwrite_existing);
  auto best_only = run_shoplens("train --out " + run.string() + " --resume auto");
  EXPECT_EQ(best_only.exit_code, 2) << best_only.output;
  EXPECT_NE(best_only.output.find("holds best.ckpt but no step checkpoint; pass --resume " + best.string()),
            std::string::npos)
      << best_only.output;
  EXPECT_EQ(best_only.output.find("starting a fresh run"), std::string::npos) << best_only.output;
  auto fresh = run_shoplens(args);
  EXPECT_EQ(fresh.exit_code, 2) << fresh.output;
  EXPECT_NE(fresh.output.find("already holds checkpoints"), std::string::npos) << fresh.output;
}

TEST_F(E2eTrain, BadInputExitsWithTheDocumentedCodes) {
  const fs::path run = scratch() / "bad";
  const std::string base = "train --shards " + shards().string() + " --out " + run.string() + " --epochs 1";
  auto unknown = run_shoplens(base + " --model resnet19");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("did you mean 'resnet18'"), std::string::npos) << unknown.output;

  auto zero_lr = run_shoplens(base + " --lr 0");
  EXPECT_EQ(zero_lr.exit_code, 2);
  EXPECT_NE(zero_lr.output.find("optim.lr"), std::string::npos) << zero_lr.output;

  auto zero_batch = run_shoplens(base + " --batch-size 0");
  EXPECT_EQ(zero_batch.exit_code, 2);

  auto no_shards = run_shoplens("train --shards " + (scratch() / "nowhere").string() + " --out " + run.string());
  EXPECT_EQ(no_shards.exit_code, 2);
  EXPECT_NE(no_shards.output.find("nowhere"), std::string::npos) << no_shards.output;

  testing::write_text(scratch() / "garbage.ckpt", "not a checkpoint at all");
  auto bad_ckpt = run_shoplens(train_args(run) + " --resume " + (scratch() / "garbage.ckpt").string());
  EXPECT_EQ(bad_ckpt.exit_code, 1);
  EXPECT_NE(bad_ckpt.output.find("garbage.ckpt"), std::string::npos) << bad_ckpt.output;

  // --resume auto where nothing was ever started asked for --shards; now it says so.
  auto nothing = run_shoplens("train --out " + (scratch() / "never-started").string() + " --resume auto");
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.output.find("nothing to resume"), std::string::npos) << nothing.output;

  auto fp16 = run_shoplens(train_args(run) + " --precision fp16 --device cpu");
  EXPECT_EQ(fp16.exit_code, 2);
  EXPECT_NE(fp16.output.find("fp16"), std::string::npos) << fp16.output;
}

// Fine-tuning from a torchvision file: a new head for our classes, the backbone frozen for the
// first epoch (its weights stay the pretrained ones), then unfrozen from the output side.
TEST_F(E2eTrain, FineTunesTorchvisionWeightsWithFreezeThenGradualUnfreeze) {
  auto probe = testing::run_shell(testing::python() + " -c 'import torchvision' 2>&1");
  if (probe.exit_code != 0) GTEST_SKIP() << testing::python() << " cannot import torchvision: " << probe.output;
  const fs::path weights = scratch() / "torchvision_resnet18.pt";
  auto saved = testing::run_shell(testing::python() +
                                  " -c 'import torch, torchvision; torch.manual_seed(3); "
                                  "torch.save(torchvision.models.resnet18().state_dict(), \"" +
                                  weights.string() + "\")' 2>&1");
  ASSERT_EQ(saved.exit_code, 0) << saved.output;

  const fs::path run = scratch() / "finetune";
  auto r =
      run_shoplens("train --shards " + shards().string() + " --out " + run.string() +
                   " --model resnet18 --pretrained " + weights.string() +
                   " --epochs 2 --batch-size 16 --threads 2 --set augment.image_size=32"
                   " --set loader.workers=2 --set train.freeze_backbone_epochs=1 --set train.unfreeze_every_epochs=1"
                   " --set optim.backbone_lr_scale=0.1 --set train.keep_last=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("new head: the weights have 1000 classes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 of 6 backbone stages trainable"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 of 6 backbone stages trainable"), std::string::npos) << r.output;

  ModelSpec spec;
  spec.name = "resnet18";
  spec.num_classes = 12;
  spec.image_size = 32;
  auto pretrained = make_model(spec);
  load_weights_file(*pretrained, weights.string(), true, false);
  auto after_epoch = [&](int index) {
    auto model = make_model(spec);
    const auto files = CheckpointStore(run / "checkpoints", 3).list();
    EXPECT_GE(files.size(), 2u);
    restore_model_weights(*model, read_checkpoint(files.at(index)).tensors);
    return model;
  };
  auto param = [](const std::shared_ptr<Classifier>& m, const std::string& name) {
    return m->named_parameters()[name].detach().clone();
  };
  const auto frozen = after_epoch(0);    // end of epoch 1: head only
  const auto unfrozen = after_epoch(1);  // end of epoch 2: head + layer4
  for (const char* name : {"conv1.weight", "layer1.0.conv1.weight", "layer4.0.conv1.weight"})
    EXPECT_TRUE(torch::equal(param(frozen, name), param(pretrained, name))) << name << " moved while frozen";
  EXPECT_FALSE(torch::equal(param(frozen, "fc.weight"), param(unfrozen, "fc.weight")));
  EXPECT_FALSE(torch::equal(param(unfrozen, "layer4.0.conv1.weight"), param(pretrained, "layer4.0.conv1.weight")));
  EXPECT_TRUE(torch::equal(param(unfrozen, "layer3.0.conv1.weight"), param(pretrained, "layer3.0.conv1.weight")));
}

}  // namespace
}  // namespace shoplens
