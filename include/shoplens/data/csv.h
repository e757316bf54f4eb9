// RFC 4180 CSV: quoted fields, doubled quotes, CR/LF line ends, with the physical line number of
// every record so errors can name it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shoplens {

struct CsvRecord {
  std::size_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
  std::string error;  // non-empty when the record is malformed (e.g. unterminated quote)
};

// The longest record (a line, or several for quoted line breaks) parse_csv keeps: a longer one
// is a malformed record whose bytes are skipped, so one runaway field cannot take the memory.
constexpr std::size_t kMaxCsvRecordBytes = std::size_t{1} << 20;

// Never throws on content: malformed records carry `error`. A UTF-8 BOM is skipped.
std::vector<CsvRecord> parse_csv(std::string_view text, std::size_t max_record_bytes = kMaxCsvRecordBytes);

// Quotes a field when it contains a comma, quote, CR or LF.
std::string csv_escape(std::string_view field);
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace shoplens
