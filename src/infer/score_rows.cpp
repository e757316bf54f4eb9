// The inputs score, predict and evaluate read (scorer.h: open_score_rows): shards, a folder tree,
// a CSV, a list of paths, or one image.
#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/folder_walk.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/manifest.h"
#include "shoplens/data/shards.h"
#include "shoplens/infer/scorer.h"

namespace shoplens {
namespace fs = std::filesystem;

namespace {

// A row that names an image file; `error` set when the row itself is malformed.
struct FileRow {
  std::string id, path, label, error;
};

cv::Mat read_image_file(const fs::path& file, const std::string& shown_as, const DecodeOptions& decode) {
  std::vector<std::uint8_t> bytes;
  try {
    bytes = read_binary_file(file);
  } catch (const std::exception& e) {
    throw DataError("cannot read " + shown_as + ": " + e.what());
  }
  return decode_image(bytes.data(), bytes.size(), decode).rgb;
}

// The file a CSV or list row names: an absolute path as written; a relative one under `root`,
// and only while it stays there (prepare's rule, manifest.h: "path escapes root").
fs::path row_file(const fs::path& root, const std::string& row) {
  const fs::path path(row);
  if (path.is_absolute()) return path;
  const fs::path file = (root / path).lexically_normal();
  const std::string escape = root_escape_problem(root, file);
  if (!escape.empty()) throw DataError(row + ": " + escape);
  return file;
}

// The input itself is read only when it is a folder or a regular file (core/regular_file.h): a
// FIFO would block the open for ever.
void require_file_or_folder(const fs::path& input) {
  std::error_code ec;
  const fs::file_status status = fs::status(input, ec);
  if (fs::is_directory(status) || fs::is_regular_file(status)) return;
  throw UsageError("input " + input.string() + " is " + file_type_name(status.type()) +
                   ", not a file or folder to read");
}

// Rows of image files: the CSV, list, folder and single-image inputs.
class FileRows final : public ScoreRows {
 public:
  FileRows(std::vector<FileRow> rows, fs::path root, std::string description, bool labelled, DecodeOptions decode)
      : rows_(std::move(rows)),
        root_(std::move(root)),
        description_(std::move(description)),
        labelled_(labelled),
        decode_(decode) {}
  std::size_t size() const override { return rows_.size(); }
  std::string id(std::size_t row) const override { return rows_.at(row).id; }
  std::string label(std::size_t row) const override { return rows_.at(row).label; }
  bool has_labels() const override { return labelled_; }
  cv::Mat image(std::size_t index) const override {
    const FileRow& row = rows_.at(index);
    if (!row.error.empty()) throw DataError(row.error);
    return read_image_file(row_file(root_, row.path), row.path, decode_);
  }
  std::string describe() const override { return description_; }

 private:
  std::vector<FileRow> rows_;
  fs::path root_;
  std::string description_;
  bool labelled_;
  DecodeOptions decode_;
};

int column_named(const std::vector<std::string>& header, std::initializer_list<const char*> names) {
  for (std::size_t c = 0; c < header.size(); ++c)
    for (const char* n : names)
      if (to_lower(trim(header[c])) == n) return static_cast<int>(c);
  return -1;
}

std::string field_or_empty(const std::vector<std::string>& fields, int column) {
  return column >= 0 && static_cast<int>(fields.size()) > column ? std::string(trim(fields[column])) : "";
}

// Every record after the header is a row, malformed ones too: they become error rows.
std::vector<FileRow> csv_rows(const fs::path& file, bool& labelled) {
  const auto records = parse_csv(read_file(file));
  if (records.empty()) throw DataError(file.string() + ": empty manifest (expected a header with a 'path' column)");
  const auto& header = records.front().fields;
  const int path_col = column_named(header, {"path", "file", "filepath"});
  const int id_col = column_named(header, {"id"});
  const int label_col = column_named(header, {"label", "class", "category"});
  if (path_col < 0)
    throw DataError(file.string() + ":" + std::to_string(records.front().line) + ": no 'path' column in the header");
  labelled = label_col >= 0;
  std::vector<FileRow> rows;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& rec = records[r];
    FileRow row;
    const std::string where = file.filename().string() + " line " + std::to_string(rec.line);
    row.path = field_or_empty(rec.fields, path_col);
    row.label = field_or_empty(rec.fields, label_col);
    if (!rec.error.empty())
      row.error = where + ": " + rec.error;
    else if (row.path.empty())
      row.error = where + ": no path";
    const std::string id = id_col >= 0 ? field_or_empty(rec.fields, id_col) : "";
    row.id = id.empty() ? "line-" + std::to_string(rec.line) : id;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<FileRow> list_rows(const fs::path& file) {
  std::vector<FileRow> rows;
  const std::string text = read_file(file);
  std::size_t line = 0, begin = 0;
  while (begin < text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    ++line;
    const std::string path(trim(std::string_view(text).substr(begin, end - begin)));
    begin = end + 1;
    if (path.empty() || path[0] == '#') continue;  // blank lines and comments are not rows
    rows.push_back({"line-" + std::to_string(line), path, "", ""});
  }
  return rows;
}

// ImageFolder's layout: class = first folder under the root, files found recursively below it,
// in sorted order. Files beside the class folders are rows without a label. Non-image files are
// skipped, as torchvision skips them, but counted in the log. An entry that cannot be read (a
// FIFO, a link loop, a folder that cannot be listed) is an error row, never a failed walk.
std::vector<FileRow> folder_rows(const fs::path& dir, bool& labelled) {
  const FolderWalk walk = walk_image_folder(dir);
  const auto in_class = [](const fs::path& f) { return std::distance(f.begin(), f.end()) > 1; };
  labelled =
      std::any_of(walk.files.begin(), walk.files.end(), [&](const WalkedFile& f) { return in_class(f.relative); });
  if (walk.not_images)
    spdlog::warn("{}: {} files without an image extension are not rows", dir.string(), walk.not_images);
  std::vector<FileRow> rows;
  for (const auto& f : walk.files) {
    const std::string name = f.relative.generic_string();
    rows.push_back({name, name, in_class(f.relative) ? f.relative.begin()->string() : "",
                    f.problem.empty() ? "" : name + ": " + f.problem});
  }
  return rows;
}

class ShardRows final : public ScoreRows {
 public:
  ShardRows(const fs::path& dir, const std::string& split) : dir_(dir), split_(split) {
    for (Split s : {Split::kTrain, Split::kVal, Split::kTest}) {
      if (split != "all" && split != split_name(s)) continue;
      auto ds = ShardDataset::open(dir, s);
      for (std::size_t i = 0; i < ds->size(); ++i) refs_.emplace_back(datasets_.size(), i);
      datasets_.push_back(std::move(ds));
    }
    if (refs_.empty()) throw DataError(dir.string() + ": no samples in split '" + split + "'");
  }
  std::size_t size() const override { return refs_.size(); }
  std::string id(std::size_t row) const override { return std::to_string(sample(row).sample_id); }
  std::string label(std::size_t row) const override {
    const auto& classes = datasets_[refs_.at(row).first]->info().classes;
    const int l = sample(row).label;
    return l >= 0 && l < static_cast<int>(classes.size()) ? classes[l] : "";
  }
  bool has_labels() const override { return true; }
  cv::Mat image(std::size_t row) const override {
    const SampleRef s = sample(row);
    if (s.encoding == PayloadEncoding::kRaw)
      return cv::Mat(s.height, s.width, CV_8UC3, const_cast<std::uint8_t*>(s.data)).clone();
    cv::Mat rgb;
    decode_jpeg_into(s.data, s.size, rgb);
    return rgb;
  }
  std::string describe() const override { return "shards " + fs::absolute(dir_).string() + " split " + split_; }

 private:
  SampleRef sample(std::size_t row) const {
    const auto& [d, i] = refs_.at(row);
    return datasets_[d]->sample(i);
  }
  fs::path dir_;
  std::string split_;
  std::vector<std::shared_ptr<ShardDataset>> datasets_;
  std::vector<std::pair<std::size_t, std::size_t>> refs_;
};

std::unique_ptr<ScoreRows> file_rows(const fs::path& input, const RowsOptions& o) {
  const std::string ext = to_lower(input.extension().string());
  const fs::path root = o.root.empty() ? fs::absolute(input).parent_path() : fs::absolute(o.root);
  bool labelled = false;
  std::vector<FileRow> rows;
  std::string kind;
  if (ext == ".csv") {
    rows = csv_rows(input, labelled);
    kind = "manifest ";
  } else if (ext == ".txt" || ext == ".lst") {
    rows = list_rows(input);
    kind = "list ";
  } else if (format_from_extension(input) != ImageFormat::kUnknown) {
    rows.push_back({input.filename().string(), input.filename().string(), "", ""});
    kind = "image ";
  } else {
    throw UsageError(input.string() + ": not a CSV (.csv), a list (.txt, .lst), an image file, or a folder");
  }
  if (rows.empty()) throw DataError(input.string() + ": no rows");
  return std::make_unique<FileRows>(std::move(rows), root, kind + fs::absolute(input).string(), labelled, o.decode);
}

}  // namespace

std::unique_ptr<ScoreRows> open_score_rows(const fs::path& input, const RowsOptions& o) {
  std::error_code ec;
  if (!fs::exists(input, ec)) throw UsageError("input " + input.string() + " does not exist");
  require_file_or_folder(input);
  if (o.split != "all" && o.split != "train" && o.split != "val" && o.split != "test")
    throw UsageError("--split '" + o.split + "' is not one of all, train, val, test");
  if (!fs::is_directory(input, ec)) return file_rows(input, o);
  if (fs::exists(input / kImageShardFormat.dataset_file, ec)) return std::make_unique<ShardRows>(input, o.split);
  bool labelled = false;
  auto rows = folder_rows(input, labelled);
  if (rows.empty())
    throw DataError(input.string() + ": no image files in the folder (and no dataset.json: not shards)");
  return std::make_unique<FileRows>(std::move(rows), fs::absolute(input), "folder " + fs::absolute(input).string(),
                                    labelled, o.decode);
}

}  // namespace shoplens
