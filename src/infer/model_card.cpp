#include "shoplens/infer/model_card.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/core/utf8.h"
#include "shoplens/data/manifest.h"
#include "shoplens/models/model_facts.h"

namespace shoplens {
namespace {

using json = nlohmann::json;
using CardFields = JsonFields<DataError>;

// A variant's name (the --variants and --variant value) and the dtype its card entry names.
struct VariantName {
  const char* name;
  const char* card_dtype;
};
constexpr VariantName kVariantNames[] = {{"fp32", "float32"}, {"bf16", "bfloat16"}, {"fp16", "float16"}};

const VariantName& variant_name(const std::string& variant) {
  for (const auto& v : kVariantNames)
    if (variant == v.name) return v;
  throw UsageError("weights variant '" + variant + "' is not one of fp32, bf16, fp16");
}

// The card's top level: its format and version.
void check_format(const CardFields& card) {
  if (card.text("format", true) != "shoplens-model") card.fail("format", "is not \"shoplens-model\": not a model card");
  card.integer("format_version", 1, kModelCardVersion);
}

void read_architecture(const CardFields& card, ModelCard& out) {
  const CardFields arch = card.section("architecture");
  out.architecture = arch.text("name", true);
  const ModelFacts* facts = find_model_facts(out.architecture);
  if (!facts || facts->input != ModelInput::image)
    arch.fail("name", fmt::format("'{}' is not one of the image models: {}", out.architecture,
                                  model_names_text(ModelInput::image)));
  out.num_classes = static_cast<int>(arch.integer("num_classes", 1, kCardMaxClasses));
  out.image_size = static_cast<int>(arch.integer("image_size", kCardMinImageSize, kCardMaxImageSize));
  if (facts->patch_size > 0 && out.image_size % facts->patch_size != 0)
    arch.fail("image_size", fmt::format("{} is not a multiple of {}'s patch size {}", out.image_size, out.architecture,
                                        facts->patch_size));
  out.dropout = arch.number("dropout") ? arch.number_in("dropout", 0.0, 0.99) : 0.0;
  out.channels_last = arch.flag("channels_last", false);
}

// num_classes names, each a non-empty UTF-8 string no longer than a manifest's label, none twice.
void read_class_names(const CardFields& card, ModelCard& out) {
  const json& names = card.array("class_names", 1, kCardMaxClasses);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string key = fmt::format("class_names[{}]", i);
    if (!names[i].is_string() || names[i].get_ref<const std::string&>().empty())
      card.type_error(key, "a non-empty string", names[i]);
    const std::string& name = names[i].get_ref<const std::string&>();
    if (name.size() > kMaxLabelBytes) card.fail(key, fmt::format("longer than {} bytes", kMaxLabelBytes));
    if (!is_valid_utf8(name)) card.fail(key, "not UTF-8");
    if (!seen.insert(name).second) card.fail(key, fmt::format("\"{}\" appears twice", name));
    out.class_names.push_back(name);
  }
  if (static_cast<int>(names.size()) != out.num_classes)
    card.fail("class_names",
              fmt::format("holds {} names for architecture.num_classes {}", names.size(), out.num_classes));
}

// Three finite numbers from `minimum` to `maximum`, one per RGB channel.
std::vector<double> channel_values(const CardFields& pre, const char* key, double minimum, double maximum) {
  std::vector<double> values;
  for (const json& v : pre.array(key, 3, 3)) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < minimum || v.get<double>() > maximum)
      pre.type_error(key, fmt::format("3 numbers from {} to {}", minimum, maximum), v);
    values.push_back(v.get<double>());
  }
  return values;
}

void read_preprocessing(const CardFields& card, ModelCard& out) {
  const CardFields pre = card.section("preprocessing");
  const auto crop = pre.integer("center_crop", kCardMinImageSize, kCardMaxImageSize);
  if (crop != out.image_size)
    pre.fail("center_crop", fmt::format("{} differs from architecture.image_size {}", crop, out.image_size));
  out.resize_short_side = static_cast<int>(pre.integer("resize_short_side", crop, kCardMaxResizeShortSide));
  out.mean = channel_values(pre, "mean", -1000, 1000);
  out.std = channel_values(pre, "std", 1e-6, 1000);
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// A listed file: a plain name in the folder, its size and CRC-32, and a known dtype; a weights
// file (*.safetensors) is one variant's, with that variant's dtype.
void read_file_entry(const CardFields& files, const std::string& name, ModelCard& out) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    files.fail(name, "not a file name inside the model folder");
  const CardFields entry = files.section(name.c_str());
  ModelCardFile file;
  file.bytes = static_cast<std::uint64_t>(entry.integer("bytes", 0, std::numeric_limits<std::int64_t>::max()));
  file.crc32 = static_cast<std::uint32_t>(entry.integer("crc32", 0, std::numeric_limits<std::uint32_t>::max()));
  file.dtype = entry.text("dtype", true);
  const VariantName* variant = nullptr;
  for (const auto& v : kVariantNames)
    if (name == weights_file(v.name)) variant = &v;
  if (variant && file.dtype != variant->card_dtype)
    entry.fail("dtype", fmt::format("'{}' is not {}", file.dtype, variant->card_dtype));
  if (!variant && ends_with(name, ".safetensors"))
    files.fail(name, "not the weights file of any variant (fp32, bf16, fp16)");
  bool known_dtype = false;
  for (const auto& v : kVariantNames) known_dtype = known_dtype || file.dtype == v.card_dtype;
  if (!known_dtype) entry.fail("dtype", fmt::format("'{}' is not one of float32, bfloat16, float16", file.dtype));
  if (variant) out.variants.emplace_back(variant->name);
  out.files[name] = file;
}

void read_files(const CardFields& card, ModelCard& out) {
  const CardFields files = card.section("files");
  for (const auto& [name, entry] : files.object().items()) read_file_entry(files, name, out);
  if (!out.files.count(weights_file("fp32")))
    files.fail(
        fmt::format("missing \"{}\": a model folder always holds its fp32 weights", files.name(weights_file("fp32"))));
  std::stable_partition(out.variants.begin(), out.variants.end(), [](const std::string& v) { return v == "fp32"; });
  out.weights_crc32 = static_cast<std::uint32_t>(
      card.section("fingerprint").integer("weights_crc32", 0, std::numeric_limits<std::uint32_t>::max()));
  if (out.weights_crc32 != out.files.at(weights_file("fp32")).crc32)
    card.fail("fingerprint.weights_crc32", "differs from files.model.safetensors.crc32");
}

// The reference logits: kCardVerificationRows rows of num_classes finite numbers.
void read_verification(const CardFields& card, ModelCard& out) {
  const CardFields verification = card.section("verification");
  const json& rows = verification.array("logits", kCardVerificationRows, kCardVerificationRows);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string key = fmt::format("logits[{}]", i);
    if (!rows[i].is_array() || static_cast<int>(rows[i].size()) != out.num_classes)
      verification.type_error(key, fmt::format("{} logits (one per class)", out.num_classes), rows[i]);
    std::vector<double> row;
    for (const json& v : rows[i]) {
      if (!v.is_number() || !std::isfinite(v.get<double>())) verification.type_error(key, "finite numbers", rows[i]);
      row.push_back(v.get<double>());
    }
    out.verification_logits.push_back(std::move(row));
  }
  out.tolerance =
      verification.number("tolerance") ? verification.number_in("tolerance", kCardMinTolerance, 1.0) : kFp32Tolerance;
}

}  // namespace

void check_weights_variant(const std::string& variant) { variant_name(variant); }

std::string weights_file(const std::string& variant) {
  return variant == "fp32" ? "model.safetensors" : "model." + variant + ".safetensors";
}

const char* weights_card_dtype(const std::string& variant) { return variant_name(variant).card_dtype; }

ModelCard parse_model_card(const json& card, const std::string& card_file) {
  if (!card.is_object()) throw DataError(card_file + ": not a model card (a JSON object)");
  const CardFields fields(card, card_file);
  ModelCard out;
  check_format(fields);
  read_architecture(fields, out);
  read_class_names(fields, out);
  read_preprocessing(fields, out);
  read_files(fields, out);
  read_verification(fields, out);
  return out;
}

}  // namespace shoplens
