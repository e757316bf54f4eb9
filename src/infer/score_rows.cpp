// The inputs score, predict and evaluate read (scorer.h: open_score_rows): shards, a folder tree,
// a CSV, a list of paths, or one image.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/plural.h"
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

// Rows of a file input in order, readable again from the start: a CSV or list file is read as a
// stream (a block at a time), a folder listing or one image is held.
class FileRowStream {
 public:
  virtual ~FileRowStream() = default;
  virtual bool next(FileRow& row) = 0;  // false after the last row
  virtual void restart() = 0;
};

// The file a CSV or list row names: an absolute path as written; a relative one under `root`,
// and only while it stays there (prepare's rule, manifest.h: "path escapes root").
fs::path row_file(const fs::path& root, const std::string& row) {
  fs::path path(row);
  if (path.is_absolute()) return path;
  fs::path file = (root / path).lexically_normal();
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

// Rows of image files: the CSV, list, folder and single-image inputs. Only the rows of the loaded
// window are held: the stream is counted once when opened, then read a window at a time.
class FileRows final : public ScoreRows {
 public:
  FileRows(std::unique_ptr<FileRowStream> stream, fs::path root, std::string description, bool labelled,
           DecodeOptions decode)
      : stream_(std::move(stream)),
        root_(std::move(root)),
        description_(std::move(description)),
        labelled_(labelled),
        decode_(std::move(decode)) {
    for (FileRow row; stream_->next(row);) ++size_;
    stream_->restart();
  }
  std::size_t size() const override { return size_; }
  std::string id(std::size_t row) const override { return at(row).id; }
  std::string label(std::size_t row) const override { return at(row).label; }
  bool has_labels() const override { return labelled_; }
  cv::Mat image(std::size_t index) const override {
    const FileRow& row = at(index);
    if (!row.error.empty()) throw DataError(row.error);
    return read_image_file(row_file(root_, row.path), row.path, decode_);
  }
  std::string describe() const override { return description_; }
  std::string identity(std::size_t index) const override {
    const FileRow& row = at(index);
    return row.id + '\n' + (row.path.empty() ? "" : resolved(row).string()) + '\n' + row.error;
  }
  void load_window(std::size_t begin, std::size_t end) override;

 private:
  fs::path resolved(const FileRow& row) const {
    return fs::path(row.path).is_absolute() ? fs::path(row.path) : root_ / row.path;
  }
  const FileRow& at(std::size_t row) const {
    if (row < window_begin_ || row - window_begin_ >= window_.size())
      throw std::out_of_range(fmt::format("row {} is outside the loaded rows {}..{} of {}", row, window_begin_,
                                          window_begin_ + window_.size(), description_));
    return window_[row - window_begin_];
  }

  std::unique_ptr<FileRowStream> stream_;
  fs::path root_;
  std::string description_;
  bool labelled_;
  DecodeOptions decode_;
  std::size_t size_ = 0;
  std::vector<FileRow> window_;  // rows [window_begin_, window_begin_ + window_.size())
  std::size_t window_begin_ = 0;
  std::size_t next_row_ = 0;  // the row stream_ gives next
};

void FileRows::load_window(std::size_t begin, std::size_t end) {
  if (begin > end || end > size_) throw std::out_of_range(fmt::format("rows {}..{} of {} rows", begin, end, size_));
  if (begin >= window_begin_ && end <= window_begin_ + window_.size()) return;  // already held
  if (begin < next_row_) {  // an earlier row: read the input again from its start
    stream_->restart();
    next_row_ = 0;
  }
  window_.clear();
  window_begin_ = begin;
  for (FileRow row; next_row_ < end; ++next_row_) {
    if (!stream_->next(row))
      throw DataError(fmt::format("{} changed while it was read: it has {} rows, {} when it was opened", description_,
                                  next_row_, size_));
    if (next_row_ >= begin) window_.push_back(std::move(row));
  }
}

int column_named(const std::vector<std::string>& header, std::initializer_list<const char*> names) {
  for (std::size_t c = 0; c < header.size(); ++c)
    for (const char* n : names)
      if (to_lower(trim(header[c])) == n) return static_cast<int>(c);
  return -1;
}

std::string field_or_empty(const std::vector<std::string>& fields, int column) {
  return column >= 0 && static_cast<int>(fields.size()) > column ? std::string(trim(fields[column])) : "";
}

std::ifstream open_input_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError("cannot read " + file.string() + ": " + std::strerror(errno));
  return in;
}

// Every record after the header is a row, malformed ones too: they become error rows. Records are
// read a block at a time (CsvStreamReader), so only one block of the file is held.
class CsvRowStream final : public FileRowStream {
 public:
  explicit CsvRowStream(fs::path file) : file_(std::move(file)) { restart(); }
  bool labelled() const { return label_col_ >= 0; }

  void restart() override {
    reader_.reset();
    in_ = open_input_file(file_);
    reader_.emplace(in_, file_.string());
    if (!fill()) throw DataError(file_.string() + ": empty manifest (expected a header with a 'path' column)");
    const CsvRecord& header = records_[next_++];
    path_col_ = column_named(header.fields, {"path", "file", "filepath"});
    id_col_ = column_named(header.fields, {"id"});
    label_col_ = column_named(header.fields, {"label", "class", "category"});
    if (path_col_ < 0)
      throw DataError(file_.string() + ":" + std::to_string(header.line) + ": no 'path' column in the header");
  }

  bool next(FileRow& row) override {
    if (next_ == records_.size() && !fill()) return false;
    const CsvRecord& rec = records_[next_++];
    const std::string where = file_.filename().string() + " line " + std::to_string(rec.line);
    row.path = field_or_empty(rec.fields, path_col_);
    row.label = field_or_empty(rec.fields, label_col_);
    row.error.clear();
    if (!rec.error.empty())
      row.error = where + ": " + rec.error;
    else if (row.path.empty())
      row.error = where + ": no path";
    const std::string id = id_col_ >= 0 ? field_or_empty(rec.fields, id_col_) : "";
    row.id = id.empty() ? "line-" + std::to_string(rec.line) : id;
    return true;
  }

 private:
  bool fill() {
    records_ = reader_->next();
    next_ = 0;
    return !records_.empty();
  }

  fs::path file_;
  std::ifstream in_;
  std::optional<CsvStreamReader> reader_;
  std::vector<CsvRecord> records_;  // the block being read
  std::size_t next_ = 0;
  int path_col_ = -1, id_col_ = -1, label_col_ = -1;
};

// One image path per line; blank lines and `#` comments are not rows. A line is held up to
// kMaxCsvRecordBytes; a longer one is an error row, its bytes skipped as they stream past.
class ListRowStream final : public FileRowStream {
 public:
  explicit ListRowStream(fs::path file) : file_(std::move(file)) { restart(); }

  void restart() override {
    in_ = open_input_file(file_);
    line_ = 0;
  }

  bool next(FileRow& row) override {
    std::string text;
    for (bool too_long = false; read_line(text, too_long);) {
      ++line_;
      const std::string path(trim(text));
      if (!too_long && (path.empty() || path[0] == '#')) continue;
      row = {"line-" + std::to_string(line_), too_long ? "" : path, "", ""};
      if (too_long)
        row.error =
            fmt::format("{} line {}: longer than {} bytes", file_.filename().string(), line_, kMaxCsvRecordBytes);
      return true;
    }
    return false;
  }

 private:
  bool read_line(std::string& text, bool& too_long) {
    text.clear();
    too_long = false;
    std::streambuf* buffer = in_.rdbuf();
    int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) return false;
    for (; c != std::char_traits<char>::eof() && c != '\n'; c = buffer->sbumpc()) {
      if (text.size() < kMaxCsvRecordBytes)
        text.push_back(static_cast<char>(c));
      else
        too_long = true;
    }
    return true;
  }

  fs::path file_;
  std::ifstream in_;
  std::size_t line_ = 0;
};

// Rows known when the input is opened: a folder's sorted listing, or one image.
class HeldRowStream final : public FileRowStream {
 public:
  explicit HeldRowStream(std::vector<FileRow> rows) : rows_(std::move(rows)) {}
  bool next(FileRow& row) override {
    if (next_ == rows_.size()) return false;
    row = rows_[next_++];
    return true;
  }
  void restart() override { next_ = 0; }

 private:
  std::vector<FileRow> rows_;
  std::size_t next_ = 0;
};

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
    spdlog::warn("{}: {} without an image extension {} not {}", dir.string(),
                 count_of(static_cast<std::int64_t>(walk.not_images), "file"), walk.not_images == 1 ? "is" : "are",
                 walk.not_images == 1 ? "a row" : "rows");
  std::vector<FileRow> rows;
  for (const auto& f : walk.files) {
    const std::string name = f.relative.generic_string();
    rows.push_back({name, name, in_class(f.relative) ? f.relative.begin()->string() : "",
                    f.problem.empty() ? "" : name + ": " + f.problem});
  }
  return rows;
}

// Samples of prepared shards: the memory-mapped indexes answer for every row, so nothing is held
// per row (a row is found from the first row of each split).
class ShardRows final : public ScoreRows {
 public:
  ShardRows(const fs::path& dir, const std::string& split) : dir_(dir), split_(split) {
    for (Split s : {Split::kTrain, Split::kVal, Split::kTest}) {
      if (split != "all" && split != split_name(s)) continue;
      auto ds = ShardDataset::open(dir, s);
      if (ds->size() == 0) continue;
      first_rows_.push_back(size_);
      size_ += ds->size();
      splits_.push_back(s);
      datasets_.push_back(std::move(ds));
    }
    if (size_ == 0) throw DataError(dir.string() + ": no samples in split '" + split + "'");
  }
  std::size_t size() const override { return size_; }
  std::string id(std::size_t row) const override { return std::to_string(sample(row).sample_id); }
  std::string label(std::size_t row) const override {
    const auto& classes = datasets_[dataset_of(row)]->info().classes;
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
  std::string identity(std::size_t row) const override {
    const SampleRef s = sample(row);
    return fmt::format("{} {} {} bytes {}x{} encoding {}", split_name(splits_[dataset_of(row)]), s.sample_id, s.size,
                       s.width, s.height, static_cast<int>(s.encoding));
  }

 private:
  std::size_t dataset_of(std::size_t row) const {
    if (row >= size_) throw std::out_of_range(fmt::format("row {} of {} samples", row, size_));
    return static_cast<std::size_t>(std::upper_bound(first_rows_.begin(), first_rows_.end(), row) -
                                    first_rows_.begin()) -
           1;
  }
  SampleRef sample(std::size_t row) const {
    const std::size_t d = dataset_of(row);
    return datasets_[d]->sample(row - first_rows_[d]);
  }
  fs::path dir_;
  std::string split_;
  std::vector<std::shared_ptr<ShardDataset>> datasets_;
  std::vector<Split> splits_;
  std::vector<std::size_t> first_rows_;  // per dataset: its first row
  std::size_t size_ = 0;
};

std::unique_ptr<ScoreRows> file_rows(const fs::path& input, const RowsOptions& o) {
  const std::string ext = to_lower(input.extension().string());
  const fs::path root = o.root.empty() ? fs::absolute(input).parent_path() : fs::absolute(o.root);
  bool labelled = false;
  std::unique_ptr<FileRowStream> stream;
  std::string kind;
  if (ext == ".csv") {
    auto csv = std::make_unique<CsvRowStream>(input);
    labelled = csv->labelled();
    stream = std::move(csv);
    kind = "manifest ";
  } else if (ext == ".txt" || ext == ".lst") {
    stream = std::make_unique<ListRowStream>(input);
    kind = "list ";
  } else if (format_from_extension(input) != ImageFormat::kUnknown) {
    stream = std::make_unique<HeldRowStream>(
        std::vector<FileRow>{{input.filename().string(), input.filename().string(), "", ""}});
    kind = "image ";
  } else {
    throw UsageError(input.string() + ": not a CSV (.csv), a list (.txt, .lst), an image file, or a folder");
  }
  auto rows =
      std::make_unique<FileRows>(std::move(stream), root, kind + fs::absolute(input).string(), labelled, o.decode);
  if (rows->size() == 0) throw DataError(input.string() + ": no rows");
  return rows;
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
  return std::make_unique<FileRows>(std::make_unique<HeldRowStream>(std::move(rows)), fs::absolute(input),
                                    "folder " + fs::absolute(input).string(), labelled, o.decode);
}

}  // namespace shoplens
