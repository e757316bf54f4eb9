// The chunks of a score job: scored a row window at a time, verified against the rows they came
// from on resume, joined into predictions.csv as they stream past (score_chunks.h).
#include "score_chunks.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/utf8.h"
#include "shoplens/data/csv.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::string_view kStampTag = "#shoplens-chunk";

std::string chunk_name(std::size_t index) { return fmt::format("chunk-{:06d}.csv", index); }

std::vector<std::string> csv_header(const std::vector<std::string>& classes) {
  std::vector<std::string> h{"row", "id", "status", "label", "confidence"};
  for (const auto& c : classes) h.push_back("p_" + c);
  h.push_back("error");
  return h;
}

std::string chunk_csv(const std::vector<RowResult>& results, const ScoreRows& rows,
                      const std::vector<std::string>& classes) {
  std::string out;
  for (const auto& r : results) {
    std::vector<std::string> f{std::to_string(r.row), rows.id(r.row), r.ok ? "ok" : "error"};
    if (r.ok) {
      f.push_back(classes.at(r.label));
      f.push_back(fmt::format("{:.6f}", r.probs.at(r.label)));
      for (float p : r.probs) f.push_back(fmt::format("{:.6f}", p));
      f.push_back("");
    } else {
      f.push_back("");
      f.push_back("");
      for (std::size_t c = 0; c < classes.size(); ++c) f.push_back("");
      f.push_back(r.error);
    }
    out += csv_line(f) + "\n";
  }
  return out;
}

void put(AtomicFileWriter& out, const std::string& text) { out.write(text.data(), text.size()); }

// The rows of a chunk file as they stream past, up to its stamp line.
class ChunkRowsReader {
 public:
  explicit ChunkRowsReader(fs::path file)
      : file_(std::move(file)), in_(file_, std::ios::binary), csv_(in_, file_.string()) {
    if (!in_) throw DataError("score: cannot read " + file_.string() + ": " + std::strerror(errno));
  }

  // The next row; nullptr at the stamp line or the end of the file. Valid until the next call.
  const CsvRecord* next() {
    if (next_ == records_.size()) {
      records_ = csv_.next();
      next_ = 0;
      if (records_.empty()) return nullptr;
    }
    const CsvRecord& record = records_[next_++];
    if (!record.fields.empty() && record.fields[0].rfind(kStampTag, 0) == 0) return nullptr;
    return &record;
  }

  // The next row, which must be row `row` with `columns` fields.
  const CsvRecord& expect_row(std::size_t row, std::size_t columns) {
    const CsvRecord* record = next();
    if (!record)
      throw DataError(fmt::format("score: {} ends before row {}; remove the chunk and rerun", file_.string(), row));
    if (!record->error.empty() || record->fields.size() != columns || record->fields[0] != std::to_string(row))
      throw DataError(fmt::format("score: {} line {} is not row {}; remove the chunk and rerun", file_.string(),
                                  record->line, row));
    return *record;
  }

  const fs::path& file() const { return file_; }

 private:
  fs::path file_;
  std::ifstream in_;
  CsvStreamReader csv_;
  std::vector<CsvRecord> records_;
  std::size_t next_ = 0;
};

// The last line of `file` when it is at most `max_bytes` long (else "").
std::string last_line(const fs::path& file, std::size_t max_bytes) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw DataError("score: cannot read " + file.string() + ": " + std::strerror(errno));
  const auto size = static_cast<std::size_t>(std::max<std::streamoff>(0, in.tellg()));
  const std::size_t take = std::min(size, max_bytes + 2);
  std::string tail(take, '\0');
  in.seekg(static_cast<std::streamoff>(size - take));
  in.read(tail.data(), static_cast<std::streamsize>(take));
  if (!tail.empty() && tail.back() == '\n') tail.pop_back();
  const auto start = tail.rfind('\n');
  if (start == std::string::npos) return take == size && tail.size() <= max_bytes ? tail : "";
  return tail.substr(start + 1);
}

// What the chunk file on disk recorded, when it can verify rows [begin, end); says why not else.
std::optional<ChunkStamp> recorded_stamp(const fs::path& file, std::size_t chunk, std::size_t begin, std::size_t end,
                                         std::size_t blocks) {
  auto stamp = parse_chunk_stamp(last_line(file, 240 + 17 * blocks));
  if (!stamp) {
    spdlog::warn("score: chunk {} has no row fingerprint (written by an earlier version, or damaged): rescoring it",
                 chunk);
    return std::nullopt;
  }
  if (stamp->first_row != begin || stamp->rows != end - begin || stamp->block_rows != kRowWindow ||
      stamp->blocks.size() != blocks) {
    spdlog::warn("score: chunk {} records rows {}..{} in blocks of {}, not rows {}..{} in blocks of {}: rescoring it",
                 chunk, stamp->first_row, stamp->first_row + stamp->rows, stamp->block_rows, begin, end, kRowWindow);
    return std::nullopt;
  }
  return stamp;
}

struct ChunkContext {
  BatchInference& scorer;
  ScoreRows& rows;
  int batch;
  BatchTimings& timing;
  Progress& progress;
};

enum class ChunkOutcome { kReused, kRescored, kWritten };

struct ChunkResult {
  ChunkOutcome outcome;
  std::optional<ScoredFigures> recorded;  // a reused chunk's measurement from when it was scored
};

// What `timing` measured since `before`: this chunk's scoring.
ScoredFigures measured_since(const BatchTimings& timing, const ScoredFigures& before) {
  return {timing.images - before.images, timing.wall_seconds - before.seconds};
}

// Rows [first, last) (a loaded window) through the model, their lines into `out`.
void score_block(const ChunkContext& cx, AtomicFileWriter& out, std::size_t chunk, std::size_t first,
                 std::size_t last) {
  const auto results = cx.scorer.run_range(first, last, cx.batch, cx.timing);
  if (interrupt_requested() || results.size() != last - first) {
    spdlog::warn("score: interrupted in chunk {}; the chunks before it are done, rerun the same command to resume",
                 chunk);
    throw InterruptedError();
  }
  put(out, chunk_csv(results, cx.rows, cx.scorer.session().class_names()));
}

// Rows [first, last) of the recorded chunk, copied into `out` (or only read past without `out`).
void copy_rows(ChunkRowsReader& recorded, AtomicFileWriter* out, std::size_t first, std::size_t last,
               std::size_t columns) {
  for (std::size_t row = first; row < last; ++row) {
    const CsvRecord& record = recorded.expect_row(row, columns);
    if (out) put(*out, csv_line(record.fields) + "\n");
  }
}

// One chunk, block by block (a row window each). A block whose rows give the fingerprint the chunk
// file recorded keeps its predictions; the others are scored. A chunk whose every block matches is
// left as it is; any other is written whole, atomically, with its new stamp.
ChunkResult score_chunk(const ChunkContext& cx, const fs::path& file, std::size_t chunk, std::size_t begin,
                        std::size_t end) {
  const ScoredFigures before{cx.timing.images, cx.timing.wall_seconds};
  const std::size_t blocks = (end - begin + kRowWindow - 1) / kRowWindow;
  const std::size_t columns = cx.scorer.session().class_names().size() + 6;
  std::error_code ec;
  const bool on_disk = fs::exists(file, ec);
  const std::optional<ChunkStamp> recorded = on_disk ? recorded_stamp(file, chunk, begin, end, blocks) : std::nullopt;
  ChunkStamp stamp{begin, end - begin, kRowWindow, {}, std::nullopt};
  std::optional<AtomicFileWriter> out;      // opened at the first block that must be scored
  std::optional<ChunkRowsReader> previous;  // the recorded rows, for the blocks that match
  for (std::size_t b = 0; b < blocks; ++b) {
    if (interrupt_requested()) throw InterruptedError();  // verifying a long input takes a while too
    const std::size_t first = begin + b * kRowWindow, last = std::min(end, first + kRowWindow);
    cx.rows.load_window(first, last);
    stamp.blocks.push_back(rows_fingerprint(cx.rows, first, last));
    const bool unchanged = recorded && recorded->blocks[b] == stamp.blocks.back();
    if (!out && !unchanged) {
      out.emplace(file);
      if (recorded) {
        spdlog::warn("score: chunk {} rows changed since it was scored: rescoring (rows {}..{} differ)", chunk, first,
                     last);
        previous.emplace(file);
        copy_rows(*previous, &*out, begin, first, columns);
      }
    }
    if (out && unchanged) copy_rows(*previous, &*out, first, last, columns);
    if (out && !unchanged) {
      if (previous) copy_rows(*previous, nullptr, first, last, columns);
      score_block(cx, *out, chunk, first, last);
    }
    cx.progress.advance(last - first);
  }
  if (!out) return {ChunkOutcome::kReused, recorded->scored};
  stamp.scored = measured_since(cx.timing, before);
  put(*out, format_chunk_stamp(stamp));
  out->commit();
  return {on_disk ? ChunkOutcome::kRescored : ChunkOutcome::kWritten, std::nullopt};
}

// The reason without the row's own part, so rows that failed alike count together. A row's error
// is "<where>: <why>" (the file it names, or its line; decode errors have no <where>), and <why>
// may itself be "<what>: <detail>": the last two parts are kept, or the last one after a file or
// line, at most 80 bytes.
std::string reason_kind(const std::string& reason) {
  std::vector<std::size_t> separators;
  for (auto at = reason.find(": "); at != std::string::npos; at = reason.find(": ", at + 2)) separators.push_back(at);
  std::size_t from = 0;
  if (separators.size() >= 2) {
    from = separators[separators.size() - 2] + 2;
  } else if (separators.size() == 1) {
    const std::string where = reason.substr(0, separators[0]);
    const auto line = where.rfind(" line ");
    const bool names_a_line = line != std::string::npos && line + 6 < where.size() &&
                              where.find_first_not_of("0123456789", line + 6) == std::string::npos;
    if (where.rfind("cannot read ", 0) == 0 || names_a_line) from = separators[0] + 2;
  }
  return escape_invalid_utf8(std::string_view(reason).substr(from, 80));
}

void count_reason(JoinedRows& joined, const std::string& reason) {
  ++joined.errors;
  std::string kind = reason_kind(reason);
  if (!joined.error_reasons.count(kind) && joined.error_reasons.size() >= kMaxErrorReasons - 1)
    kind = "(other reasons)";
  joined.error_reasons[kind]++;
}

// The p_<class> columns of a chunk row (row, id, status, label, confidence, p_..., error).
std::vector<float> chunk_probabilities(const std::vector<std::string>& fields, std::size_t classes) {
  std::vector<float> probs(classes);
  for (std::size_t c = 0; c < classes; ++c) probs[c] = std::stof(fields[5 + c]);
  return probs;
}

// One chunk's rows into predictions.csv, each counted (and, labelled, added to `metrics`).
void join_chunk(ChunkRowsReader& chunk, std::size_t begin, std::size_t end, std::size_t classes, ScoreRows& rows,
                EvaluationAccumulator* metrics, AtomicFileWriter& out, JoinedRows& joined) {
  for (std::size_t first = begin; first < end; first += kRowWindow) {
    const std::size_t last = std::min(end, first + kRowWindow);
    if (metrics) rows.load_window(first, last);  // the true labels
    for (std::size_t row = first; row < last; ++row) {
      const CsvRecord& record = chunk.expect_row(row, classes + 6);
      if (record.fields[2] == "error") {
        count_reason(joined, record.fields.back());
        if (metrics) metrics->add_unreadable(rows.label(row));
      } else if (metrics) {
        metrics->add(rows.label(row), chunk_probabilities(record.fields, classes));
      }
      put(out, csv_line(record.fields) + "\n");
    }
  }
  if (chunk.next())
    throw DataError("score: " + chunk.file().string() + " holds rows after row " + std::to_string(end - 1) +
                    "; remove the chunk and rerun");
}

// A whole number in `base`, all of `text` (no sign, no spaces, no overflow).
template <class Value>
bool parse_number(const std::string& text, int base, Value& value) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, base);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-') return false;
  value = static_cast<Value>(parsed);
  return true;
}

bool parse_seconds(const std::string& text, double& value) {
  char* end = nullptr;
  errno = 0;
  value = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' && errno == 0 && std::isfinite(value) && value >= 0;
}

// One key=value of a stamp line into `stamp`; false for an unknown key or a malformed value.
bool parse_stamp_field(const std::string& key, const std::string& value, ChunkStamp& stamp) {
  if (key == "first_row") return parse_number(value, 10, stamp.first_row);
  if (key == "rows") return parse_number(value, 10, stamp.rows);
  if (key == "block_rows") return parse_number(value, 10, stamp.block_rows);
  if (key == "scored_images") {
    if (!stamp.scored) stamp.scored.emplace();
    return parse_number(value, 10, stamp.scored->images);
  }
  if (key == "scored_seconds") {
    if (!stamp.scored) stamp.scored.emplace();
    return parse_seconds(value, stamp.scored->seconds);
  }
  if (key != "fingerprints") return false;
  std::istringstream list(value);
  for (std::string hex; std::getline(list, hex, ';');) {
    std::uint64_t print = 0;
    if (hex.size() != 16 || !parse_number(hex, 16, print)) return false;
    stamp.blocks.push_back(print);
  }
  return true;
}

}  // namespace

std::string format_chunk_stamp(const ChunkStamp& stamp) {
  std::string line = fmt::format("{} first_row={} rows={} block_rows={} fingerprints=", kStampTag, stamp.first_row,
                                 stamp.rows, stamp.block_rows);
  for (std::size_t b = 0; b < stamp.blocks.size(); ++b) line += fmt::format("{}{:016x}", b ? ";" : "", stamp.blocks[b]);
  if (stamp.scored)
    line += fmt::format(" scored_images={} scored_seconds={:.6f}", stamp.scored->images, stamp.scored->seconds);
  return line + "\n";
}

std::optional<ChunkStamp> parse_chunk_stamp(std::string_view line) {
  std::istringstream in{std::string(line)};
  std::string tag, token;
  if (!(in >> tag) || tag != kStampTag) return std::nullopt;
  ChunkStamp stamp;
  std::set<std::string> keys;
  while (in >> token) {
    const auto eq = token.find('=');
    const std::string key = token.substr(0, eq), value = eq == std::string::npos ? "" : token.substr(eq + 1);
    if (!keys.insert(key).second || !parse_stamp_field(key, value, stamp)) return std::nullopt;
  }
  const bool rows_known =
      keys.count("first_row") && keys.count("rows") && keys.count("block_rows") && keys.count("fingerprints");
  // The measurement is both figures or none (a stamp written before it was recorded).
  if (!rows_known || keys.count("scored_images") != keys.count("scored_seconds")) return std::nullopt;
  return stamp;
}

std::uint64_t rows_fingerprint(const ScoreRows& rows, std::size_t begin, std::size_t end) {
  Fingerprint print;
  for (std::size_t row = begin; row < end; ++row) print.add(std::uint64_t{row}).add(rows.identity(row));
  return print.value();
}

std::uint64_t shard_fingerprint(ScoreRows& rows, RowRange range) {
  Fingerprint print;
  print.add(std::uint64_t{rows.size()});
  for_each_window(rows, range.begin, range.end, [&](std::size_t first, std::size_t last) {
    if (interrupt_requested()) throw InterruptedError();
    print.add(rows_fingerprint(rows, first, last));
  });
  return print.value();
}

ScoredFigures JobThroughput::total() const {
  ScoredFigures sum = this_run;
  return sum += recorded;
}

bool JobThroughput::measured() const { return total().images > 0 && total().seconds > 0; }

double JobThroughput::images_per_second() const {
  return measured() ? static_cast<double>(total().images) / total().seconds : 0.0;
}

std::string JobThroughput::source() const {
  const bool now = this_run.images > 0, before = recorded.images > 0;
  std::string from = now && before ? "measured in this run and recorded when its reused chunks were scored"
                     : now         ? "measured in this run"
                     : before      ? "recorded when its reused chunks were scored"
                                   : "not measured";
  if (chunks_unmeasured > 0)
    from += fmt::format("; {} recorded no timing (scored by an earlier version)",
                        count_of(static_cast<std::int64_t>(chunks_unmeasured), "reused chunk"));
  return from;
}

json JobThroughput::to_json() const {
  auto figures = [](const ScoredFigures& f) { return json{{"images", f.images}, {"seconds", f.seconds}}; };
  return {{"images", total().images},
          {"seconds", total().seconds},
          {"images_per_second", measured() ? json(images_per_second()) : json(nullptr)},
          {"this_run", figures(this_run)},
          {"recorded_in_reused_chunks", figures(recorded)},
          {"reused_chunks_without_timing", chunks_unmeasured},
          {"source", source()}};
}

JobThroughput job_throughput(const BatchTimings& this_run, const ChunkCounts& chunks) {
  return {{this_run.images, this_run.wall_seconds}, chunks.recorded, chunks.reused_unmeasured};
}

ChunkCounts score_chunks(const ScoreOptions& o, BatchInference& scorer, ScoreRows& rows, RowRange range, int batch,
                         BatchTimings& timing) {
  const std::size_t n = range.size(), chunk_rows = static_cast<std::size_t>(o.chunk_rows);
  const std::size_t n_chunks = (n + chunk_rows - 1) / chunk_rows;
  ChunkCounts counts;
  Progress progress("score", n, "img");
  const ChunkContext cx{scorer, rows, batch, timing, progress};
  for (std::size_t c = 0; c < n_chunks; ++c) {
    const std::size_t begin = range.begin + c * chunk_rows, end = std::min(range.end, begin + chunk_rows);
    ChunkResult result;
    try {
      result = score_chunk(cx, o.out_dir / "chunks" / chunk_name(c), c, begin, end);
    } catch (const IoError& e) {
      // Full disk, a file size limit, a folder in the chunk's place: the temporary is gone, so no
      // chunk looks complete.
      throw IoError(
          fmt::format("score: chunk {} of {} not saved: {}; the {} before it {} complete, free space "
                      "(or fix what the reason names) and rerun the same command to resume",
                      c, n_chunks, e.what(), count_of(static_cast<std::int64_t>(c), "chunk"), c == 1 ? "is" : "are"));
    }
    counts.reused += result.outcome == ChunkOutcome::kReused;
    counts.rescored += result.outcome == ChunkOutcome::kRescored;
    counts.written += result.outcome != ChunkOutcome::kReused;
    if (result.outcome == ChunkOutcome::kReused && result.recorded) counts.recorded += *result.recorded;
    if (result.outcome == ChunkOutcome::kReused && !result.recorded) ++counts.reused_unmeasured;
  }
  progress.finish();
  return counts;
}

JoinedRows join_chunks(const ScoreOptions& o, const std::vector<std::string>& classes, ScoreRows& rows, RowRange range,
                       EvaluationAccumulator* metrics) {
  const std::size_t n = range.size(), chunk_rows = static_cast<std::size_t>(o.chunk_rows);
  const std::size_t n_chunks = (n + chunk_rows - 1) / chunk_rows;
  JoinedRows joined;
  try {
    AtomicFileWriter out(o.out_dir / "predictions.csv");
    put(out, csv_line(csv_header(classes)) + "\n");
    for (std::size_t c = 0; c < n_chunks; ++c) {
      if (interrupt_requested()) throw InterruptedError();
      ChunkRowsReader chunk(o.out_dir / "chunks" / chunk_name(c));
      const std::size_t begin = range.begin + c * chunk_rows;
      join_chunk(chunk, begin, std::min(range.end, begin + chunk_rows), classes.size(), rows, metrics, out, joined);
    }
    out.commit();
  } catch (const IoError& e) {
    throw IoError(
        fmt::format("score: predictions.csv not saved: {}; {} complete, free space (or fix what "
                    "the reason names) and rerun the same command to join them",
                    e.what(), n_chunks == 1 ? "the 1 chunk is" : fmt::format("all {} chunks are", n_chunks)));
  }
  return joined;
}

}  // namespace shoplens
