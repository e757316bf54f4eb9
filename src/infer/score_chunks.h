// Internal to src/infer: the chunks of a score job (docs/SCORING.md, "Chunks, resume, exactly
// once"). A chunk file holds the predictions of --chunk-rows consecutive rows and ends with a
// stamp line: the rows it holds and a fingerprint of each block of kRowWindow rows it was scored
// from. A resumed job reuses a chunk only when its input rows still give those fingerprints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch_inference.h"
#include "shoplens/infer/evaluation.h"
#include "shoplens/infer/scorer.h"

namespace shoplens {

// What scoring measured: rows run through the model and the wall seconds they took.
struct ScoredFigures {
  std::int64_t images = 0;
  double seconds = 0;
  ScoredFigures& operator+=(const ScoredFigures& o) {
    images += o.images;
    seconds += o.seconds;
    return *this;
  }
};

// The last line of a chunk file.
struct ChunkStamp {
  std::size_t first_row = 0, rows = 0, block_rows = 0;
  std::vector<std::uint64_t> blocks;  // fingerprint of rows [first_row + k * block_rows, ...)
  // What scoring the chunk measured when it was written, so a rerun that reuses it still reports
  // the job's throughput; none in a chunk written before stamps recorded it.
  std::optional<ScoredFigures> scored;
};
std::string format_chunk_stamp(const ChunkStamp& stamp);  // one line, with its newline
// std::nullopt when `line` is not a stamp (a chunk written before stamps, or a damaged one).
std::optional<ChunkStamp> parse_chunk_stamp(std::string_view line);
// The fingerprint of rows [begin, end) of a loaded window: their numbers and identities.
std::uint64_t rows_fingerprint(const ScoreRows& rows, std::size_t begin, std::size_t end);

struct ChunkCounts {
  std::size_t reused = 0;             // on disk, every row unchanged
  std::size_t rescored = 0;           // on disk but some rows changed, or no fingerprint to verify it by
  std::size_t written = 0;            // scored in this run, rescored ones included
  ScoredFigures recorded;             // what the reused chunks measured when they were scored
  std::size_t reused_unmeasured = 0;  // reused chunks that recorded no measurement
};

// The job's throughput: this run's scoring and what its reused chunks recorded, so a rerun that
// reuses every chunk reports the job's real rate (and cost) instead of nothing.
struct JobThroughput {
  ScoredFigures this_run, recorded;
  std::size_t chunks_unmeasured = 0;  // reused chunks without a measurement (not in the figures)
  ScoredFigures total() const;
  bool measured() const;             // some rows were timed, this run or when a chunk was scored
  double images_per_second() const;  // the job's; 0 when nothing was measured
  // "measured in this run", "recorded when its chunks were scored", or both; what was left out.
  std::string source() const;
  nlohmann::json to_json() const;
};
JobThroughput job_throughput(const BatchTimings& this_run, const ChunkCounts& chunks);

// Scores every chunk that is not on disk or whose rows changed, one row window at a time; each
// chunk file is written atomically, so present means complete.
// Rows `range` of the input (a shard's, or all of them) in chunks of o.chunk_rows from its first row.
ChunkCounts score_chunks(const ScoreOptions& o, BatchInference& scorer, ScoreRows& rows, RowRange range, int batch,
                         BatchTimings& timing);

// The most distinct error reasons a report lists; the others are counted under one entry.
constexpr std::size_t kMaxErrorReasons = 64;

struct JoinedRows {
  std::size_t errors = 0;
  std::map<std::string, std::int64_t> error_reasons;  // the reason without the row's own part -> rows
};

// Joins the chunks into predictions.csv as they stream past, checking that they hold every row
// exactly once, in order; `metrics` (labelled inputs) takes each row.
JoinedRows join_chunks(const ScoreOptions& o, const std::vector<std::string>& classes, ScoreRows& rows, RowRange range,
                       EvaluationAccumulator* metrics);

// The fingerprint of the input's row count and the rows in `range` (read window by window): what a
// shard records when it starts and checks on resume.
std::uint64_t shard_fingerprint(ScoreRows& rows, RowRange range);

}  // namespace shoplens
