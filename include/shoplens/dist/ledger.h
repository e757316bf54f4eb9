// The sample ledger: which sample ids every committed step read, per rank, so that
// `shoplens verify-ledger` can prove each training sample was used exactly once per epoch across
// crashes, restarts and world-size changes. One JSON-lines file per (segment, rank); a segment is
// one start of the job (fresh or resumed from a checkpoint at `start_step`). Steps a later
// segment redid (after its checkpoint) count once: the later segment's records replace them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace shoplens {

// The ranges a ledger's numbers must lie in: far beyond any run, small enough that no count or
// step arithmetic overflows. A value outside is damage, named by file:line and key.
constexpr std::int64_t kMaxLedgerStep = std::int64_t{1} << 40;
constexpr std::int64_t kMaxLedgerEpoch = 1000000000;

class LedgerWriter {
 public:
  // Appends to RUN/ledger/<segment>.rank-<rank>.jsonl; each record is one write() of a whole line,
  // so a killed process leaves at most a torn last line (which the verifier reports and ignores).
  LedgerWriter(const std::filesystem::path& run_dir, const std::string& segment, int rank, int world_size,
               std::int64_t start_step);
  ~LedgerWriter();
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;

  // Rank 0, at the start of every epoch (again after a resume): what the epoch is to read.
  void epoch(std::int64_t epoch, std::int64_t steps, std::int64_t global_batch,
             const std::vector<std::uint64_t>& unread, bool with_replacement);
  void step(std::int64_t epoch, std::int64_t step, const std::vector<std::uint64_t>& ids);

 private:
  void append(const nlohmann::json& record);
  std::filesystem::path path_;
  int fd_ = -1;
};

struct LedgerEpochReport {
  std::int64_t epoch = 0;
  std::int64_t steps_expected = 0;
  std::int64_t steps_recorded = 0;
  bool complete = false;
  std::int64_t used = 0;           // distinct ids read
  std::int64_t unread = 0;         // the order's tail short of a whole global batch (epoch record)
  std::int64_t global_batch = 0;   // from the epoch record (0: none)
  std::int64_t train_samples = 0;  // the training split's size
  bool last_of_run = false;        // the last epoch of a run that finished (summary.json)
  // Why training samples went unread in this epoch and whether that is expected ("" when all were
  // read or the sampler draws with replacement); `unused_fault` makes the epoch not exact.
  std::string unused_note;
  bool unused_fault = false;
  std::vector<std::uint64_t> duplicated;  // read more than once
  std::vector<std::uint64_t> missing;     // neither read nor in the tail (complete epochs only)
  std::vector<std::uint64_t> unknown;     // not in the training split
  bool with_replacement = false;
  bool has_header = true;  // rank 0's epoch record was found (the expected steps and unread ids)
  bool exact() const { return has_header && !unused_fault && duplicated.empty() && missing.empty() && unknown.empty(); }
  std::int64_t not_used() const { return train_samples > used ? train_samples - used : 0; }
};

struct LedgerReport {
  std::vector<LedgerEpochReport> epochs;
  std::int64_t segments = 0;
  std::int64_t records = 0;
  std::int64_t superseded = 0;          // step records of a segment that a later one redid
  std::vector<std::string> torn_lines;  // "file:line" of incomplete last lines (a killed writer)
  std::int64_t final_step = 0;          // the step the run ended at (summary.json); 0: not known
  // How the run ended (summary.json's status: completed, max_steps, early_stopped); "": the run
  // has no summary (still running, or killed).
  std::string run_status;
  // [first, last] runs of steps, from the first segment's start to the last recorded step (or
  // final_step), that no record covers: a gap is never exact, whatever the epochs say.
  std::vector<std::pair<std::int64_t, std::int64_t>> missing_steps;
  bool exact() const;
  nlohmann::json to_json() const;
  std::string to_text() const;
};

struct LedgerFile {
  std::string name;
  std::string content;
};

// Reads every ledger file of the run directory. IoError when there is none.
std::vector<LedgerFile> read_ledger_files(const std::filesystem::path& run_dir);
// `train_ids`: the training split's sample ids (each once); `final_step`: the step the run ended
// at, when known (0: not known), so that a lost tail is a gap too; `run_status`: how it ended
// (summary.json's status; "": not finished), which says whether unread samples are expected. DataError naming file:line
// for a record that is not valid JSON before the last line, a field missing, of the wrong type or out of range
// (kMaxLedgerStep, kMaxLedgerEpoch), or a step recorded twice in one segment.
LedgerReport verify_ledger(const std::vector<LedgerFile>& files, const std::vector<std::uint64_t>& train_ids,
                           std::int64_t final_step = 0, const std::string& run_status = "");

}  // namespace shoplens
