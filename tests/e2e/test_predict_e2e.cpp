// End-to-end: `predict` and `evaluate` straight from a torchvision-layout .pth on a folder tree of
// real JPEG and PNG files: probabilities equal to torchvision's own pipeline (PIL Resize +
// CenterCrop) within 1e-3 with the same top-1; metrics equal to scikit-learn's on the same
// predictions; every input form (tree, CSV, list, one image) gives the same answers.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "shoplens/data/csv.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::run_shell;
using testing::run_shoplens;

constexpr int kImageSize = 64;  // resized to floor(64 / 0.875) = 73 first

class E2ePredict : public testing::ScratchSuite<E2ePredict> {
 protected:
  static void SetUpTestSuite() {
    auto probe = run_shell(testing::python() + " -c 'import torchvision, PIL, sklearn' 2>&1");
    if (probe.exit_code != 0) {
      skip_reason_ = "no torchvision, Pillow or scikit-learn for the Python side: " + probe.output;
      return;
    }
    fixture_ = testing::shared_fixture("predict", build_fixture);
    std::ifstream names(catalog() / "classes.txt");
    for (std::string line; std::getline(names, line);)
      if (!line.empty()) classes_ += (classes_.empty() ? "" : ",") + line;
    reference_ = testing::read_json(fixture_ / "torchvision.json");
  }
  // The catalog (an ImageFolder tree of JPEG and PNG files, a few damaged), a torchvision
  // resnet18 .pth, and torchvision's probabilities for every file: built once per binary.
  static std::string build_fixture(const fs::path& dir) {
    auto r = run_shoplens("make-data --out " + (dir / "catalog").string() +
                          " --num-images 30 --image-size-range 60:400 --seed 3");
    if (r.exit_code != 0) return r.output;
    int num_classes = 0;
    std::ifstream names(dir / "catalog" / "classes.txt");
    for (std::string line; std::getline(names, line);) num_classes += !line.empty();
    r = python("weights " + (dir / "resnet18.pth").string() + " " + std::to_string(num_classes) + " 7");
    if (r.exit_code != 0) return r.output;
    r = python("predict " + (dir / "resnet18.pth").string() + " " + (dir / "catalog" / "images").string() + " " +
               std::to_string(kImageSize) + " 0.875 " + (dir / "torchvision.json").string());
    return r.exit_code == 0 ? "" : r.output;
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  }

  static testing::CommandResult python(const std::string& args) {
    return run_shell(testing::python() + " " + testing::source_dir() + "/scripts/fixtures/torchvision_predict.py " +
                     args + " 2>&1");
  }
  static fs::path catalog() { return fixture_ / "catalog"; }
  static fs::path tree() { return catalog() / "images"; }  // images/<label>/<file>: an ImageFolder tree
  static fs::path weights() { return fixture_ / "resnet18.pth"; }
  static std::string model_args() {
    return "--weights " + weights().string() + " --model resnet18 --image-size " + std::to_string(kImageSize) +
           " --classes " + classes_ + " --threads 2 --workers 2";
  }
  // id -> probabilities of every class (in class order) from a JSONL written with --top-k = classes.
  static std::map<std::string, std::vector<double>> read_jsonl(const fs::path& file,
                                                               const std::vector<std::string>& names) {
    std::map<std::string, std::vector<double>> out;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      const json j = json::parse(line);
      if (j["status"] != "ok") continue;
      std::vector<double> p(names.size());
      for (const auto& t : j["top"])
        p[std::find(names.begin(), names.end(), t["label"].get<std::string>()) - names.begin()] = t["probability"];
      out[j["id"].get<std::string>()] = p;
    }
    return out;
  }
  static std::vector<std::string> class_list() {
    std::vector<std::string> names;
    std::stringstream ss(classes_);
    for (std::string c; std::getline(ss, c, ',');) names.push_back(c);
    return names;
  }

  static fs::path fixture_;  // shared, read-only inputs
  static std::string skip_reason_, classes_;
  static json reference_;
};
fs::path E2ePredict::fixture_;
std::string E2ePredict::skip_reason_, E2ePredict::classes_;
json E2ePredict::reference_;

TEST_F(E2ePredict, AFolderTreeFromAPthMatchesTorchvisionsPipeline) {
  const fs::path out = scratch() / "tree.jsonl";
  const auto names = class_list();
  auto r = run_shoplens("predict " + model_args() + " --input " + tree().string() + " --out " + out.string() +
                        " --top-k " + std::to_string(names.size()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto ours = read_jsonl(out, names);
  int compared = 0;
  double worst = 0;
  for (const auto& [path, probs] : reference_.items()) {
    if (probs.is_null()) {
      EXPECT_EQ(ours.count(path), 0u) << path << ": PIL cannot read it, so it must be an error row";
      continue;
    }
    ASSERT_EQ(ours.count(path), 1u) << path << " has no prediction";
    const auto& mine = ours.at(path);
    std::size_t their_top = 0, my_top = 0;
    for (std::size_t c = 0; c < names.size(); ++c) {
      worst = std::max(worst, std::abs(mine[c] - probs[c].get<double>()));
      if (probs[c].get<double>() > probs[their_top].get<double>()) their_top = c;
      if (mine[c] > mine[my_top]) my_top = c;
    }
    EXPECT_EQ(my_top, their_top) << path;
    ++compared;
  }
  EXPECT_GE(compared, 25);
  EXPECT_LE(worst, 1e-3) << "largest probability difference from torchvision over " << compared << " images";
  std::cout << "[ measured ] largest probability difference from torchvision: " << worst << " over " << compared
            << " images\n";
}

TEST_F(E2ePredict, EveryInputFormGivesTheSameAnswers) {
  const auto names = class_list();
  const std::string first = reference_.begin().key(), second = std::next(reference_.begin()).key();
  testing::write_text(scratch() / "list.txt", "# two files\n" + first + "\n\n" + second + "\n");
  testing::write_text(scratch() / "rows.csv", "id,path\na," + first + "\nb," + second + "\n");
  const std::string k = " --top-k " + std::to_string(names.size());
  auto r = run_shoplens("predict " + model_args() + " --input " + (scratch() / "list.txt").string() + " --root " +
                        tree().string() + " --out " + (scratch() / "list.jsonl").string() + k);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_shoplens("predict " + model_args() + " --input " + (scratch() / "rows.csv").string() + " --root " +
                   tree().string() + " --out " + (scratch() / "rows.jsonl").string() + k);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_shoplens("predict " + model_args() + " --input " + (tree() / first).string() + " --out " +
                   (scratch() / "one.jsonl").string() + k);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto listed = read_jsonl(scratch() / "list.jsonl", names), csv = read_jsonl(scratch() / "rows.jsonl", names),
             one = read_jsonl(scratch() / "one.jsonl", names);
  ASSERT_EQ(listed.size(), 2u);
  ASSERT_EQ(csv.size(), 2u);
  ASSERT_EQ(one.size(), 1u);
  for (std::size_t c = 0; c < names.size(); ++c) {
    EXPECT_NEAR(listed.at("line-2")[c], reference_[first][c].get<double>(), 1e-3);
    EXPECT_NEAR(csv.at("b")[c], reference_[second][c].get<double>(), 1e-3);
    EXPECT_NEAR(one.begin()->second[c], reference_[first][c].get<double>(), 1e-3);
  }
}

TEST_F(E2ePredict, CsvOutputHasTopKAndLogitsForEveryRowErrorsIncluded) {
  const fs::path out = scratch() / "tree.csv";
  auto r = run_shoplens("predict " + model_args() + " --input " + tree().string() + " --out " + out.string() +
                        " --top-k 3 --logits");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto recs = parse_csv(testing::read_text(out));
  ASSERT_EQ(recs.size(), reference_.size() + 1);  // header + one row per file, unreadable ones too
  const auto& header = recs[0].fields;
  const auto col = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  ASSERT_LT(static_cast<std::size_t>(col("top3")), header.size());
  ASSERT_LT(static_cast<std::size_t>(col("logit_" + class_list().back())), header.size());
  for (std::size_t i = 1; i < recs.size(); ++i) {
    const auto& f = recs[i].fields;
    if (f[col("status")] == "error") {
      EXPECT_FALSE(f[col("error")].empty());
      continue;
    }
    EXPECT_EQ(f[col("prediction")], f[col("top1")]);
    EXPECT_GE(std::stod(f[col("p_top1")]), std::stod(f[col("p_top2")]));
    EXPECT_FALSE(f[col("logit_" + class_list().front())].empty());
  }
}

TEST_F(E2ePredict, EvaluateMetricsEqualScikitLearnsOnTheSamePredictions) {
  const fs::path out = scratch() / "evaluation";
  auto r = run_shoplens("evaluate " + model_args() + " --input " + tree().string() + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json ours = testing::read_json(out / "metrics.json");
  r = python("metrics " + (out / "predictions.csv").string() + " " + classes_ + " " +
             (scratch() / "sklearn.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json theirs = testing::read_json(scratch() / "sklearn.json");
  EXPECT_EQ(ours["samples"], theirs["samples"]);
  EXPECT_NEAR(ours["accuracy"].get<double>(), theirs["accuracy"].get<double>(), 1e-12);
  EXPECT_NEAR(ours["macro_f1"].get<double>(), theirs["macro_f1"].get<double>(), 1e-12);
  EXPECT_NEAR(ours["top5_accuracy"].get<double>(), theirs["top5_accuracy"].get<double>(), 1e-12);
  EXPECT_EQ(ours["confusion"], theirs["confusion"]);
  EXPECT_NEAR(ours["ece"].get<double>(), theirs["ece"].get<double>(), 1e-5);  // the CSV rounds to 6 digits
  EXPECT_EQ(ours["rows"]["unreadable"].get<int>(), static_cast<int>(reference_.size()) - ours["samples"].get<int>());
  const std::string html = testing::read_text(out / "report.html");
  EXPECT_NE(html.find("Confusion matrix"), std::string::npos);
  for (const auto& name : class_list()) EXPECT_NE(html.find(name), std::string::npos) << name;
  // Renders at 1280 px without horizontal scroll, labelled axes, a colour legend; a screenshot for CI.
  const json browser = testing::check_page_in_browser(out / "report.html", {1280, "evaluate"});
  EXPECT_EQ(browser["charts"], 1) << browser.dump(2);
  EXPECT_EQ(browser["page"]["scroll_width"], browser["page"]["viewport_width"]) << browser.dump(2);
  EXPECT_TRUE(browser["problems"].empty()) << browser.dump(2);
  EXPECT_TRUE(browser["console"].empty()) << browser.dump(2);
}

TEST_F(E2ePredict, EvaluateRefusesAnInputWithoutLabels) {
  const fs::path flat = scratch() / "flat";
  fs::create_directories(flat);
  fs::copy_file(tree() / reference_.begin().key(), flat / "a.jpg", fs::copy_options::overwrite_existing);
  auto r =
      run_shoplens("evaluate " + model_args() + " --input " + flat.string() + " --out " + (scratch() / "e").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no labels"), std::string::npos) << r.output;
}

TEST_F(E2ePredict, AWeightsFileWithoutItsArchitectureIsAUsageError) {
  auto r = run_shoplens("predict --weights " + weights().string() + " --input " + tree().string() + " --out " +
                        (scratch() / "x.csv").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
}

// The spellings before the one grammar (issue 44): -m/--model PATH and --arch NAME still work, and
// each warns with its new spelling.
TEST_F(E2ePredict, TheOldModelAndArchSpellingsStillWorkAndWarn) {
  const fs::path out = scratch() / "old_spellings.csv";
  auto r = run_shoplens("predict -m " + weights().string() + " --arch resnet18 --image-size " +
                        std::to_string(kImageSize) + " --classes " + classes_ + " --threads 2 --workers 2 --input " +
                        (tree() / reference_.begin().key()).string() + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_NE(r.output.find("--arch is deprecated: use --model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--model PATH is deprecated: use --weights PATH"), std::string::npos) << r.output;
  // A registered name is an architecture even where a file of that name would be a path.
  auto both = run_shoplens("predict --model resnet18 -i x -o " + (scratch() / "z.csv").string());
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("--weights PATH is required"), std::string::npos) << both.output;
}

TEST_F(E2ePredict, WeightsThatDoNotFitTheArchitectureAreRefused) {
  auto r = run_shoplens("predict --weights " + weights().string() + " --model resnet50 --input " + tree().string() +
                        " --out " + (scratch() / "y.csv").string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(scratch() / "y.csv"));
}

}  // namespace
}  // namespace shoplens
