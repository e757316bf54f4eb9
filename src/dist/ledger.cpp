#include "shoplens/dist/ledger.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/core/plural.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

LedgerWriter::LedgerWriter(const fs::path& run_dir, const std::string& segment, int rank, int world_size,
                           std::int64_t start_step) {
  const fs::path dir = run_dir / "ledger";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create " + dir.string() + ": " + ec.message());
  path_ = dir / fmt::format("{}.rank-{}.jsonl", segment, rank);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError("cannot open ledger " + path_.string() + ": " + std::strerror(errno));
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  append({{"type", "segment"},
          {"segment", segment},
          {"rank", rank},
          {"world_size", world_size},
          {"start_step", start_step},
          {"started_at_ms", now_ms}});
}

LedgerWriter::~LedgerWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void LedgerWriter::append(const json& record) {
  const std::string line = record.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot append to ledger " + path_.string() + ": " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

void LedgerWriter::epoch(std::int64_t epoch, std::int64_t steps, std::int64_t global_batch,
                         const std::vector<std::uint64_t>& unread, bool with_replacement) {
  append({{"type", "epoch"},
          {"epoch", epoch},
          {"steps", steps},
          {"global_batch", global_batch},
          {"unread", unread},
          {"with_replacement", with_replacement}});
}

void LedgerWriter::step(std::int64_t epoch, std::int64_t step, const std::vector<std::uint64_t>& ids) {
  append({{"type", "step"}, {"epoch", epoch}, {"step", step}, {"ids", ids}});
}

std::vector<LedgerFile> read_ledger_files(const fs::path& run_dir) {
  const fs::path dir = run_dir / "ledger";
  std::vector<LedgerFile> files;
  if (fs::is_directory(dir))
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".jsonl") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      files.push_back({entry.path().filename().string(), text.str()});
    }
  if (files.empty())
    throw IoError("no ledger in " + dir.string() + ": train with --ledger (dist.ledger=true) to record one");
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return files;
}

bool LedgerReport::exact() const {
  if (epochs.empty() || !missing_steps.empty()) return false;
  for (const auto& e : epochs)
    if (!e.exact()) return false;
  return true;
}

namespace {

struct StepRecord {
  std::int64_t epoch = 0, step = 0;
  int rank = 0;
  std::vector<std::uint64_t> ids;
};

struct Segment {
  std::string id;
  std::int64_t start_step = 0;
  std::int64_t started_at_ms = 0;
  std::vector<StepRecord> steps;
};

std::string preview(const std::vector<std::uint64_t>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size() && i < 10; ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  if (ids.size() > 10) out += fmt::format(", ... ({} in all)", ids.size());
  return out;
}

// Rank 0's record at the start of an epoch: how many steps it has, the ids it leaves for later.
struct EpochHeader {
  std::int64_t steps = 0;
  std::int64_t global_batch = 0;
  std::vector<std::uint64_t> unread;
  bool with_replacement = false;
};

// What the ledger files say, before the segments are replayed.
struct ParsedLedger {
  std::map<std::string, Segment> segments;
  std::map<std::int64_t, EpochHeader> epoch_headers;
};

using LedgerFields = JsonFields<DataError>;

// The sample ids of `key`: non-negative JSON integers.
std::vector<std::uint64_t> sample_ids(const LedgerFields& record, const char* key) {
  const json& ids = record.list(key);
  std::vector<std::uint64_t> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_unsigned())
      record.type_error(fmt::format("{}[{}]", key, i), "a sample id (a whole number >= 0)", ids[i]);
    out.push_back(ids[i].get<std::uint64_t>());
  }
  return out;
}

// One record of `file`; `segment_id` is the file's current segment (set by its segment record).
void read_record(const LedgerFields& record, const LedgerFile& file, std::string& segment_id, ParsedLedger& parsed,
                 LedgerReport& report) {
  const std::string type = record.text("type", true);
  if (type == "segment") {
    segment_id = record.text("segment", true);
    auto& seg = parsed.segments[segment_id];
    seg.id = segment_id;
    seg.start_step = record.integer("start_step", 0, kMaxLedgerStep);
    const std::int64_t at = record.integer("started_at_ms", 0, std::numeric_limits<std::int64_t>::max());
    if (seg.started_at_ms == 0 || at < seg.started_at_ms) seg.started_at_ms = at;
  } else if (type == "epoch") {
    EpochHeader h;
    h.steps = record.integer("steps", 1, kMaxLedgerStep);
    h.global_batch = record.integer("global_batch", 1, kMaxLedgerStep);
    h.unread = sample_ids(record, "unread");
    h.with_replacement = record.flag("with_replacement", false);
    parsed.epoch_headers[record.integer("epoch", 0, kMaxLedgerEpoch)] = std::move(h);
  } else if (type == "step") {
    if (segment_id.empty()) record.fail("a step before the segment record");
    StepRecord s;
    s.epoch = record.integer("epoch", 0, kMaxLedgerEpoch);
    s.step = record.integer("step", 1, kMaxLedgerStep);
    s.ids = sample_ids(record, "ids");
    const auto rank_pos = file.name.rfind(".rank-");
    s.rank = rank_pos == std::string::npos ? 0 : std::atoi(file.name.c_str() + rank_pos + 6);
    parsed.segments[segment_id].steps.push_back(std::move(s));
    report.records++;
  } else {
    record.fail(fmt::format("unknown record type \"{}\"", type));
  }
}

// Reads one file's JSON lines. A last line without its newline is a write cut short (torn), not an error.
void read_ledger_file(const LedgerFile& file, ParsedLedger& parsed, LedgerReport& report) {
  std::istringstream in(file.content);
  std::string line;
  std::int64_t number = 0;
  std::string segment_id;
  while (std::getline(in, line)) {
    ++number;
    const bool has_newline = !in.eof();  // before peek(), which sets eof at the end
    const bool torn = in.peek() == std::char_traits<char>::eof() && !has_newline;
    json record;
    try {
      record = json::parse(line);
    } catch (const std::exception&) {
      if (!torn) throw DataError(fmt::format("ledger {}:{}: not a JSON record", file.name, number));
    }
    if (torn) {  // even complete JSON without its newline: the write was cut after the brace
      report.torn_lines.push_back(fmt::format("{}:{}", file.name, number));
      break;
    }
    try {
      read_record(LedgerFields(record, fmt::format("ledger {}:{}", file.name, number)), file, segment_id, parsed,
                  report);
    } catch (const DataError&) {
      throw;  // names file:line already
    } catch (const std::exception& e) {
      throw DataError(fmt::format("ledger {}:{}: malformed record: {}", file.name, number, e.what()));
    }
  }
}

// Replays the segments in the order they started: each one redoes everything after its start.
std::vector<StepRecord> replay_segments(const std::map<std::string, Segment>& segments, LedgerReport& report) {
  std::vector<const Segment*> ordered;
  ordered.reserve(segments.size());
  for (const auto& [id, seg] : segments) ordered.push_back(&seg);
  std::sort(ordered.begin(), ordered.end(), [](const Segment* a, const Segment* b) {
    return a->started_at_ms != b->started_at_ms ? a->started_at_ms < b->started_at_ms : a->id < b->id;
  });
  std::vector<StepRecord> kept;
  for (const Segment* seg : ordered) {
    const auto before = kept.size();
    kept.erase(std::remove_if(kept.begin(), kept.end(), [&](const StepRecord& r) { return r.step > seg->start_step; }),
               kept.end());
    report.superseded += static_cast<std::int64_t>(before - kept.size());
    std::set<std::pair<std::int64_t, int>> seen;
    for (const auto& r : seg->steps) {
      if (!seen.insert({r.step, r.rank}).second)
        throw DataError(fmt::format("ledger: segment {} records step {} of rank {} twice", seg->id, r.step, r.rank));
      kept.push_back(r);
    }
  }
  return kept;
}

// One epoch's verdict from the steps that count and the epoch's header (expected steps, unread ids).
LedgerEpochReport verify_epoch(std::int64_t epoch, const std::vector<const StepRecord*>& records,
                               const EpochHeader* header, const std::vector<std::uint64_t>& train_ids,
                               const std::unordered_set<std::uint64_t>& train_set) {
  LedgerEpochReport e;
  e.epoch = epoch;
  std::set<std::int64_t> steps;
  std::unordered_map<std::uint64_t, int> uses;
  for (const auto* r : records) {
    steps.insert(r->step);
    for (auto id : r->ids) uses[id]++;
  }
  e.steps_recorded = static_cast<std::int64_t>(steps.size());
  std::unordered_set<std::uint64_t> unread;
  e.has_header = header != nullptr;
  e.train_samples = static_cast<std::int64_t>(train_ids.size());
  if (header) {
    e.steps_expected = header->steps;
    e.global_batch = header->global_batch;
    e.with_replacement = header->with_replacement;
    unread.insert(header->unread.begin(), header->unread.end());
  }
  e.unread = static_cast<std::int64_t>(unread.size());
  e.complete = e.steps_expected > 0 && e.steps_recorded == e.steps_expected;
  for (const auto& [id, count] : uses) {
    if (!train_set.count(id)) e.unknown.push_back(id);
    // Read twice, or read although the epoch's order left it for a later epoch.
    if (!e.with_replacement && (count > 1 || unread.count(id))) e.duplicated.push_back(id);
  }
  e.used = static_cast<std::int64_t>(uses.size());
  if (e.complete && !e.with_replacement)
    for (auto id : train_ids)
      if (!uses.count(id) && !unread.count(id)) e.missing.push_back(id);
  std::sort(e.duplicated.begin(), e.duplicated.end());
  std::sort(e.unknown.begin(), e.unknown.end());
  return e;
}

// The runs of steps from the first segment's start to the last step (or `final_step`, where the
// run ended) that no kept record covers: lines lost from the ledger, or steps taken without one.
std::vector<std::pair<std::int64_t, std::int64_t>> find_missing_steps(const std::map<std::string, Segment>& segments,
                                                                      const std::vector<StepRecord>& kept,
                                                                      std::int64_t final_step) {
  std::int64_t next = std::numeric_limits<std::int64_t>::max();  // the first step not yet seen covered
  for (const auto& [id, seg] : segments) next = std::min(next, seg.start_step + 1);
  std::set<std::int64_t> steps;
  for (const auto& r : kept) steps.insert(r.step);
  std::vector<std::pair<std::int64_t, std::int64_t>> gaps;
  for (const std::int64_t step : steps) {
    if (step > next) gaps.emplace_back(next, step - 1);
    next = std::max(next, step + 1);
  }
  if (!segments.empty() && final_step >= next) gaps.emplace_back(next, final_step);
  return gaps;
}

std::string step_runs_text(const std::vector<std::pair<std::int64_t, std::int64_t>>& runs) {
  std::string out;
  for (std::size_t i = 0; i < runs.size() && i < 10; ++i)
    out += (i ? ", " : "") + (runs[i].first == runs[i].second ? std::to_string(runs[i].first)
                                                              : fmt::format("{}-{}", runs[i].first, runs[i].second));
  if (runs.size() > 10) out += fmt::format(", ... ({} gaps in all)", runs.size());
  return out;
}

// One epoch's lines of the text report: its steps, the samples read, the verdict, and why any
// training samples went unread.
std::string epoch_text(const LedgerEpochReport& e) {
  std::string out = fmt::format("epoch {}: {} of {} {}{}, {} of {} training samples used: ", e.epoch, e.steps_recorded,
                                e.steps_expected, noun_for(e.steps_expected, "step"),
                                e.complete ? " (complete)" : " (partial)", e.used, e.train_samples);
  if (e.with_replacement)
    out += "sampler draws with replacement (not an exactly-once order)\n";
  else if (e.exact())
    out += e.complete ? "each once\n" : "none twice so far\n";
  else {
    out += "NOT EXACT\n";
    if (!e.duplicated.empty()) out += "  read more than once: " + preview(e.duplicated) + "\n";
    if (!e.missing.empty()) out += "  never read: " + preview(e.missing) + "\n";
    if (!e.unknown.empty()) out += "  not in the training split: " + preview(e.unknown) + "\n";
    if (!e.has_header) out += "  no epoch record (rank 0's line at the epoch's start): its steps cannot be checked\n";
  }
  if (!e.unused_note.empty()) out += "  " + e.unused_note + "\n";
  return out;
}

// "110 of 238 training samples (46%)".
std::string share_of_split(std::int64_t count, std::int64_t total) {
  return fmt::format("{} of {} training samples ({:.0f}%)", count, total,
                     total > 0 ? 100.0 * static_cast<double>(count) / static_cast<double>(total) : 0.0);
}

// A complete epoch reads floor(N / G) whole global batches: the order's tail of N mod G samples is
// not read in it (training reads whole global batches only, as loader.drop_last does elsewhere).
void judge_complete_epoch(LedgerEpochReport& e, bool followed) {
  if (e.unread == 0) return;
  if (e.global_batch > 0 && e.unread >= e.global_batch) {
    e.unused_fault = true;
    e.unused_note = fmt::format(
        "{} left unread, a whole global batch of {} or more: NOT EXPECTED (the epoch's steps should have read "
        "them)",
        share_of_split(e.unread, e.train_samples), e.global_batch);
    return;
  }
  e.unused_note = fmt::format(
      "{} not read in this epoch: the tail of its order short of a whole global batch of {} (training steps read "
      "whole global batches only, as with loader.drop_last). Expected. ",
      share_of_split(e.unread, e.train_samples), e.global_batch);
  if (followed)
    e.unused_note += "The next epoch reshuffles them in.";
  else if (e.last_of_run)
    e.unused_note +=
        "This was the run's last epoch, so they were never used: a smaller global batch (or one that divides the "
        "split) or more epochs would use them.";
  else
    e.unused_note += "The run has not finished (no summary.json): a next epoch would reshuffle them in.";
}

// A partial epoch: the run stopped inside it (a steps cap, early stopping), or has not finished.
void judge_partial_epoch(LedgerEpochReport& e, const std::string& run_status, std::int64_t final_step) {
  const std::string unused = share_of_split(e.not_used(), e.train_samples);
  if (!e.last_of_run) {
    e.unused_note = fmt::format("{} not read so far: the run has not finished (no summary.json)", unused);
  } else if (run_status == "max_steps") {
    e.unused_note = fmt::format(
        "{} not read: the run stopped at train.max_steps (step {}) inside this epoch. Expected with a steps cap.",
        unused, final_step);
  } else if (run_status == "early_stopped") {
    e.unused_note = fmt::format("{} not read: early stopping ended the run (step {}) inside this epoch. Expected.",
                                unused, final_step);
  } else {
    e.unused_fault = true;
    e.unused_note = fmt::format("{} not read, yet the run ended ({}) inside this epoch: NOT EXPECTED", unused,
                                run_status.empty() ? "no status" : run_status);
  }
}

// Says, per epoch, why training samples went unread and whether that was expected.
void judge_unused_samples(LedgerReport& report) {
  for (auto& e : report.epochs) {
    e.last_of_run = !report.run_status.empty() && &e == &report.epochs.back();
    if (e.with_replacement || !e.has_header) continue;
    if (e.complete)
      judge_complete_epoch(e, &e != &report.epochs.back());
    else
      judge_partial_epoch(e, report.run_status, report.final_step);
  }
}

}  // namespace

LedgerReport verify_ledger(const std::vector<LedgerFile>& files, const std::vector<std::uint64_t>& train_ids,
                           std::int64_t final_step, const std::string& run_status) {
  LedgerReport report;
  report.final_step = final_step;
  report.run_status = run_status;
  ParsedLedger parsed;
  for (const auto& file : files) read_ledger_file(file, parsed, report);
  report.segments = static_cast<std::int64_t>(parsed.segments.size());
  const std::vector<StepRecord> kept = replay_segments(parsed.segments, report);
  report.missing_steps = find_missing_steps(parsed.segments, kept, final_step);
  const std::unordered_set<std::uint64_t> train_set(train_ids.begin(), train_ids.end());
  std::map<std::int64_t, std::vector<const StepRecord*>> by_epoch;
  for (const auto& r : kept) by_epoch[r.epoch].push_back(&r);
  for (const auto& [epoch, records] : by_epoch) {
    const auto h = parsed.epoch_headers.find(epoch);
    const EpochHeader* header = h == parsed.epoch_headers.end() ? nullptr : &h->second;
    report.epochs.push_back(verify_epoch(epoch, records, header, train_ids, train_set));
  }
  judge_unused_samples(report);
  return report;
}

json LedgerReport::to_json() const {
  json epochs_json = json::array();
  for (const auto& e : epochs)
    epochs_json.push_back({{"epoch", e.epoch},
                           {"complete", e.complete},
                           {"steps", e.steps_recorded},
                           {"steps_expected", e.steps_expected},
                           {"used", e.used},
                           {"unread", e.unread},
                           {"train_samples", e.train_samples},
                           {"not_used", e.not_used()},
                           {"global_batch", e.global_batch},
                           {"last_of_run", e.last_of_run},
                           {"unused_note", e.unused_note},
                           {"unused_expected", !e.unused_fault},
                           {"duplicated", e.duplicated},
                           {"missing", e.missing},
                           {"unknown", e.unknown},
                           {"with_replacement", e.with_replacement},
                           {"epoch_record", e.has_header},
                           {"exact", e.exact()}});
  json gaps = json::array();
  for (const auto& [first, last] : missing_steps) gaps.push_back({first, last});
  return {{"exact", exact()},
          {"segments", segments},
          {"records", records},
          {"superseded", superseded},
          {"torn_lines", torn_lines},
          {"final_step", final_step},
          {"run_status", run_status.empty() ? json(nullptr) : json(run_status)},
          {"missing_steps", gaps},
          {"epochs", epochs_json}};
}

std::string LedgerReport::to_text() const {
  std::string out = fmt::format(
      "ledger: {}, {}, {} superseded by a restart{}\n", count_of(segments, "segment"), count_of(records, "step record"),
      superseded,
      torn_lines.empty()
          ? ""
          : fmt::format(", {} ignored", count_of(static_cast<std::int64_t>(torn_lines.size()), "torn last line")));
  for (const auto& e : epochs) out += epoch_text(e);
  if (!missing_steps.empty())
    out += fmt::format("steps never recorded: {} (NOT EXACT: the ledger lost their lines{})\n",
                       step_runs_text(missing_steps),
                       final_step > 0 ? fmt::format("; the run ended at step {}", final_step) : "");
  out += exact() ? "result: exact\n" : "result: NOT exact\n";
  return out;
}

}  // namespace shoplens
