// Text that reaches JSON. JSON holds Unicode text only, and nlohmann::json throws when it dumps
// a string that is not valid UTF-8; user bytes (file names, CSV fields, command-line paths) are
// not always UTF-8 (Latin-1 exports, old archives). Writers of JSON files that hold user text
// escape them here, so a name never costs a run.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace shoplens {

// Well-formed UTF-8 (RFC 3629): no overlong forms, no UTF-16 surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view text);

// Each byte that is not part of a well-formed UTF-8 sequence becomes the four characters \xNN
// (upper-case hex); valid text is returned unchanged. Clearly marked rather than reversible: the
// raw bytes stay in the CSV outputs.
std::string escape_invalid_utf8(std::string_view text);

// `doc` dumped (indent as nlohmann's dump) after every string value and object key in it went
// through escape_invalid_utf8: never throws on user bytes.
std::string dump_json_escaped(const nlohmann::json& doc, int indent = -1);

}  // namespace shoplens
