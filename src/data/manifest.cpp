#include "shoplens/data/manifest.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/utf8.h"
#include "shoplens/core/enum_names.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/dataset_file.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

std::uint64_t fnv1a(std::string_view s, std::uint64_t seed) {
  std::uint64_t h = 1469598103934665603ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  // Final avalanche so nearby ids do not land in nearby buckets.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

bool is_image_extension(const fs::path& p) {
  static const std::set<std::string> kExt{".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"};
  return kExt.count(to_lower(p.extension().string())) > 0;
}

fs::path normalised_absolute(const fs::path& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  return (ec ? p : abs).lexically_normal();
}

// Label lookup that either uses a fixed class list or grows it as labels appear.
class LabelTable {
 public:
  explicit LabelTable(const std::vector<std::string>& fixed) : fixed_(!fixed.empty()), names_(fixed) {
    for (std::size_t i = 0; i < names_.size(); ++i) index_[names_[i]] = static_cast<int>(i);
  }
  // -1 when the class list is fixed and `name` is not in it.
  int lookup(const std::string& name) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    if (fixed_) return -1;
    int id = static_cast<int>(names_.size());
    names_.push_back(name);
    index_[name] = id;
    return id;
  }
  const std::vector<std::string>& names() const { return names_; }
  bool fixed() const { return fixed_; }

 private:
  bool fixed_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> index_;
};

// Discovered labels are sorted by name so label ids do not depend on row order.
void sort_discovered_labels(Manifest& manifest) {
  std::vector<std::string> sorted = manifest.classes;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> remap(manifest.classes.size());
  for (std::size_t old_id = 0; old_id < manifest.classes.size(); ++old_id)
    remap[old_id] =
        static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), manifest.classes[old_id]) - sorted.begin());
  for (auto& r : manifest.records) r.label = remap[r.label];
  manifest.classes = sorted;
}

std::string column_for(const ManifestOptions& options, const std::string& role) {
  auto it = options.columns.find(role);
  return it == options.columns.end() ? role : it->second;
}

void require_records(const Manifest& m) {
  if (m.records.empty()) {
    std::string why = m.rejected.empty()
                          ? "it has no rows"
                          : "all " + std::to_string(m.rejected.size()) + " rows were rejected (first: line " +
                                std::to_string(m.rejected.front().line) + ": " + m.rejected.front().reason + ")";
    throw DataError(m.source + ": empty dataset: " + why);
  }
}

// A field over its limit is cut in the reject's id and path, so it does not fill the reports.
std::string clipped(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  return text.substr(0, 200) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string too_long(const std::string& what, std::size_t size, std::size_t limit) {
  return what + " longer than " + std::to_string(limit) + " bytes (" + std::to_string(size) + ")";
}

std::string not_utf8_label(const std::string& label) {
  return "label is not valid UTF-8: '" + escape_invalid_utf8(label) + "'";
}

struct Columns {
  std::size_t count = 0;  // in the header
  std::size_t path = 0, label = 0;
  std::optional<std::size_t> split, id;
  std::vector<std::size_t> metadata;
  std::vector<std::string> metadata_names;
};

// The header's names, each within kMaxColumnNameBytes and unique.
std::unordered_map<std::string, std::size_t> header_columns(const CsvRecord& header, const std::string& source,
                                                            std::vector<std::string>& names) {
  if (!header.error.empty())
    throw DataError(source + ":" + std::to_string(header.line) + ": bad header: " + header.error);
  std::unordered_map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < header.fields.size(); ++i) {
    std::string name(trim(header.fields[i]));
    if (name.size() > kMaxColumnNameBytes)
      throw DataError(source + ":1: column " + std::to_string(i + 1) + "'s name is longer than " +
                      std::to_string(kMaxColumnNameBytes) + " bytes (" + std::to_string(name.size()) + ")");
    if (col.count(name)) throw DataError(source + ":1: duplicate column '" + name + "'");
    col[name] = i;
    names.push_back(name);
  }
  return col;
}

Columns resolve_columns(const CsvRecord& header, const std::string& source, const ManifestOptions& options) {
  std::vector<std::string> names;
  const auto col = header_columns(header, source, names);
  auto find_column = [&](const std::string& role, bool required) -> std::optional<std::size_t> {
    std::string name = column_for(options, role);
    auto it = col.find(name);
    if (it != col.end()) return it->second;
    if (required)
      throw DataError(source + ":1: no '" + name + "' column for the image " + role + did_you_mean(name, names) +
                      "; map it with data.columns." + role + " (columns are: " + join(names, ", ") + ")");
    if (options.columns.count(role))
      throw DataError(source + ":1: data.columns." + role + " names '" + name + "', which is not a column" +
                      did_you_mean(name, names));
    return std::nullopt;
  };
  Columns c;
  c.count = names.size();
  c.path = *find_column("path", true);
  c.label = *find_column("label", true);
  c.split = find_column("split", false);
  c.id = find_column("id", false);
  if (!options.metadata_fields.empty()) {
    for (const auto& f : options.metadata_fields) {
      auto it = col.find(f);
      if (it == col.end())
        throw DataError(source + ":1: metadata field '" + f + "' is not a column" + did_you_mean(f, names));
      c.metadata.push_back(it->second);
      c.metadata_names.push_back(f);
    }
    return c;
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool role = i == c.path || i == c.label || (c.split && i == *c.split) || (c.id && i == *c.id);
    if (!role) {
      c.metadata.push_back(i);
      c.metadata_names.push_back(names[i]);
    }
  }
  return c;
}

// Turns CSV rows into records or rejects, one row at a time.
class CsvRowReader {
 public:
  CsvRowReader(Manifest& m, Columns columns, const ManifestOptions& options, fs::path root)
      : m_(m), columns_(std::move(columns)), labels_(options.classes), root_(std::move(root)) {}

  void add(const CsvRecord& row) {
    ManifestRecord rec;
    rec.line = row.line;
    rec.path = field(row, columns_.path);
    rec.id = columns_.id ? field(row, *columns_.id) : rec.path;
    const std::string problem = check(row, rec);
    if (problem.empty()) {
      m_.records.push_back(std::move(rec));
      return;
    }
    m_.rejected.push_back({row.line, clipped(rec.id, kMaxIdBytes), clipped(rec.path, kMaxPathBytes), problem});
  }

  LabelTable& labels() { return labels_; }

 private:
  static std::string field(const CsvRecord& row, std::size_t i) {
    return i < row.fields.size() ? std::string(trim(row.fields[i])) : std::string();
  }

  // Why the row cannot be used, or "" (then `rec` is complete). Sizes come first, so the
  // later checks and the reports never handle a runaway field.
  std::string check(const CsvRecord& row, ManifestRecord& rec) {
    if (!row.error.empty()) return "malformed CSV: " + row.error;
    if (row.fields.size() != columns_.count)
      return "expected " + std::to_string(columns_.count) + " fields, found " + std::to_string(row.fields.size());
    if (rec.path.empty()) return "empty path";
    if (rec.path.size() > kMaxPathBytes) return too_long("path", rec.path.size(), kMaxPathBytes);
    if (rec.id.empty()) return "empty id";
    if (rec.id.size() > kMaxIdBytes) return too_long("id", rec.id.size(), kMaxIdBytes);
    if (rec.path.find('\0') != std::string::npos) return "path contains a NUL byte";
    const std::string label = field(row, columns_.label);
    if (label.empty()) return "empty label";
    if (label.size() > kMaxLabelBytes) return too_long("label", label.size(), kMaxLabelBytes);
    // A class name is the model's output name and a key of every JSON file about the dataset;
    // an escaped form could collide with a real name, so such a row is not used.
    if (!is_valid_utf8(label)) return not_utf8_label(label);
    for (std::size_t k = 0; k < columns_.metadata.size(); ++k) {
      rec.metadata.push_back(field(row, columns_.metadata[k]));
      if (rec.metadata.back().size() > kMaxMetadataValueBytes)
        return too_long("metadata '" + columns_.metadata_names[k] + "'", rec.metadata.back().size(),
                        kMaxMetadataValueBytes);
    }
    const fs::path p(rec.path);
    rec.file = (p.is_absolute() ? p : root_ / p).lexically_normal();
    if (std::string escape = root_escape_problem(root_, rec.file); !escape.empty()) return escape;
    rec.label = labels_.lookup(label);
    if (rec.label < 0) return "unknown label '" + label + "'" + did_you_mean(label, labels_.names());
    if (columns_.split) {
      auto split = parse_split(field(row, *columns_.split));
      if (!split) return "unknown split '" + field(row, *columns_.split) + "' (expected train, val or test)";
      rec.split = *split;
    }
    if (!seen_ids_.insert(rec.id).second) return "duplicate id '" + rec.id + "'";
    return "";
  }

  Manifest& m_;
  Columns columns_;
  LabelTable labels_;
  fs::path root_;
  std::unordered_set<std::string> seen_ids_;
};

// Why an ImageFolder entry is not an image file to read, or "": not a file to read at all
// (dataset_file.h; its real path is checked again when read), or not an image's extension.
std::string entry_problem(const fs::directory_entry& e) {
  std::string problem = folder_entry_problem(e);
  if (!problem.empty()) return problem;
  if (!is_image_extension(e.path())) return "not an image file extension '" + e.path().extension().string() + "'";
  return "";
}

// Walks root/<class>/... (or root/<split>/<class>/...) into records and rejects.
class FolderScanner {
 public:
  FolderScanner(Manifest& m, const ManifestOptions& options, fs::path root)
      : m_(m), labels_(options.classes), root_(std::move(root)) {}

  void scan_level(const fs::path& dir, Split split) {
    for (const auto& e : sorted_entries(dir)) {
      std::error_code ec;
      if (fs::is_directory(e, ec))
        add_class_folder(e, split);
      else
        reject(e, "file outside a class folder");
    }
  }

  LabelTable& labels() { return labels_; }

  static std::vector<fs::path> sorted_entries(const fs::path& dir) {
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    return entries;
  }

 private:
  void reject(const fs::path& f, const std::string& reason) {
    const std::string rel = f.lexically_relative(root_).string();
    m_.rejected.push_back({0, rel, rel, reason});
  }

  void add_class_folder(const fs::path& class_dir, Split split) {
    std::vector<fs::directory_entry> files;
    for (const auto& e : fs::recursive_directory_iterator(class_dir)) {
      std::error_code ec;
      if (!e.is_directory(ec) || e.is_symlink(ec)) files.push_back(e);  // real folders are walked into
    }
    std::sort(files.begin(), files.end());
    const std::string class_name = class_dir.filename().string();
    for (const auto& e : files) {
      std::string problem = entry_problem(e);
      if (problem.empty() && !is_valid_utf8(class_name)) problem = not_utf8_label(class_name);
      if (problem.empty() && labels_.lookup(class_name) < 0)
        problem = "class folder '" + class_name + "' is not in data.classes";
      if (!problem.empty()) {
        reject(e.path(), problem);
        continue;
      }
      ManifestRecord rec;
      rec.id = rec.path = e.path().lexically_relative(root_).string();
      rec.file = e.path();
      rec.label = labels_.lookup(class_name);
      rec.split = split;
      m_.records.push_back(std::move(rec));
    }
  }

  Manifest& m_;
  LabelTable labels_;
  fs::path root_;
};

}  // namespace

namespace {

// The first name of each split is the one written; the others are read from manifests.
constexpr EnumName<Split> kSplitNames[] = {
    {Split::kTrain, "train"}, {Split::kVal, "val"}, {Split::kTest, "test"},      {Split::kTrain, "training"},
    {Split::kVal, "valid"},   {Split::kVal, "dev"}, {Split::kVal, "validation"}, {Split::kTest, "testing"}};

}  // namespace

const char* split_name(Split split) { return name_in(kSplitNames, split); }

std::optional<Split> parse_split(std::string_view text) { return value_in(kSplitNames, to_lower(trim(text))); }

bool path_within(const fs::path& root, const fs::path& candidate) {
  return path_inside(normalised_absolute(root), normalised_absolute(candidate));
}

// The real path is only looked up for a row outside the root as spelled (rare: a symlinked root).
// The real path of every file is checked again when it is read (dataset_file.h).
std::string root_escape_problem(const fs::path& root, const fs::path& file) {
  if (path_within(root, file)) return "";
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (!ec) {
    const fs::path resolved = fs::weakly_canonical(file, ec);
    if (!ec && path_within(real_root, resolved)) return "";
  }
  return "path escapes root: it is outside " + normalised_absolute(root).string();
}

namespace {

// The manifest's records as they stream past: only the kept rows stay in memory.
Manifest manifest_from(CsvStreamReader& csv, const std::string& source, const ManifestOptions& options) {
  Manifest m;
  m.source = source;
  m.root = options.root.empty() ? fs::path(".") : options.root;
  std::vector<CsvRecord> rows = csv.next();
  if (rows.empty()) throw DataError(source + ": empty manifest (no header line)");
  Columns columns = resolve_columns(rows.front(), source, options);
  m.had_split_column = columns.split.has_value();
  m.metadata_fields = columns.metadata_names;

  CsvRowReader reader(m, std::move(columns), options, m.root);
  for (std::size_t r = 1; r < rows.size(); ++r) reader.add(rows[r]);
  for (rows = csv.next(); !rows.empty(); rows = csv.next())
    for (const CsvRecord& row : rows) reader.add(row);
  m.classes = reader.labels().names();
  if (!reader.labels().fixed()) sort_discovered_labels(m);
  require_records(m);
  if (!m.had_split_column)
    assign_splits(m, options.val_fraction, options.test_fraction, options.seed);
  else
    carve_validation_from_train(m, options.val_fraction, options.seed);
  return m;
}

}  // namespace

Manifest parse_manifest(std::string_view csv_text, const std::string& source, const ManifestOptions& options) {
  std::istringstream in{std::string(csv_text)};
  CsvStreamReader csv(in, source);
  return manifest_from(csv, source, options);
}

Manifest read_manifest_file(const fs::path& file, const ManifestOptions& options) {
  if (!fs::is_regular_file(file)) throw DataError("manifest '" + file.string() + "' does not exist or is not a file");
  ManifestOptions resolved = options;
  if (resolved.root.empty()) resolved.root = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError("manifest '" + file.string() + "' cannot be opened: " + std::strerror(errno));
  CsvStreamReader csv(in, file.string());
  return manifest_from(csv, file.string(), resolved);
}

Manifest scan_image_folder(const fs::path& root, const ManifestOptions& options) {
  Manifest m;
  m.source = root.string();
  m.root = root;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw DataError("'" + root.string() + "' is not a folder");

  const std::vector<fs::path> top = FolderScanner::sorted_entries(root);
  bool split_layout = !top.empty();
  for (const auto& t : top)
    if (fs::is_directory(t, ec) && !parse_split(t.filename().string())) split_layout = false;
  m.had_split_column = split_layout;

  FolderScanner scanner(m, options, root);
  if (split_layout) {
    for (const auto& t : top) {
      if (fs::is_directory(t, ec)) {
        scanner.scan_level(t, *parse_split(t.filename().string()));
      } else {
        const std::string rel = t.lexically_relative(root).string();
        m.rejected.push_back({0, rel, rel, "file outside a class folder"});
      }
    }
  } else {
    scanner.scan_level(root, Split::kTrain);
  }
  m.classes = scanner.labels().names();
  if (!scanner.labels().fixed()) sort_discovered_labels(m);
  require_records(m);
  if (!split_layout)
    assign_splits(m, options.val_fraction, options.test_fraction, options.seed);
  else
    carve_validation_from_train(m, options.val_fraction, options.seed);
  return m;
}

Manifest load_dataset_input(const fs::path& input, const ManifestOptions& options) {
  std::error_code ec;
  if (fs::is_directory(input, ec)) return scan_image_folder(input, options);
  if (!fs::exists(input, ec)) throw DataError("input '" + input.string() + "' does not exist");
  return read_manifest_file(input, options);
}

namespace {

// The members of each class, ordered by a seeded hash of their id: a stable, stratified order in
// which the first rows of a class go to the held-out splits.
std::vector<std::vector<std::size_t>> hashed_order_by_class(
    const Manifest& manifest, std::uint64_t seed, const std::function<bool(const ManifestRecord&)>& eligible) {
  std::vector<std::vector<std::pair<std::uint64_t, std::size_t>>> keyed(manifest.classes.size());
  for (std::size_t i = 0; i < manifest.records.size(); ++i)
    if (eligible(manifest.records[i]))
      keyed[manifest.records[i].label].emplace_back(fnv1a(manifest.records[i].id, seed), i);
  std::vector<std::vector<std::size_t>> ordered(keyed.size());
  for (std::size_t c = 0; c < keyed.size(); ++c) {
    std::sort(keyed[c].begin(), keyed[c].end());
    for (const auto& key_index : keyed[c]) ordered[c].push_back(key_index.second);
  }
  return ordered;
}

std::size_t rounded_share(std::size_t n, double fraction) {
  return static_cast<std::size_t>(std::llround(n * fraction));
}

}  // namespace

void assign_splits(Manifest& manifest, double val_fraction, double test_fraction, std::uint64_t seed) {
  const auto by_class = hashed_order_by_class(manifest, seed, [](const ManifestRecord&) { return true; });
  for (const auto& members : by_class) {
    const std::size_t n = members.size();
    std::size_t n_test = rounded_share(n, test_fraction);
    std::size_t n_val = rounded_share(n, val_fraction);
    if (n_test + n_val >= n) n_test = n_val = 0;  // too few to split: keep them for training
    for (std::size_t k = 0; k < n; ++k)
      manifest.records[members[k]].split =
          k < n_test ? Split::kTest : (k < n_test + n_val ? Split::kVal : Split::kTrain);
  }
}

void carve_validation_from_train(Manifest& manifest, double val_fraction, std::uint64_t seed) {
  manifest.val_carved_from_train = 0;
  if (val_fraction <= 0) return;
  for (const auto& r : manifest.records)
    if (r.split == Split::kVal) return;
  const auto by_class =
      hashed_order_by_class(manifest, seed, [](const ManifestRecord& r) { return r.split == Split::kTrain; });
  for (const auto& members : by_class) {
    const std::size_t n_val = rounded_share(members.size(), val_fraction);
    if (n_val >= members.size()) continue;  // too few to split: keep them for training
    for (std::size_t k = 0; k < n_val; ++k) manifest.records[members[k]].split = Split::kVal;
    manifest.val_carved_from_train += n_val;
  }
}

}  // namespace shoplens
