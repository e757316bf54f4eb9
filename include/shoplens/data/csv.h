// RFC 4180 CSV: quoted fields, doubled quotes, CR/LF line ends, with the physical line number of
// every record so errors can name it.
#pragma once

#include <cstddef>
#include <istream>
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

// The records parse_csv gives for a whole stream (the same fields, errors and line numbers), read
// a block at a time. It holds at most one record's bytes (up to max_record_bytes) plus one block:
// a longer record is skipped as it streams past, so a manifest of any size with a runaway field
// costs no more memory than its kept records. A read error throws DataError naming `source`.
class CsvStreamReader {
 public:
  explicit CsvStreamReader(std::istream& in, std::string source, std::size_t max_record_bytes = kMaxCsvRecordBytes,
                           std::size_t block_bytes = std::size_t{1} << 16);
  // The next records in order; empty at the end of the stream.
  std::vector<CsvRecord> next();
  // The most bytes of the stream held at once.
  std::size_t peak_buffered_bytes() const { return peak_buffered_; }

 private:
  void fill();
  void scan();
  std::vector<CsvRecord> take(std::size_t end, std::size_t lines);
  void drop(std::size_t end, std::size_t lines);
  CsvRecord skip_oversized();

  std::istream& in_;
  std::string source_;
  std::size_t max_record_, block_;
  std::string buffer_;                                // starts at a record's first byte
  std::size_t scanned_ = 0;                           // bytes of buffer_ the boundary scanner has seen
  std::size_t boundary_ = 0, lines_to_boundary_ = 0;  // the last record end seen, and the lines before it
  std::size_t lines_scanned_ = 0;                     // line ends among the scanned bytes (as parse_csv counts them)
  std::size_t line_ = 1;                              // the physical line buffer_ starts on
  std::size_t peak_buffered_ = 0;
  bool in_quotes_ = false, field_start_ = true, eof_ = false, first_block_ = true;
  bool first_boundary_only_ = false;  // skipping an oversized record: stop at its end
};

// Quotes a field when it contains a comma, quote, CR or LF.
std::string csv_escape(std::string_view field);
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace shoplens
