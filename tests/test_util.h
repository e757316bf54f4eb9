// Helpers shared by the tests: scratch folders and running the real `shoplens` binary.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shoplens::testing {

// A fresh folder under the system temp dir, removed when the object goes away.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "t");
  ~ScratchDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A fixture built once per build of the shoplens binary and shared by every test process (ctest
// runs each test in its own process, so a suite's SetUpTestSuite would otherwise rebuild it per
// test). `build` fills the folder and returns "" or what failed. Concurrent callers wait on a lock;
// a folder is used only once complete (a marker file); fixtures a day old are removed.
// Tests must only read from it. Returns the folder, or throws std::runtime_error with the failure.
std::filesystem::path shared_fixture(const std::string& name,
                                     const std::function<std::string(const std::filesystem::path&)>& build);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// The paths the tests use. Each comes from the environment when set there, so that a copy of the
// test binary runs in another folder or on another machine (the GPU kit, docs/GPU.md), and else is
// the one compiled in (tests/CMakeLists.txt):
//   SHOPLENS_TEST_BIN         the shoplens binary                            (compiled: SHOPLENS_BIN)
//   SHOPLENS_TEST_SOURCE_DIR  the source tree: configs/, scripts/, tools/    (compiled: SHOPLENS_SOURCE_DIR)
//   SHOPLENS_TEST_PYTHON      the Python peer of the fixtures and checks     (compiled: SHOPLENS_PYTHON)
std::string shoplens_bin();
std::string source_dir();
std::string python();
// Whether python() can import pyarrow: "" when it can, else why not. The torch2 build's venv pins
// pyarrow (a venv without it is a failure there); Debian's python3 has none (tests skip).
std::string pyarrow_missing();
// True when python() is a finished ShopLens venv (scripts/venv.sh marks one with .complete).
bool python_is_the_venv();

// Runs `shoplens <args>` (shoplens_bin()) through the shell.
CommandResult run_shoplens(const std::string& args);
// Runs `shoplens <args>` as a child, its output to `log`, and reads its peak RSS from wait4's
// rusage (ru_maxrss covers the child and what it waited for, so the shell in between does not hide
// the program).
struct MeasuredRun {
  int exit_code = -1;
  long peak_kib = 0;  // the child's resident high-water mark
  std::string output;
};
MeasuredRun run_shoplens_measured(const std::string& args, const std::filesystem::path& log);
CommandResult run_shell(const std::string& command);
// The arguments of `shoplens launch` for `nproc` local ranks on a free port, up to and including
// the worker's binary (shoplens_bin()): append the worker's verb and flags. `extra` goes to launch.
std::string launch_args(int nproc, const std::string& extra = "");
// Starts `command` through the shell in the background (its output discarded), waits until
// `under_way()` holds or `timeout_s` passes, checking every `poll_ms`, then sends it SIGTERM:
// a preemption. Returns its exit code, or 128 + the signal that ended it.
int interrupt_when(const std::string& command, const std::function<bool()>& under_way, double timeout_s,
                   int poll_ms = 10);

void write_text(const std::filesystem::path& path, const std::string& text);
// How often `what` stands in `text`, overlapping ones counted.
std::size_t occurrences(const std::string& text, const std::string& what);

// The data most end-to-end suites start from, built once per binary and shared by every test
// process of a run (shared_fixture); tests only read it and write their outputs elsewhere.
// `make-data` into folder/catalog and `prepare` into folder/shards:
struct ImageData {
  int num_images = 200;
  std::string size_range = "40:60";  // --image-size-range
  int seed = 8;
  int storage_size = 36;
  int records_per_shard = 0;  // 0: prepare's default
  int threads = 2;
};
std::filesystem::path shared_image_data(const ImageData& data);
// `make-data --task text` into the returned folder (its shards and text_dataset.json):
struct TextData {
  int num_examples = 200;
  int max_length = 64;
  int vocab_size = 1024;
  int records_per_shard = 0;  // 0: make-data's default
  int seed = 5;
};
std::filesystem::path shared_text_data(const TextData& data);

// A trained and exported small CNN for the scoring and serving tests: make-data -> prepare ->
// one epoch of train -> export, into dir/catalog, dir/shards, dir/run and dir/model. Returns the
// output of the step that failed, or an empty string.
std::string make_exported_model(const std::filesystem::path& dir, int num_images, int seed);
// The relative image paths of a make-data catalog's manifest.csv, in its order.
std::vector<std::string> catalog_image_paths(const std::filesystem::path& catalog);
std::string read_text(const std::filesystem::path& path);
// A JSON file's content (throws on a parse error, which the test reports).
nlohmann::json read_json(const std::filesystem::path& path);
// Step records in a training run's ledger so far (every rank's file): how far a run has come.
std::size_t ledger_steps(const std::filesystem::path& run);

// Renders an HTML report in headless Chromium (Debian's `chromium`, installed by scripts/bootstrap.sh;
// SHOPLENS_TEST_CHROMIUM overrides) with tests/e2e/html_layout_check.js injected into a copy, in a
// window `width` px wide. Returns {"charts": N, "page": {viewport_width, scroll_width,
// scroll_height}, "chart_details": [{name, x_ticks, y_ticks, series: [{name, points}], legend}],
// "problems": [...], "console": [...]}: problems are a page wider than the window (or a box of it
// that scrolls sideways), text rendered below 10 px, colour-coded cells without a colour legend,
// charts without axis labels or marked axes, texts cut off or overlapping, legends covering data
// or naming a series that drew nothing, points sitting on an axis; console holds every console
// message. With a `screenshot` name, a PNG of the whole page (the report itself, without the
// check) is kept as test_output_dir()/screenshots/<name>-<width>.png, and "screenshot" is its path.
// Throws std::runtime_error when the browser cannot run.
struct BrowserCheck {
  int width = 1280;
  std::string screenshot;  // "": none
};
nlohmann::json check_page_in_browser(const std::filesystem::path& html, const BrowserCheck& how = {});
// Where tests leave what CI keeps after the run (screenshots): SHOPLENS_TEST_OUTPUT_DIR, else the
// build's test-output folder (compiled: SHOPLENS_TEST_OUTPUT). Created on first use.
std::filesystem::path test_output_dir();

}  // namespace shoplens::testing
