#include "test_util.h"

#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>

#include "shoplens/core/crash_report.h"
#include "shoplens/data/csv.h"

namespace shoplens::testing {

ScratchDir::ScratchDir(const std::string& tag) {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("shoplens-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult run_shell(const std::string& command) {
  CommandResult result;
  // Grouped, so a redirection inside `command` (e.g. 2>/dev/null) still wins for that command.
  std::string full = "{ " + command + "\n} 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

namespace {
// A test that crashes (in CI, once in hundreds of runs) leaves its stack in ctest's output.
const bool kCrashReportInstalled = install_crash_report();

std::string from_env(const char* name, const char* compiled) {
  const char* value = std::getenv(name);
  return value && *value ? value : compiled;
}
}  // namespace

std::string shoplens_bin() { return from_env("SHOPLENS_TEST_BIN", SHOPLENS_BIN); }
std::string source_dir() { return from_env("SHOPLENS_TEST_SOURCE_DIR", SHOPLENS_SOURCE_DIR); }
std::string python() { return from_env("SHOPLENS_TEST_PYTHON", SHOPLENS_PYTHON); }

std::string pyarrow_missing() {
  const std::string peer = python();
  if (!std::filesystem::exists(peer)) return peer + " not found";
  auto probe = run_shell(peer + " -c 'import pyarrow' 2>&1");
  if (probe.exit_code == 0) return "";
  return peer + " cannot import pyarrow (Debian bookworm has no python3-pyarrow; the torch2 build's venv has it): " +
         probe.output;
}

bool python_is_the_venv() {
  return std::filesystem::exists(std::filesystem::path(python()).parent_path().parent_path() / ".complete");
}

CommandResult run_shoplens(const std::string& args) { return run_shell(shoplens_bin() + " " + args); }

MeasuredRun run_shoplens_measured(const std::string& args, const std::filesystem::path& log) {
  const std::string command = shoplens_bin() + " " + args + " > " + log.string() + " 2>&1";
  MeasuredRun run;
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed: " + command);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.peak_kib = usage.ru_maxrss;
  run.output = read_text(log);
  return run;
}

int interrupt_when(const std::string& command, const std::function<bool()>& under_way, double timeout_s, int poll_ms) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed: " + command);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!under_way() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string launch_args(int nproc, const std::string& extra) {
  return "launch --nproc-per-node " + std::to_string(nproc) + " --master-port 0 --grace-seconds 20 " + extra + " -- " +
         shoplens_bin() + " ";
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json read_json(const std::filesystem::path& path) { return nlohmann::json::parse(read_text(path)); }

std::size_t ledger_steps(const std::filesystem::path& run) {
  std::size_t n = 0;
  std::error_code ec;
  if (!std::filesystem::is_directory(run / "ledger", ec)) return n;
  for (const auto& e : std::filesystem::directory_iterator(run / "ledger")) {
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) n += line.find("\"type\":\"step\"") != std::string::npos;
  }
  return n;
}

std::filesystem::path shared_fixture(const std::string& name,
                                     const std::function<std::string(const std::filesystem::path&)>& build) {
  namespace fs = std::filesystem;
  // Keyed by the binary's path and modification time: a rebuilt binary gets fresh fixtures.
  const fs::path bin = shoplens_bin();
  std::error_code ec;
  const auto stamp = fs::last_write_time(bin, ec).time_since_epoch().count();
  const std::string prefix = "shoplens-fixture-" + name + "-";
  const std::string key = std::to_string(std::hash<std::string>{}(bin.string() + "@" + std::to_string(stamp)));
  const fs::path root = fs::temp_directory_path(), dir = root / (prefix + key);
  const std::string lock_path = (root / (prefix + "lock")).string();
  const int lock = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + lock_path);
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  if (fs::exists(dir / ".complete", ec)) return dir;
  // Fixtures of other binaries may be in use by a concurrent test run: only day-old ones go.
  const auto day_ago = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0 && entry.path() != fs::path(lock_path) &&
        entry.last_write_time(ec) < day_ago)
      fs::remove_all(entry.path(), ec);
  fs::create_directories(dir);
  const std::string failed = build(dir);
  if (!failed.empty()) {
    fs::remove_all(dir, ec);
    throw std::runtime_error("fixture " + name + ": " + failed);
  }
  write_text(dir / ".complete", "");
  return dir;
}

namespace {
// Runs each `shoplens` command in turn; "" or the failing command and its output.
std::string run_steps(const std::vector<std::string>& steps) {
  for (const auto& args : steps) {
    auto r = run_shoplens(args);
    if (r.exit_code != 0) return "shoplens " + args + " -> exit " + std::to_string(r.exit_code) + "\n" + r.output;
  }
  return "";
}
}  // namespace

std::filesystem::path shared_image_data(const ImageData& data) {
  std::string range = data.size_range;
  std::replace(range.begin(), range.end(), ':', '_');
  const std::string name = "images-" + std::to_string(data.num_images) + "-" + range + "-s" +
                           std::to_string(data.seed) + "-" + std::to_string(data.storage_size) + "px-r" +
                           std::to_string(data.records_per_shard) + "-t" + std::to_string(data.threads);
  return shared_fixture(name, [&](const std::filesystem::path& dir) {
    const std::string catalog = (dir / "catalog").string();
    return run_steps({"make-data --out " + catalog + " --num-images " + std::to_string(data.num_images) +
                          " --image-size-range " + data.size_range + " --seed " + std::to_string(data.seed),
                      "prepare --input " + catalog + "/manifest.csv --out " + (dir / "shards").string() +
                          " --storage-size " + std::to_string(data.storage_size) +
                          (data.records_per_shard > 0 ? " --records-per-shard " + std::to_string(data.records_per_shard)
                                                      : std::string()) +
                          " --threads " + std::to_string(data.threads)});
  });
}

std::filesystem::path shared_text_data(const TextData& data) {
  const std::string name = "text-" + std::to_string(data.num_examples) + "-l" + std::to_string(data.max_length) + "-v" +
                           std::to_string(data.vocab_size) + "-r" + std::to_string(data.records_per_shard) + "-s" +
                           std::to_string(data.seed);
  return shared_fixture(
             name,
             [&](const std::filesystem::path& dir) {
               return run_steps(
                   {"make-data --task text --out " + (dir / "text").string() + " --num-examples " +
                    std::to_string(data.num_examples) + " --max-length " + std::to_string(data.max_length) +
                    " --vocab-size " + std::to_string(data.vocab_size) +
                    (data.records_per_shard > 0 ? " --records-per-shard " + std::to_string(data.records_per_shard)
                                                : std::string()) +
                    " --seed " + std::to_string(data.seed)});
             }) /
         "text";
}

std::string make_exported_model(const std::filesystem::path& dir, int num_images, int seed) {
  const std::string catalog = (dir / "catalog").string(), shards = (dir / "shards").string(),
                    run = (dir / "run").string();
  return run_steps({"make-data --out " + catalog + " --num-images " + std::to_string(num_images) +
                        " --image-size-range 40:60 --seed " + std::to_string(seed),
                    "prepare --input " + catalog + "/manifest.csv --out " + shards + " --storage-size 36 --threads 2",
                    "train --shards " + shards + " --out " + run +
                        " --model small_cnn --epochs 1 --batch-size 8 --threads 2 --set augment.image_size=32",
                    "export --run " + run + " --out " + (dir / "model").string()});
}

std::vector<std::string> catalog_image_paths(const std::filesystem::path& catalog) {
  const auto records = parse_csv(read_text(catalog / "manifest.csv"));
  std::size_t path_col = 0;
  for (std::size_t c = 0; c < records.at(0).fields.size(); ++c)
    if (records[0].fields[c] == "path") path_col = c;
  std::vector<std::string> paths;
  for (std::size_t r = 1; r < records.size(); ++r) paths.push_back(records[r].fields[path_col]);
  return paths;
}

}  // namespace shoplens::testing

namespace shoplens::testing {
namespace {
std::string html_unescape(std::string s) {
  const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities)
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + 1))
      s.replace(p, std::strlen(from), to);
  return s;
}

// Runs headless Chromium on `url` in a window of `size` ("W,H") with `action` (--dump-dom > file,
// --screenshot=file); throws naming the browser and its stderr when it fails.
void run_browser(const std::filesystem::path& dir, const std::string& url, const std::string& size,
                 const std::string& action) {
  const std::string browser = from_env("SHOPLENS_TEST_CHROMIUM", "chromium");
  // --no-sandbox: the suite may run as root; the page is our own file. --hide-scrollbars: a
  // screenshot shows the page, and the check measures overflow by geometry, not by scrollbars.
  const auto r =
      run_shell("timeout 120 " + browser + " --headless --no-sandbox --disable-gpu --hide-scrollbars" +
                " --user-data-dir=" + (dir / "profile").string() + " --window-size=" + size +
                " --enable-logging=stderr --v=0 " + action + " file://" + url + " 2> " + (dir / "stderr.txt").string());
  if (r.exit_code != 0)
    throw std::runtime_error("headless " + browser + " failed (exit " + std::to_string(r.exit_code) +
                             "; scripts/bootstrap.sh installs chromium): " + r.output + read_text(dir / "stderr.txt"));
}

// The whole page as one PNG: the window as tall as the page measured (capped, as browsers cap
// textures), at the width the check ran at.
std::string save_screenshot(const std::filesystem::path& html, const BrowserCheck& how, int page_height,
                            const std::filesystem::path& dir) {
  const auto folder = test_output_dir() / "screenshots";
  std::filesystem::create_directories(folder);
  const auto png = folder / (how.screenshot + "-" + std::to_string(how.width) + ".png");
  const int height = std::clamp(page_height, 200, 16000);
  run_browser(dir, std::filesystem::absolute(html).string(), std::to_string(how.width) + "," + std::to_string(height),
              "--screenshot=" + png.string());
  if (!std::filesystem::exists(png)) throw std::runtime_error("headless chromium wrote no " + png.string());
  return png.string();
}
}  // namespace

std::filesystem::path test_output_dir() {
  std::filesystem::path dir = from_env("SHOPLENS_TEST_OUTPUT_DIR", SHOPLENS_TEST_OUTPUT);
  std::filesystem::create_directories(dir);
  return dir;
}

nlohmann::json check_page_in_browser(const std::filesystem::path& html, const BrowserCheck& how) {
  ScratchDir dir("browser");
  std::string page = read_text(html);
  const auto body_end = page.rfind("</body>");
  if (body_end == std::string::npos) throw std::runtime_error(html.string() + " has no </body>");
  page.insert(body_end, "<script>\n" +
                            read_text(std::filesystem::path(source_dir()) / "tests/e2e/html_layout_check.js") +
                            "\n</script>\n");
  write_text(dir / "page.html", page);
  run_browser(dir.path(), (dir / "page.html").string(), std::to_string(how.width) + ",900",
              "--dump-dom > " + (dir / "dom.html").string());
  const std::string dom = read_text(dir / "dom.html");
  const std::string open = "<pre id=\"layout-check\">";
  const auto start = dom.rfind(open), end = dom.find("</pre>", start);
  if (start == std::string::npos || end == std::string::npos)
    throw std::runtime_error("the layout check did not run:\n" + dom);
  nlohmann::json result =
      nlohmann::json::parse(html_unescape(dom.substr(start + open.size(), end - start - open.size())));
  result["console"] = nlohmann::json::array();
  std::istringstream log(read_text(dir / "stderr.txt"));
  for (std::string line; std::getline(log, line);)
    if (line.find(":CONSOLE") != std::string::npos) result["console"].push_back(line);
  if (!how.screenshot.empty())
    result["screenshot"] = save_screenshot(html, how, result["page"]["scroll_height"].get<int>(), dir.path());
  return result;
}

}  // namespace shoplens::testing
