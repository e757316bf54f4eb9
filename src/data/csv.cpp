#include "shoplens/data/csv.h"

#include "shoplens/core/errors.h"

namespace shoplens {

namespace {

std::string oversized_error(std::size_t max_bytes) {
  return "record longer than the limit of " + std::to_string(max_bytes) + " bytes";
}

// One record's scanner state. Past `max_bytes` the record keeps scanning to its end (quotes and
// line numbers still count) but stores nothing more.
struct RecordScan {
  CsvRecord record;
  std::string field;
  std::size_t field_length = 0;  // also counts what an oversized record no longer stores
  bool in_quotes = false, field_was_quoted = false, oversized = false;

  void append(char c) {
    ++field_length;
    if (!oversized) field += c;
  }
  void end_field() {
    if (!oversized) record.fields.push_back(std::move(field));
    field.clear();
    field_length = 0;
    field_was_quoted = false;
  }
  void mark_oversized(std::size_t max_bytes) {
    oversized = true;
    record.error = oversized_error(max_bytes);
    record.fields = {};
    field = {};
  }
};

bool starts_with_bom(std::string_view text) {
  return text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF &&
         static_cast<unsigned char>(text[1]) == 0xBB && static_cast<unsigned char>(text[2]) == 0xBF;
}

// One byte inside a quoted field at text[i]; advances i (and line at a line break).
void scan_quoted(std::string_view text, std::size_t& i, std::size_t& line, RecordScan& scan) {
  const char c = text[i];
  if (c == '"') {
    if (i + 1 < text.size() && text[i + 1] == '"') {
      scan.append('"');
      i += 2;
      return;
    }
    scan.in_quotes = false;
  } else {
    if (c == '\n') ++line;
    scan.append(c);
  }
  ++i;
}

// One byte outside quotes at text[i]; advances i (and line); true when it ended the record.
bool scan_unquoted(std::string_view text, std::size_t& i, std::size_t& line, RecordScan& scan) {
  const char c = text[i++];
  switch (c) {
    case '"':
      if (scan.field_length == 0 && !scan.field_was_quoted)
        scan.in_quotes = scan.field_was_quoted = true;
      else if (scan.record.error.empty())
        scan.record.error = "stray quote inside an unquoted field";
      return false;
    case ',':
      scan.end_field();
      return false;
    case '\r':
    case '\n':
      if (c == '\r' && i < text.size() && text[i] == '\n') ++i;
      ++line;
      scan.end_field();
      return true;
    default:
      if (scan.field_was_quoted && scan.record.error.empty()) scan.record.error = "text after a closing quote";
      scan.append(c);
      return false;
  }
}

// The record that starts at text[i]; leaves i after it.
CsvRecord scan_record(std::string_view text, std::size_t& i, std::size_t& line, std::size_t max_record_bytes) {
  RecordScan scan;
  scan.record.line = line;
  const std::size_t start = i;
  for (;;) {
    if (!scan.oversized && i - start > max_record_bytes) scan.mark_oversized(max_record_bytes);
    if (i >= text.size()) {
      if (scan.in_quotes && !scan.oversized) scan.record.error = "unterminated quoted field";
      scan.end_field();
      return std::move(scan.record);
    }
    if (scan.in_quotes)
      scan_quoted(text, i, line, scan);
    else if (scan_unquoted(text, i, line, scan))
      return std::move(scan.record);
  }
}

// The records of `text`, whose first byte is on physical line `first_line`.
std::vector<CsvRecord> parse_csv_from(std::string_view text, std::size_t max_record_bytes, std::size_t first_line) {
  std::vector<CsvRecord> records;
  std::size_t i = 0, line = first_line;
  while (i < text.size()) {
    CsvRecord record = scan_record(text, i, line, max_record_bytes);
    // Blank lines are not records.
    const bool blank = record.fields.size() == 1 && record.fields[0].empty() && record.error.empty();
    if (!blank) records.push_back(std::move(record));
  }
  return records;
}

}  // namespace

std::vector<CsvRecord> parse_csv(std::string_view text, std::size_t max_record_bytes) {
  if (starts_with_bom(text)) text.remove_prefix(3);
  return parse_csv_from(text, max_record_bytes, 1);
}

CsvStreamReader::CsvStreamReader(std::istream& in, std::string source, std::size_t max_record_bytes,
                                 std::size_t block_bytes)
    : in_(in),
      source_(std::move(source)),
      max_record_(max_record_bytes),
      block_(std::max<std::size_t>(1, block_bytes)) {}

void CsvStreamReader::fill() {
  do {
    const std::size_t old_size = buffer_.size();
    buffer_.resize(old_size + block_);
    in_.read(&buffer_[old_size], static_cast<std::streamsize>(block_));
    const auto got = static_cast<std::size_t>(in_.gcount());
    buffer_.resize(old_size + got);
    if (in_.bad()) throw DataError(source_ + ": read error after " + std::to_string(line_) + " lines");
    if (got < block_) eof_ = true;
  } while (first_block_ && buffer_.size() < 3 && !eof_);  // a BOM is whole before anything is scanned
  if (first_block_) {
    first_block_ = false;
    if (starts_with_bom(buffer_)) buffer_.erase(0, 3);
  }
  peak_buffered_ = std::max(peak_buffered_, buffer_.capacity());
}

// parse_csv's record ends, found without building records: a line end outside quotes (CR, LF or
// CRLF), where quotes open only at a field's first byte and "" inside quotes is a quote.
void CsvStreamReader::scan() {
  const std::size_t size = buffer_.size();
  while (scanned_ < size) {
    const char c = buffer_[scanned_];
    const bool last = scanned_ + 1 >= size;
    if (in_quotes_) {
      if (c == '"') {
        if (last && !eof_) return;  // "" or a closing quote: the next byte decides
        if (!last && buffer_[scanned_ + 1] == '"') {
          scanned_ += 2;
          continue;
        }
        in_quotes_ = false;
      } else if (c == '\n') {
        ++lines_scanned_;
      }
      ++scanned_;
      continue;
    }
    if (c == '\r' && last && !eof_) return;  // CR or CRLF: the next byte decides
    if (c == '\r' && !last && buffer_[scanned_ + 1] == '\n') ++scanned_;
    if (c == '\r' || c == '\n') {
      ++lines_scanned_;
      boundary_ = scanned_ + 1;
      lines_to_boundary_ = lines_scanned_;
    }
    if (c == '"' && field_start_) in_quotes_ = true;
    field_start_ = c == ',' || c == '\r' || c == '\n';
    ++scanned_;
    if (boundary_ > 0 && first_boundary_only_) return;
  }
}

void CsvStreamReader::drop(std::size_t end, std::size_t lines) {
  buffer_.erase(0, end);
  scanned_ -= end;
  lines_scanned_ -= lines;
  line_ += lines;
  boundary_ = lines_to_boundary_ = 0;
}

std::vector<CsvRecord> CsvStreamReader::take(std::size_t end, std::size_t lines) {
  std::vector<CsvRecord> records = parse_csv_from(std::string_view(buffer_).substr(0, end), max_record_, line_);
  drop(end, lines);
  return records;
}

// A record longer than the limit, read to its end without keeping it: parse_csv's error record.
CsvRecord CsvStreamReader::skip_oversized() {
  CsvRecord record;
  record.line = line_;
  record.error = oversized_error(max_record_);
  first_boundary_only_ = true;  // the records after it are parsed as usual
  for (;;) {
    scan();
    if (boundary_ > 0) {
      drop(boundary_, lines_to_boundary_);
      first_boundary_only_ = false;
      return record;
    }
    const bool end_of_stream = eof_;
    drop(scanned_, lines_scanned_);  // what the scanner has seen of this record is not kept
    if (end_of_stream) {
      first_boundary_only_ = false;
      return record;
    }
    fill();
  }
}

std::vector<CsvRecord> CsvStreamReader::next() {
  for (;;) {
    if (boundary_ > 0) {
      auto records = take(boundary_, lines_to_boundary_);
      if (!records.empty()) return records;
      continue;
    }
    if (eof_ && scanned_ == buffer_.size()) {
      if (buffer_.empty()) return {};
      auto records = take(buffer_.size(), lines_scanned_);
      if (!records.empty()) return records;
      continue;
    }
    if (scanned_ > max_record_) return {skip_oversized()};
    fill();
    scan();
  }
}

std::string csv_escape(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += csv_escape(fields[i]);
  }
  return out;
}

}  // namespace shoplens
