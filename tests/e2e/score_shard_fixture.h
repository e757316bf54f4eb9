// The exported model and manifest the sharded-score tests share (test_score_shard_e2e.cpp, and
// the Slurm array test in test_dist_hosts_e2e.cpp): built once per test binary. And the score
// list every score fixture starts from (test_score_stream_e2e.cpp too).
#pragma once

#include <filesystem>
#include <fstream>

namespace shoplens::testing {

// A folder holding model/ (an exported model) and rows.csv: 40 catalog images (ids img0..img39),
// then a missing file, an empty file and a row without a path (43 rows).
std::filesystem::path score_shard_fixture();

// Opens DIR/rows.csv and writes its header and `rows` rows "img<i>,<absolute path>", cycling over
// the images of the make-data catalog in DIR/catalog; the stream stays open for more rows.
std::ofstream write_catalog_rows(const std::filesystem::path& dir, int rows);

}  // namespace shoplens::testing
