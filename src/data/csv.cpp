#include "shoplens/data/csv.h"

namespace shoplens {

namespace {

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
    record.error = "record longer than the limit of " + std::to_string(max_bytes) + " bytes";
    record.fields = {};
    field = {};
  }
};

}  // namespace

std::vector<CsvRecord> parse_csv(std::string_view text, std::size_t max_record_bytes) {
  std::vector<CsvRecord> records;
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF && static_cast<unsigned char>(text[1]) == 0xBB &&
      static_cast<unsigned char>(text[2]) == 0xBF)
    text.remove_prefix(3);

  std::size_t i = 0, line = 1;
  while (i < text.size()) {
    RecordScan scan;
    scan.record.line = line;
    const std::size_t start = i;
    bool done = false;
    while (!done) {
      if (!scan.oversized && i - start > max_record_bytes) scan.mark_oversized(max_record_bytes);
      if (i >= text.size()) {
        if (scan.in_quotes && !scan.oversized) scan.record.error = "unterminated quoted field";
        scan.end_field();
        break;
      }
      char c = text[i];
      if (scan.in_quotes) {
        if (c == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            scan.append('"');
            i += 2;
          } else {
            scan.in_quotes = false;
            ++i;
          }
        } else {
          if (c == '\n') ++line;
          scan.append(c);
          ++i;
        }
        continue;
      }
      switch (c) {
        case '"':
          if (scan.field_length == 0 && !scan.field_was_quoted) {
            scan.in_quotes = scan.field_was_quoted = true;
          } else if (scan.record.error.empty()) {
            scan.record.error = "stray quote inside an unquoted field";
          }
          ++i;
          break;
        case ',':
          scan.end_field();
          ++i;
          break;
        case '\r':
          ++i;
          if (i < text.size() && text[i] == '\n') ++i;
          ++line;
          scan.end_field();
          done = true;
          break;
        case '\n':
          ++i;
          ++line;
          scan.end_field();
          done = true;
          break;
        default:
          if (scan.field_was_quoted && scan.record.error.empty()) scan.record.error = "text after a closing quote";
          scan.append(c);
          ++i;
      }
    }
    // Blank lines are not records.
    const CsvRecord& record = scan.record;
    bool blank = record.fields.size() == 1 && record.fields[0].empty() && record.error.empty();
    if (!blank) records.push_back(std::move(scan.record));
  }
  return records;
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
