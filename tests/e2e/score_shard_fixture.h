// The exported model and manifest the sharded-score tests share (test_score_shard_e2e.cpp, and
// the Slurm array test in test_dist_hosts_e2e.cpp): built once per test binary.
#pragma once

#include <filesystem>

namespace shoplens::testing {

// A folder holding model/ (an exported model) and rows.csv: 40 catalog images (ids img0..img39),
// then a missing file, an empty file and a row without a path (43 rows).
std::filesystem::path score_shard_fixture();

}  // namespace shoplens::testing
