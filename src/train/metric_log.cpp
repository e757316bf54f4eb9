#include "shoplens/train/metric_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/csv.h"
#include "shoplens/train/tensorboard.h"

namespace shoplens {
namespace {

const std::vector<std::string>& phases() {
  static const std::vector<std::string> kPhases{"train", "val", "test"};
  return kPhases;
}

// CSV spelling of a value: shortest round-trip decimal, and nan/inf/-inf as pandas reads them.
std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

// TensorBoard stores float32; out of its range is an infinity (a plain cast would be undefined).
float to_float(double v) {
  if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
  if (v > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
  if (v < -std::numeric_limits<float>::max()) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(v);
}

nlohmann::ordered_json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;  // JSON has no NaN or Infinity
  return v;
}

// One write per record: a process crash then loses at most that record, never half of an
// earlier one.
void write_all(int fd, const std::string& data, const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw IoError("cannot write '" + path.string() + "': " + (n < 0 ? std::strerror(errno) : "no progress"));
    done += static_cast<std::size_t>(n);
  }
}

int open_append(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("cannot open '" + path.string() + "' for appending: " + std::strerror(errno));
  return fd;
}

// The complete lines of `content`; a last line without its newline is what a crash mid-write
// leaves, and is dropped with a warning.
std::vector<std::string_view> complete_lines(std::string_view content, const std::filesystem::path& path) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < content.size()) {
    std::size_t end = content.find('\n', start);
    if (end == std::string_view::npos) {
      spdlog::warn("'{}': ignoring a torn last line ({} bytes without a newline), left by an interrupted run",
                   path.string(), content.size() - start);
      break;
    }
    lines.push_back(content.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Cuts a torn last line off so that appending starts on a fresh line.
void cut_torn_tail(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0) return;
  {
    std::ifstream in(path, std::ios::binary);
    char last = 0;
    if (in.seekg(-1, std::ios::end) && in.get(last) && last == '\n') return;  // the usual case: read one byte
  }
  const std::string content = read_file(path);
  if (content.empty() || content.back() == '\n') return;
  const std::size_t keep = content.rfind('\n') == std::string::npos ? 0 : content.rfind('\n') + 1;
  spdlog::warn("'{}': cutting off a torn last line ({} bytes without a newline), left by an interrupted run",
               path.string(), content.size() - keep);
  std::filesystem::resize_file(path, keep, ec);
  if (ec) throw IoError("cannot truncate '" + path.string() + "': " + ec.message());
}

std::optional<std::int64_t> parse_step(std::string_view text) {
  std::int64_t v = 0;
  auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (err != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> jsonl_step(std::string_view line) {
  auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("step") || !doc["step"].is_number_integer()) return std::nullopt;
  return doc["step"].get<std::int64_t>();
}

std::optional<std::int64_t> csv_step(std::string_view line) {
  auto records = parse_csv(line);
  if (records.size() != 1 || !records[0].error.empty() || records[0].fields.size() != 5) return std::nullopt;
  return parse_step(records[0].fields[0]);
}

struct Truncated {
  std::string content;
  std::size_t kept = 0, dropped = 0;
};

// Keeps the lines whose step is <= `step`, verbatim. `header`, when given, is kept first.
template <typename StepOf>
Truncated truncate_lines(const std::filesystem::path& path, std::int64_t step, const std::string& header,
                         StepOf step_of) {
  Truncated out;
  if (!header.empty()) out.content = header + "\n";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  const std::string content = read_file(path);
  std::size_t line_no = 0;
  for (std::string_view line : complete_lines(content, path)) {
    ++line_no;
    if (line.empty() || (!header.empty() && line == header)) continue;
    auto line_step = step_of(line);
    if (!line_step) {
      spdlog::warn("'{}' line {}: unreadable record dropped", path.string(), line_no);
      continue;
    }
    if (*line_step > step) {
      ++out.dropped;
      continue;
    }
    out.content.append(line.data(), line.size()).push_back('\n');
    ++out.kept;
  }
  return out;
}

}  // namespace

MetricLog::MetricLog(std::filesystem::path run_dir, bool tensorboard)
    : run_dir_(std::move(run_dir)), jsonl_path_(run_dir_ / kJsonlName), csv_path_(run_dir_ / kCsvName) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir_, ec);
  if (ec) throw IoError("cannot create run directory '" + run_dir_.string() + "': " + ec.message());
  cut_torn_tail(jsonl_path_);
  cut_torn_tail(csv_path_);
  if (std::filesystem::exists(csv_path_, ec) && std::filesystem::file_size(csv_path_, ec) > 0) {
    std::ifstream in(csv_path_);
    std::string first;
    std::getline(in, first);
    if (first != kCsvHeader)
      throw DataError("'" + csv_path_.string() + "' has the columns '" + first + "', expected '" + kCsvHeader +
                      "'; move it away or use another run directory");
  }
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir_);
  open_files();
}

MetricLog::~MetricLog() { close_files(); }

void MetricLog::open_files() {
  try {
    jsonl_fd_ = open_append(jsonl_path_);
    csv_fd_ = open_append(csv_path_);
    struct stat st {};
    if (::fstat(csv_fd_, &st) == 0 && st.st_size == 0) write_all(csv_fd_, std::string(kCsvHeader) + "\n", csv_path_);
  } catch (...) {
    close_files();  // the destructor does not run when the constructor throws
    throw;
  }
}

void MetricLog::close_files() {
  if (jsonl_fd_ >= 0) ::close(jsonl_fd_);
  if (csv_fd_ >= 0) ::close(csv_fd_);
  jsonl_fd_ = csv_fd_ = -1;
}

void MetricLog::record(std::int64_t step, double epoch, const std::string& phase,
                       const std::vector<std::pair<std::string, double>>& values) {
  if (std::find(phases().begin(), phases().end(), phase) == phases().end())
    throw DataError("unknown metric phase '" + phase + "'" + did_you_mean(phase, phases()) +
                    "; known: " + join(phases(), ", "));
  std::set<std::string> seen;
  for (const auto& [name, value] : values) {
    if (name.empty()) throw DataError("a metric name is empty");
    if (std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      throw DataError("metric name '" + name + "' has a control character");
    if (name == "step" || name == "epoch" || name == "phase")
      throw DataError("metric name '" + name + "' is reserved for the record's own field");
    if (!seen.insert(name).second) throw DataError("metric '" + name + "' appears twice in one record");
  }

  nlohmann::ordered_json doc;
  doc["step"] = step;
  doc["epoch"] = json_number(epoch);
  doc["phase"] = phase;
  std::string csv;
  const std::string step_text = std::to_string(step), epoch_text = format_number(epoch);
  for (const auto& [name, value] : values) {
    doc[name] = json_number(value);
    csv += csv_line({step_text, epoch_text, phase, name, format_number(value)}) + "\n";
  }
  write_all(jsonl_fd_, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", jsonl_path_);
  write_all(csv_fd_, csv, csv_path_);

  if (tensorboard_) {
    for (const auto& [name, value] : values) tensorboard_->add_scalar(phase + "/" + name, to_float(value), step);
    tensorboard_->flush();
  }
}

void MetricLog::truncate_after(std::int64_t step) {
  close_files();
  try {
    auto jsonl = truncate_lines(jsonl_path_, step, "", jsonl_step);
    auto csv = truncate_lines(csv_path_, step, kCsvHeader, csv_step);
    write_file_atomic(jsonl_path_, jsonl.content);
    write_file_atomic(csv_path_, csv.content);
    // Said only when records went: a fresh run over an empty log has nothing to report.
    if (jsonl.dropped > 0 && step < 0)
      spdlog::info("metric log: {} of an earlier run in this folder dropped (a fresh run starts it anew)",
                   count_of(jsonl.dropped, "record"));
    else if (jsonl.dropped > 0)
      spdlog::info("metric log truncated after step {}: kept {}, dropped {} later {}", step,
                   count_of(jsonl.kept, "record"), jsonl.dropped, noun_for(jsonl.dropped, "one"));
  } catch (...) {
    open_files();
    throw;
  }
  open_files();
  if (tensorboard_ && step < std::numeric_limits<std::int64_t>::max()) {
    tensorboard_->add_session_start(step + 1);
    tensorboard_->flush();
  }
}

}  // namespace shoplens
