// Every way of spelling the dataset root and a row's path names the same files: relative and
// absolute, with "./", a trailing "/", through a symlinked root, with ".." that stays inside,
// run from inside the dataset folder or above it. Only what really leaves the root is refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include "image_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/prepare.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

// The process's working folder for one test, restored afterwards (prepare resolves relative
// roots and paths against it, as the command line does).
class WorkingFolder {
 public:
  explicit WorkingFolder(const fs::path& dir) : saved_(fs::current_path()) { fs::current_path(dir); }
  ~WorkingFolder() { fs::current_path(saved_); }

 private:
  fs::path saved_;
};

struct RootSpelling {
  const char* name;
  const char* cwd;    // relative to the scratch folder
  const char* input;  // the manifest, relative to cwd
  const char* root;   // data.root as written ("" = the manifest's folder); "@" = the scratch folder
};

void PrintTo(const RootSpelling& s, std::ostream* os) {
  *os << "cwd '" << s.cwd << "', --input '" << s.input << "', data.root '" << s.root << "'";
}

// scratch/dataset holds the images and manifest.csv, scratch/link -> dataset.
const RootSpelling kSpellings[] = {
    {"ManifestFolderFromInside", "dataset", "manifest.csv", ""},
    {"ManifestFolderFromInsideDotSlash", "dataset", "./manifest.csv", ""},
    {"ManifestFolderFromAbove", ".", "dataset/manifest.csv", ""},
    {"ManifestFolderThroughLink", ".", "link/manifest.csv", ""},
    {"Dot", "dataset", "manifest.csv", "."},
    {"DotSlash", "dataset", "manifest.csv", "./"},
    {"Relative", ".", "dataset/manifest.csv", "dataset"},
    {"RelativeTrailingSlash", ".", "dataset/manifest.csv", "dataset/"},
    {"RelativeDotSlash", ".", "dataset/manifest.csv", "./dataset/"},
    {"RelativeDotDotInside", ".", "dataset/manifest.csv", "dataset/img/.."},
    {"Absolute", ".", "dataset/manifest.csv", "@/dataset"},
    {"AbsoluteTrailingSlash", ".", "dataset/manifest.csv", "@/dataset/"},
    {"AbsoluteDoubleSlash", ".", "dataset/manifest.csv", "@//dataset//"},
    {"SymlinkedRoot", ".", "dataset/manifest.csv", "link"},
    {"SymlinkedRootTrailingSlash", ".", "link/manifest.csv", "link/"},
    {"AbsoluteSymlinkedRoot", ".", "dataset/manifest.csv", "@/link"},
};

class PrepareRootSpellings : public ::testing::TestWithParam<RootSpelling> {
 protected:
  testing::ScratchDir dir{"root-spellings"};
  // The real scratch path: a temp folder may itself sit behind a symlink.
  fs::path real = fs::canonical(dir.path());

  // Rows that must be kept, each spelling the same kind of path differently.
  std::vector<std::string> inside_rows() const {
    return {"img/a.jpg",
            "./img/b.jpg",
            "img/../img/c.jpg",
            "img//d.jpg",
            "img/./sub/../e.jpg",
            (real / "dataset/img/f.jpg").string(),
            (real / "link/img/g.jpg").string(),
            "img/inner_link.jpg"};
  }
  // Rows that leave the root, lexically or through a symlink.
  std::vector<std::string> escaping_rows() const {
    return {"../outside.jpg", "img/../../outside.jpg", (real / "outside.jpg").string(), "img/outer_link.jpg"};
  }

  void make_dataset() {
    const char* names = "abcdefg";
    for (int i = 0; i < 7; ++i) write_jpeg(real / "dataset/img" / (std::string(1, names[i]) + ".jpg"), i);
    fs::create_directories(real / "dataset/img/sub");
    write_jpeg(real / "outside.jpg", 8);
    fs::create_symlink("a.jpg", real / "dataset/img/inner_link.jpg");
    fs::create_symlink("../../outside.jpg", real / "dataset/img/outer_link.jpg");
    fs::create_directory_symlink("dataset", real / "link");
    std::string csv = "id,path,label,split\n";
    int n = 0;
    for (const auto& rows : {inside_rows(), escaping_rows()})
      for (const auto& path : rows) {
        const std::string label = n % 2 ? "x" : "y";
        csv += "r" + std::to_string(n++) + "," + path + "," + label + ",train\n";
      }
    testing::write_text(real / "dataset/manifest.csv", csv);
  }

  static void write_jpeg(const fs::path& file, int seed) {
    const testing::Bytes jpeg = encode_jpeg(testing::test_picture(40, 32, seed), 85);
    fs::create_directories(file.parent_path());
    write_file_atomic(file, std::string(jpeg.begin(), jpeg.end()));
  }
};

TEST_P(PrepareRootSpellings, KeepsEveryRowInsideAndRefusesEveryRowOutside) {
  make_dataset();
  const RootSpelling& s = GetParam();
  WorkingFolder cwd(real / s.cwd);
  PrepareOptions o;
  o.input = s.input;
  std::string root = s.root;
  if (!root.empty() && root[0] == '@') root = real.string() + root.substr(1);
  o.manifest.root = root;
  o.out_dir = real / "shards";
  o.storage_size = 16;
  const PrepareReport r = prepare_dataset(o);

  const std::size_t inside = inside_rows().size(), outside = escaping_rows().size();
  EXPECT_EQ(r.total_rows, inside + outside);
  for (const auto& q : r.quarantined) {
    const int row = std::stoi(q.id.substr(1));
    EXPECT_GE(row, static_cast<int>(inside)) << "kept row refused: " << q.path << ": " << q.reason;
    EXPECT_NE(q.reason.find("path escapes root"), std::string::npos) << q.path << ": " << q.reason;
  }
  EXPECT_EQ(r.kept, inside);
  EXPECT_EQ(r.quarantined.size(), outside);
}

INSTANTIATE_TEST_SUITE_P(Spellings, PrepareRootSpellings, ::testing::ValuesIn(kSpellings),
                         [](const ::testing::TestParamInfo<RootSpelling>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace shoplens
