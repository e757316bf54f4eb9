// The list of images a dataset is made of, read from a CSV manifest (with a column mapping) or
// an ImageFolder tree. Every input row ends up either in `records` or in `rejected` with its
// reason: nothing is dropped silently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shoplens {

enum class Split : std::uint8_t { kTrain = 0, kVal = 1, kTest = 2 };
constexpr int kNumSplits = 3;
const char* split_name(Split split);
// Accepts train, val, validation, valid, dev, test (any case).
std::optional<Split> parse_split(std::string_view text);

// Limits on one manifest row (docs/DATA.md, "what each bad input gets"). A data row with a longer
// field is quarantined with the field named; a longer column name is a manifest error. The CSV
// reader bounds a whole record (kMaxCsvRecordBytes, data/csv.h) before any field is looked at.
constexpr std::size_t kMaxPathBytes = 4096;  // Linux's PATH_MAX
constexpr std::size_t kMaxIdBytes = 4096;    // ids default to the path
constexpr std::size_t kMaxLabelBytes = 256;
constexpr std::size_t kMaxMetadataValueBytes = 1024;
constexpr std::size_t kMaxColumnNameBytes = 256;

struct ManifestRecord {
  std::string id;
  std::string path;            // as written in the input
  std::filesystem::path file;  // resolved, inside the dataset root
  int label = -1;
  Split split = Split::kTrain;
  std::vector<std::string> metadata;  // aligned with Manifest::metadata_fields; "" means missing
  std::size_t line = 0;               // CSV line (0 for ImageFolder input)
};

struct RejectedRow {
  std::size_t line = 0;
  std::string id;
  std::string path;
  std::string reason;
};

struct Manifest {
  std::string source;                // manifest file or folder, for messages
  std::filesystem::path root;        // as spelled; "." when the manifest is in the working folder
  std::vector<std::string> classes;  // label index -> name
  std::vector<std::string> metadata_fields;
  std::vector<ManifestRecord> records;
  std::vector<RejectedRow> rejected;
  bool had_split_column = false;
  std::size_t val_carved_from_train = 0;  // train rows made val because the input's splits had no val
  std::size_t total_rows() const { return records.size() + rejected.size(); }
};

struct ManifestOptions {
  std::filesystem::path root;                  // empty: the manifest's folder
  std::map<std::string, std::string> columns;  // role (path, label, split, id) -> header name
  std::vector<std::string> metadata_fields;    // empty: every other column
  std::vector<std::string> classes;            // empty: discovered and sorted
  double val_fraction = 0.1;
  double test_fraction = 0.1;
  std::uint64_t seed = 1234;
};

// Parses manifest text. `source` names it in messages. Throws DataError for problems with the
// whole file (no header, missing required column, no usable rows); row problems become rejects.
Manifest parse_manifest(std::string_view csv_text, const std::string& source, const ManifestOptions& options);
Manifest read_manifest_file(const std::filesystem::path& file, const ManifestOptions& options);
// root/<class>/<file>, or root/<split>/<class>/<file> when the top folders are split names.
Manifest scan_image_folder(const std::filesystem::path& root, const ManifestOptions& options);
// A folder is read as ImageFolder, a file as a CSV manifest.
Manifest load_dataset_input(const std::filesystem::path& input, const ManifestOptions& options);

// Deterministic, class-stratified split for inputs without a split column.
void assign_splits(Manifest& manifest, double val_fraction, double test_fraction, std::uint64_t seed);
// For inputs whose own splits have no val row (e.g. ImageFolder train/ and test/ only): moves
// val_fraction of each class's train rows to val, by the same seeded hash as assign_splits, so
// model selection and early stopping never need the test split. Test rows are never touched.
// Does nothing when val_fraction is 0 or some row is already val. Sets val_carved_from_train.
void carve_validation_from_train(Manifest& manifest, double val_fraction, std::uint64_t seed);

// True when `candidate` (lexically normalised) lies inside `root`. Symlinks are not resolved here:
// the real path of every file is checked when it is read (data/dataset_file.h).
bool path_within(const std::filesystem::path& root, const std::filesystem::path& candidate);

// "" when the row's `file` (lexically normalised) lies inside `root` as spelled, or inside root's
// real path once symlinks are resolved (an absolute path through the real folder when the root is
// a symlink, or the reverse); else "path escapes root: it is outside ROOT". The rule for manifest
// rows: prepare applies it to every row, predict, score and evaluate to relative rows.
std::string root_escape_problem(const std::filesystem::path& root, const std::filesystem::path& file);

}  // namespace shoplens
