#include "shoplens/data/manifest.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/csv.h"

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
    remap[old_id] = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), manifest.classes[old_id]) - sorted.begin());
  for (auto& r : manifest.records) r.label = remap[r.label];
  manifest.classes = sorted;
}

std::string column_for(const ManifestOptions& options, const std::string& role) {
  auto it = options.columns.find(role);
  return it == options.columns.end() ? role : it->second;
}

void require_records(const Manifest& m) {
  if (m.records.empty()) {
    std::string why = m.rejected.empty() ? "it has no rows"
                                         : "all " + std::to_string(m.rejected.size()) + " rows were rejected (first: line " +
                                               std::to_string(m.rejected.front().line) + ": " + m.rejected.front().reason + ")";
    throw DataError(m.source + ": empty dataset: " + why);
  }
}

}  // namespace

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kVal: return "val";
    case Split::kTest: return "test";
  }
  return "?";
}

std::optional<Split> parse_split(std::string_view text) {
  std::string s = to_lower(trim(text));
  if (s == "train" || s == "training") return Split::kTrain;
  if (s == "val" || s == "valid" || s == "validation" || s == "dev") return Split::kVal;
  if (s == "test" || s == "testing") return Split::kTest;
  return std::nullopt;
}

bool path_within(const fs::path& root, const fs::path& candidate) {
  fs::path r = normalised_absolute(root), c = normalised_absolute(candidate);
  auto rit = r.begin(), cit = c.begin();
  for (; rit != r.end(); ++rit, ++cit) {
    if (rit->empty()) continue;  // trailing separator
    if (cit == c.end() || *rit != *cit) return false;
  }
  return cit != c.end();
}

Manifest parse_manifest(std::string_view csv_text, const std::string& source, const ManifestOptions& options) {
  Manifest m;
  m.source = source;
  m.root = options.root;
  auto rows = parse_csv(csv_text);
  if (rows.empty()) throw DataError(source + ": empty manifest (no header line)");
  const CsvRecord& header = rows.front();
  if (!header.error.empty()) throw DataError(source + ":" + std::to_string(header.line) + ": bad header: " + header.error);

  std::unordered_map<std::string, std::size_t> col;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < header.fields.size(); ++i) {
    std::string name(trim(header.fields[i]));
    if (col.count(name)) throw DataError(source + ":1: duplicate column '" + name + "'");
    col[name] = i;
    names.push_back(name);
  }
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
  const std::size_t path_col = *find_column("path", true);
  const std::size_t label_col = *find_column("label", true);
  const auto split_col = find_column("split", false);
  const auto id_col = find_column("id", false);
  m.had_split_column = split_col.has_value();

  std::vector<std::size_t> meta_cols;
  if (!options.metadata_fields.empty()) {
    for (const auto& f : options.metadata_fields) {
      auto it = col.find(f);
      if (it == col.end())
        throw DataError(source + ":1: metadata field '" + f + "' is not a column" + did_you_mean(f, names));
      meta_cols.push_back(it->second);
      m.metadata_fields.push_back(f);
    }
  } else {
    for (std::size_t i = 0; i < names.size(); ++i) {
      bool role = i == path_col || i == label_col || (split_col && i == *split_col) || (id_col && i == *id_col);
      if (!role) {
        meta_cols.push_back(i);
        m.metadata_fields.push_back(names[i]);
      }
    }
  }

  LabelTable labels(options.classes);
  std::unordered_set<std::string> seen_ids;
  const fs::path root = options.root.empty() ? fs::path(".") : options.root;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const CsvRecord& row = rows[r];
    RejectedRow reject;
    reject.line = row.line;
    auto field = [&](std::size_t i) { return i < row.fields.size() ? std::string(trim(row.fields[i])) : std::string(); };
    reject.path = field(path_col);
    reject.id = id_col ? field(*id_col) : reject.path;
    auto rejected = [&](std::string reason) {
      reject.reason = std::move(reason);
      m.rejected.push_back(reject);
    };
    if (!row.error.empty()) { rejected("malformed CSV: " + row.error); continue; }
    if (row.fields.size() != header.fields.size()) {
      rejected("expected " + std::to_string(header.fields.size()) + " fields, found " + std::to_string(row.fields.size()));
      continue;
    }
    ManifestRecord rec;
    rec.line = row.line;
    rec.path = reject.path;
    rec.id = reject.id;
    if (rec.path.empty()) { rejected("empty path"); continue; }
    if (rec.id.empty()) { rejected("empty id"); continue; }
    if (rec.path.find('\0') != std::string::npos) { rejected("path contains a NUL byte"); continue; }
    fs::path p(rec.path);
    rec.file = (p.is_absolute() ? p : root / p).lexically_normal();
    if (!path_within(root, rec.file)) { rejected("path escapes the dataset root " + normalised_absolute(root).string()); continue; }
    std::string label = field(label_col);
    if (label.empty()) { rejected("empty label"); continue; }
    rec.label = labels.lookup(label);
    if (rec.label < 0) { rejected("unknown label '" + label + "'" + did_you_mean(label, labels.names())); continue; }
    if (split_col) {
      auto split = parse_split(field(*split_col));
      if (!split) { rejected("unknown split '" + field(*split_col) + "' (expected train, val or test)"); continue; }
      rec.split = *split;
    }
    if (!seen_ids.insert(rec.id).second) { rejected("duplicate id '" + rec.id + "'"); continue; }
    for (std::size_t c : meta_cols) rec.metadata.push_back(field(c));
    m.records.push_back(std::move(rec));
  }
  m.classes = labels.names();
  if (!labels.fixed()) sort_discovered_labels(m);
  require_records(m);
  if (!m.had_split_column) assign_splits(m, options.val_fraction, options.test_fraction, options.seed);
  return m;
}

Manifest read_manifest_file(const fs::path& file, const ManifestOptions& options) {
  if (!fs::is_regular_file(file)) throw DataError("manifest '" + file.string() + "' does not exist or is not a file");
  ManifestOptions resolved = options;
  if (resolved.root.empty()) resolved.root = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  return parse_manifest(read_file(file), file.string(), resolved);
}

Manifest scan_image_folder(const fs::path& root, const ManifestOptions& options) {
  Manifest m;
  m.source = root.string();
  m.root = root;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw DataError("'" + root.string() + "' is not a folder");

  std::vector<fs::path> top;
  for (const auto& e : fs::directory_iterator(root)) top.push_back(e.path());
  std::sort(top.begin(), top.end());
  bool split_layout = !top.empty();
  for (const auto& t : top)
    if (fs::is_directory(t) && !parse_split(t.filename().string())) split_layout = false;
  m.had_split_column = split_layout;

  LabelTable labels(options.classes);
  auto add_class_folder = [&](const fs::path& class_dir, Split split) {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(class_dir))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::string class_name = class_dir.filename().string();
    for (const auto& f : files) {
      std::string rel = f.lexically_relative(root).string();
      if (!is_image_extension(f)) {
        m.rejected.push_back({0, rel, rel, "not an image file extension '" + f.extension().string() + "'"});
        continue;
      }
      int label = labels.lookup(class_name);
      if (label < 0) {
        m.rejected.push_back({0, rel, rel, "class folder '" + class_name + "' is not in data.classes"});
        continue;
      }
      ManifestRecord rec;
      rec.id = rel;
      rec.path = rel;
      rec.file = f;
      rec.label = label;
      rec.split = split;
      m.records.push_back(std::move(rec));
    }
  };
  auto scan_level = [&](const fs::path& dir, Split split) {
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    for (const auto& e : entries) {
      if (fs::is_directory(e)) add_class_folder(e, split);
      else {
        std::string rel = e.lexically_relative(root).string();
        m.rejected.push_back({0, rel, rel, "file outside a class folder"});
      }
    }
  };
  if (split_layout) {
    for (const auto& t : top) {
      if (fs::is_directory(t)) scan_level(t, *parse_split(t.filename().string()));
      else {
        std::string rel = t.lexically_relative(root).string();
        m.rejected.push_back({0, rel, rel, "file outside a class folder"});
      }
    }
  } else {
    scan_level(root, Split::kTrain);
  }
  m.classes = labels.names();
  if (!labels.fixed()) sort_discovered_labels(m);
  require_records(m);
  if (!split_layout) assign_splits(m, options.val_fraction, options.test_fraction, options.seed);
  return m;
}

Manifest load_dataset_input(const fs::path& input, const ManifestOptions& options) {
  std::error_code ec;
  if (fs::is_directory(input, ec)) return scan_image_folder(input, options);
  if (!fs::exists(input, ec)) throw DataError("input '" + input.string() + "' does not exist");
  return read_manifest_file(input, options);
}

void assign_splits(Manifest& manifest, double val_fraction, double test_fraction, std::uint64_t seed) {
  std::vector<std::vector<std::size_t>> by_class(manifest.classes.size());
  for (std::size_t i = 0; i < manifest.records.size(); ++i) by_class[manifest.records[i].label].push_back(i);
  for (auto& members : by_class) {
    std::vector<std::pair<std::uint64_t, std::size_t>> keyed;
    for (std::size_t i : members) keyed.emplace_back(fnv1a(manifest.records[i].id, seed), i);
    std::sort(keyed.begin(), keyed.end());
    const std::size_t n = keyed.size();
    std::size_t n_test = static_cast<std::size_t>(n * test_fraction + 0.5);
    std::size_t n_val = static_cast<std::size_t>(n * val_fraction + 0.5);
    if (n_test + n_val >= n) n_test = n_val = 0;  // too few to split: keep them for training
    for (std::size_t k = 0; k < n; ++k) {
      Split s = k < n_test ? Split::kTest : (k < n_test + n_val ? Split::kVal : Split::kTrain);
      manifest.records[keyed[k].second].split = s;
    }
  }
}

}  // namespace shoplens
