#include "shoplens/data/csv.h"

namespace shoplens {

std::vector<CsvRecord> parse_csv(std::string_view text, std::size_t max_record_bytes) {
  std::vector<CsvRecord> records;
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF && static_cast<unsigned char>(text[1]) == 0xBB &&
      static_cast<unsigned char>(text[2]) == 0xBF)
    text.remove_prefix(3);

  std::size_t i = 0, line = 1;
  while (i < text.size()) {
    CsvRecord record;
    record.line = line;
    std::string field;
    bool in_quotes = false, field_was_quoted = false, done = false;
    while (!done) {
      if (i >= text.size()) {
        if (in_quotes) record.error = "unterminated quoted field";
        record.fields.push_back(std::move(field));
        break;
      }
      char c = text[i];
      if (in_quotes) {
        if (c == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
          } else {
            in_quotes = false;
            ++i;
          }
        } else {
          if (c == '\n') ++line;
          field += c;
          ++i;
        }
        continue;
      }
      switch (c) {
        case '"':
          if (field.empty() && !field_was_quoted) {
            in_quotes = field_was_quoted = true;
          } else if (record.error.empty()) {
            record.error = "stray quote inside an unquoted field";
          }
          ++i;
          break;
        case ',':
          record.fields.push_back(std::move(field));
          field.clear();
          field_was_quoted = false;
          ++i;
          break;
        case '\r':
          ++i;
          if (i < text.size() && text[i] == '\n') ++i;
          ++line;
          record.fields.push_back(std::move(field));
          done = true;
          break;
        case '\n':
          ++i;
          ++line;
          record.fields.push_back(std::move(field));
          done = true;
          break;
        default:
          if (field_was_quoted && record.error.empty()) record.error = "text after a closing quote";
          field += c;
          ++i;
      }
    }
    // Blank lines are not records.
    bool blank = record.fields.size() == 1 && record.fields[0].empty() && record.error.empty();
    if (!blank) records.push_back(std::move(record));
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
