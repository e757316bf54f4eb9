// The inputs `shoplens score` reads: a CSV manifest of image files, or prepared shards.
#include <cctype>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/shards.h"
#include "shoplens/infer/scorer.h"

namespace shoplens {
namespace fs = std::filesystem;

namespace {

class ManifestRows final : public ScoreRows {
 public:
  ManifestRows(const fs::path& file, int min_short_side)
      : file_(file), root_(fs::absolute(file).parent_path()), min_short_side_(min_short_side) {
    const auto records = parse_csv(read_file(file));
    if (records.empty()) throw DataError(file.string() + ": empty manifest (expected a header with a 'path' column)");
    int path_col = -1, id_col = -1;
    const auto& header = records.front().fields;
    for (std::size_t c = 0; c < header.size(); ++c) {
      const std::string name = to_lower(trim(header[c]));
      if (name == "path" || name == "file" || name == "filepath") path_col = static_cast<int>(c);
      if (name == "id") id_col = static_cast<int>(c);
    }
    if (path_col < 0)
      throw DataError(file.string() + ":" + std::to_string(records.front().line) + ": no 'path' column in the header");
    // Every record after the header is a row, malformed ones too: they become error rows.
    for (std::size_t r = 1; r < records.size(); ++r) {
      const auto& rec = records[r];
      Row row;
      row.line = rec.line;
      if (!rec.error.empty()) {
        row.error = "line " + std::to_string(rec.line) + ": " + rec.error;
      } else if (static_cast<int>(rec.fields.size()) <= path_col || trim(rec.fields[path_col]).empty()) {
        row.error = "line " + std::to_string(rec.line) + ": no path";
      } else {
        row.path = std::string(trim(rec.fields[path_col]));
      }
      row.id = id_col >= 0 && static_cast<int>(rec.fields.size()) > id_col && !rec.fields[id_col].empty()
                   ? rec.fields[id_col]
                   : "line-" + std::to_string(rec.line);
      rows_.push_back(std::move(row));
    }
    if (rows_.empty()) throw DataError(file.string() + ": the manifest has a header but no rows");
  }
  std::size_t size() const override { return rows_.size(); }
  std::string id(std::size_t row) const override { return rows_.at(row).id; }
  cv::Mat image(std::size_t index) const override {
    const Row& row = rows_.at(index);
    if (!row.error.empty()) throw DataError(row.error);
    const fs::path file = fs::path(row.path).is_absolute() ? fs::path(row.path) : root_ / row.path;
    std::vector<std::uint8_t> bytes;
    try {
      bytes = read_binary_file(file);
    } catch (const std::exception& e) {
      throw DataError("cannot read " + row.path + ": " + e.what());
    }
    DecodeOptions options;
    options.min_short_side = min_short_side_;
    return decode_image(bytes.data(), bytes.size(), options).rgb;
  }
  std::string describe() const override { return "manifest " + fs::absolute(file_).string(); }

 private:
  struct Row {
    std::string id, path, error;
    std::size_t line = 0;
  };
  fs::path file_, root_;
  int min_short_side_ = 0;
  std::vector<Row> rows_;
};

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
  std::string id(std::size_t row) const override {
    const auto& [d, i] = refs_.at(row);
    return std::to_string(datasets_[d]->sample(i).sample_id);
  }
  cv::Mat image(std::size_t row) const override {
    const auto& [d, i] = refs_.at(row);
    const SampleRef s = datasets_[d]->sample(i);
    if (s.encoding == PayloadEncoding::kRaw)
      return cv::Mat(s.height, s.width, CV_8UC3, const_cast<std::uint8_t*>(s.data)).clone();
    cv::Mat rgb;
    decode_jpeg_into(s.data, s.size, rgb);
    return rgb;
  }
  std::string describe() const override { return "shards " + fs::absolute(dir_).string() + " split " + split_; }

 private:
  fs::path dir_;
  std::string split_;
  std::vector<std::shared_ptr<ShardDataset>> datasets_;
  std::vector<std::pair<std::size_t, std::size_t>> refs_;
};

}  // namespace

std::unique_ptr<ScoreRows> open_score_rows(const fs::path& input, const std::string& split, int min_short_side) {
  std::error_code ec;
  if (!fs::exists(input, ec)) throw UsageError("score: input " + input.string() + " does not exist");
  if (split != "all" && split != "train" && split != "val" && split != "test")
    throw UsageError("score: --split '" + split + "' is not one of all, train, val, test");
  if (fs::is_directory(input, ec)) return std::make_unique<ShardRows>(input, split);
  return std::make_unique<ManifestRows>(input, min_short_side);
}

}  // namespace shoplens
