// End-to-end, hostile files for the verbs that read a model and images and write results (issue
// 45): an output that is, contains or lies inside an input is refused before anything is written
// (export --force used to delete the run it exported from; predict --out x.csv --input x.csv
// replaced its input); a FIFO anywhere a file is read is refused at once instead of hanging the
// process (flag, CSV row, folder entry, model, checkpoint); a symlink loop in a folder input is an
// error row, not an aborted job; a relative manifest row that leaves its root is an error row.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "shoplens/data/csv.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::run_shoplens;

// Every command that could wait on a FIFO runs under this limit: a hang fails the test instead
// of the suite (timeout's exit code is 124).
const std::string kTimeout = "timeout -s KILL 60 ";

class E2eInferHostile : public testing::ScratchSuite<E2eInferHostile> {
 protected:
  static void SetUpTestSuite() {
    fixture_ = testing::shared_fixture("infer-hostile",
                                       [](const fs::path& dir) { return testing::make_exported_model(dir, 40, 17); });
  }
  static fs::path model() { return fixture_ / "model"; }
  static fs::path shards() { return fixture_ / "shards"; }
  // The catalog paths (relative to the catalog) of its first `n` images that decode: make-data
  // damages ~2% on purpose and lists them in corruptions.csv.
  static std::vector<std::string> good_images(int n) {
    const std::string damaged = testing::read_text(fixture_ / "catalog/corruptions.csv");
    std::vector<std::string> good;
    for (const auto& p : testing::catalog_image_paths(fixture_ / "catalog"))
      if (static_cast<int>(good.size()) < n && damaged.find(fs::path(p).filename().string()) == std::string::npos)
        good.push_back(p);
    return good;
  }
  // Image `p` of good_images() relative to the catalog's images/ folder: "<class>/<file>".
  static std::string in_class(const std::string& p) {
    return fs::path(p).lexically_relative("images").generic_string();
  }
  // The first `n` good images copied into `dir/<class>/<file>`.
  static void copy_images(const fs::path& dir, int n) {
    for (const auto& p : good_images(n)) {
      fs::create_directories((dir / in_class(p)).parent_path());
      fs::copy_file(fixture_ / "catalog" / p, dir / in_class(p));
    }
  }
  // A copy of the fixture's trained run: the export tests must never risk the shared one.
  static fs::path copy_of_run(const fs::path& where) {
    fs::create_directories(where.parent_path());
    fs::copy(fixture_ / "run", where, fs::copy_options::recursive);
    return where;
  }
  static std::string predict(const fs::path& input, const fs::path& out, const std::string& extra = "") {
    return kTimeout + testing::shoplens_bin() + " predict --weights " + model().string() + " --input " +
           input.string() + " --out " + out.string() + " --threads 1 --workers 1 " + extra;
  }
  // Column `name` of every row of a CSV written by predict or score, by the row's id.
  static std::map<std::string, std::string> column(const fs::path& csv, const std::string& name) {
    const auto records = parse_csv(testing::read_text(csv));
    const auto& header = records.at(0).fields;
    const auto at = static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
    const auto id = static_cast<std::size_t>(std::find(header.begin(), header.end(), "id") - header.begin());
    std::map<std::string, std::string> out;
    for (std::size_t r = 1; r < records.size(); ++r) out[records[r].fields.at(id)] = records[r].fields.at(at);
    return out;
  }
  static void expect_refused(const testing::CommandResult& r, const std::string& words) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(words), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("an output may never be, contain, or lie inside an input"), std::string::npos) << r.output;
  }
  static fs::path fixture_;  // shared, read-only: catalog, shards, run, model
};
fs::path E2eInferHostile::fixture_;

TEST_F(E2eInferHostile, ExportNeverWritesOverTheRunItReadsFrom) {
  const fs::path parent = scratch() / "runs";
  const fs::path run = copy_of_run(parent / "run");
  const auto before = std::distance(fs::recursive_directory_iterator(run), fs::recursive_directory_iterator());
  const std::string exp = "export --run " + run.string() + " --force --out ";
  expect_refused(run_shoplens(exp + run.string()), "is the same as --run");
  expect_refused(run_shoplens(exp + (run / "checkpoints").string()), "lies inside --run");
  expect_refused(run_shoplens(exp + parent.string()), "contains --run");
  fs::create_directory_symlink(run, scratch() / "alias");
  expect_refused(run_shoplens(exp + (scratch() / "alias").string()), "is the same as --run");
  // Triton: the repository may hold the run, but the model folder --force replaces may not be it.
  expect_refused(run_shoplens(exp + parent.string() + " --format triton --triton-name run"), "is the same as --run");
  expect_refused(run_shoplens(exp + run.string() + " --format triton"), "lies inside --run");
  // A checkpoint given by its file is an input too.
  expect_refused(
      run_shoplens("export --run " + run.string() + " --checkpoint " + (run / "checkpoints/best.ckpt").string() +
                   " --force --out " + (run / "checkpoints").string()),
      "lies inside --run");
  EXPECT_EQ(std::distance(fs::recursive_directory_iterator(run), fs::recursive_directory_iterator()), before);
  EXPECT_TRUE(fs::exists(run / "checkpoints/best.ckpt"));
  // Beside the run it works as before.
  const auto ok = run_shoplens(exp + (parent / "model").string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(E2eInferHostile, NoVerbWritesOverOrIntoItsInput) {
  copy_images(scratch() / "in", 4);
  const fs::path list = scratch() / "in.csv";
  std::string csv = "path\n";
  for (const auto& p : good_images(4)) csv += (fixture_ / "catalog" / p).string() + "\n";
  testing::write_text(list, csv);
  const std::string text = testing::read_text(list);

  expect_refused(testing::run_shell(predict(list, list)), "is the same as --input");
  EXPECT_EQ(testing::read_text(list), text) << "the input was replaced";
  expect_refused(testing::run_shell(predict(scratch() / "in", scratch() / "in/preds.csv")), "lies inside --input");
  fs::copy(model(), scratch() / "model", fs::copy_options::recursive);  // the shared one stays untouched
  expect_refused(
      testing::run_shell(kTimeout + testing::shoplens_bin() + " predict --weights " + (scratch() / "model").string() +
                         " --input " + list.string() + " --out " + (scratch() / "model/preds.csv").string()),
      "lies inside --weights");
  expect_refused(run_shoplens("score --weights " + model().string() + " --input " + list.string() + " --out " +
                              scratch().path().string()),
                 "contains --input");
  expect_refused(run_shoplens("evaluate --weights " + model().string() + " --input " + (scratch() / "in").string() +
                              " --out " + (scratch() / "in").string()),
                 "is the same as --input");
  expect_refused(
      run_shoplens("prepare --input " + (scratch() / "in").string() + " --out " + (scratch() / "in/shards").string()),
      "lies inside --input");
  for (const auto& e : fs::recursive_directory_iterator(scratch() / "in"))
    EXPECT_TRUE(e.is_directory() || e.path().extension() == ".jpg" || e.path().extension() == ".png") << e.path();
  EXPECT_FALSE(fs::exists(scratch() / "model/preds.csv"));
}

TEST_F(E2eInferHostile, AFifoIsRefusedWhereverAFileIsReadAndNothingWaitsOnIt) {
  const fs::path dir = scratch() / "fifo";
  copy_images(dir / "images", 5);
  for (const char* name : {"in.csv", "weights.safetensors", "resume.ckpt", "images/pipe.jpg", "images/pipe"})
    ASSERT_EQ(::mkfifo((dir / name).c_str(), 0644), 0) << name;

  auto r = testing::run_shell(predict(dir / "in.csv", dir / "a.csv"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is a FIFO"), std::string::npos) << r.output;
  r = testing::run_shell(kTimeout + testing::shoplens_bin() + " score --weights " + model().string() + " --input " +
                         (dir / "in.csv").string() + " --out " + (dir / "scores").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = testing::run_shell(kTimeout + testing::shoplens_bin() + " predict --weights " +
                         (dir / "weights.safetensors").string() + " --model small_cnn --input " +
                         (dir / "images").string() + " --out " + (dir / "b.csv").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is a FIFO"), std::string::npos) << r.output;
  r = testing::run_shell(kTimeout + testing::shoplens_bin() + " train --shards " + shards().string() + " --out " +
                         (dir / "run").string() + " --model small_cnn --epochs 1 --resume " +
                         (dir / "resume.ckpt").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("not a regular file (a FIFO)"), std::string::npos) << r.output;

  // As a row: an error row with the reason, in a CSV and in a folder (counted, never dropped).
  testing::write_text(dir / "rows.csv",
                      "id,path\nok,images/" + in_class(good_images(1)[0]) + "\npipe,images/pipe.jpg\n");
  r = testing::run_shell(predict(dir / "rows.csv", dir / "rows.out.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto errors = column(dir / "rows.out.csv", "error");
  EXPECT_EQ(errors.at("ok"), "");
  EXPECT_NE(errors.at("pipe").find("not a regular file (a FIFO)"), std::string::npos) << errors.at("pipe");
  r = testing::run_shell(predict(dir / "images", dir / "folder.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  errors = column(dir / "folder.csv", "error");
  EXPECT_EQ(errors.size(), 7u);  // 5 images and 2 FIFOs
  EXPECT_NE(errors["pipe.jpg"].find("not a regular file (a FIFO)"), std::string::npos) << errors["pipe.jpg"];
  EXPECT_NE(errors["pipe"].find("not a regular file (a FIFO)"), std::string::npos) << errors["pipe"];
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "a temporary left: " << e.path();
}

TEST_F(E2eInferHostile, ASymlinkLoopInAFolderIsAnErrorRowForEveryVerb) {
  const fs::path images = scratch() / "loop/images";
  copy_images(images, 6);
  const fs::path some_class = fs::directory_iterator(images)->path();
  fs::create_symlink("self.jpg", some_class / "self.jpg");
  fs::create_symlink("b.jpg", some_class / "a.jpg");
  fs::create_symlink("a.jpg", some_class / "b.jpg");
  const std::string loop_id = some_class.filename().string() + "/self.jpg";

  auto r = testing::run_shell(predict(images, scratch() / "loop/p.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto status = column(scratch() / "loop/p.csv", "status");
  EXPECT_EQ(status.size(), 9u);
  EXPECT_EQ(status.at(loop_id), "error");
  EXPECT_NE(column(scratch() / "loop/p.csv", "error").at(loop_id).find("symlink loop"), std::string::npos);

  r = run_shoplens("score --weights " + model().string() + " --input " + images.string() + " --out " +
                   (scratch() / "loop/scores").string() + " --threads 1 --workers 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  status = column(scratch() / "loop/scores/predictions.csv", "status");
  EXPECT_EQ(status.size(), 9u);
  EXPECT_EQ(status.at(loop_id), "error");

  r = run_shoplens("evaluate --weights " + model().string() + " --input " + images.string() + " --out " +
                   (scratch() / "loop/eval").string() + " --threads 1 --workers 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto metrics = testing::read_json(scratch() / "loop/eval/metrics.json");
  EXPECT_EQ(metrics["rows"]["unreadable"].get<int>(), 3) << metrics["rows"];
}

TEST_F(E2eInferHostile, RelativeRowsThatLeaveTheirRootAreErrorRowsAsPrepareQuarantinesThem) {
  const fs::path dir = scratch() / "escape";
  copy_images(dir / "data/images", 2);
  copy_images(dir / "secret", 1);
  const std::string inside = in_class(good_images(1)[0]);
  testing::write_text(dir / "data/rows.csv", "id,path\nok,images/" + inside + "\nup,../secret/" + inside +
                                                 "\nsneaky,images/../../secret/" + inside + "\nabsolute," +
                                                 (dir / "secret" / inside).string() + "\n");
  auto r = testing::run_shell(predict(dir / "data/rows.csv", dir / "p.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto errors = column(dir / "p.csv", "error");
  EXPECT_EQ(errors.at("ok"), "");
  EXPECT_NE(errors.at("up").find("path escapes root"), std::string::npos) << errors.at("up");
  EXPECT_NE(errors.at("sneaky").find("path escapes root"), std::string::npos) << errors.at("sneaky");
  EXPECT_EQ(errors.at("absolute"), "");  // an absolute row names its file itself, as before

  r = run_shoplens("score --weights " + model().string() + " --input " + (dir / "data/rows.csv").string() + " --out " +
                   (dir / "scores").string() + " --threads 1 --workers 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(column(dir / "scores/predictions.csv", "error").at("up").find("path escapes root"), std::string::npos);
}

}  // namespace
}  // namespace shoplens
