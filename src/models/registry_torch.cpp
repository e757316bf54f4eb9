// The model table: name -> factory, in the order --help lists them.
#include <functional>

#include <torch/torch.h>

#include "models_internal.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

struct Entry {
  const char* name;
  std::function<std::shared_ptr<Classifier>(const ModelSpec&)> make;
  bool is_vit;
  bool is_text = false;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = {
      {"small_cnn", detail::make_small_cnn, false},
      {"resnet18", [](const ModelSpec& s) { return detail::make_resnet(s, 18); }, false},
      {"resnet34", [](const ModelSpec& s) { return detail::make_resnet(s, 34); }, false},
      {"resnet50", [](const ModelSpec& s) { return detail::make_resnet(s, 50); }, false},
      {"vit_tiny", [](const ModelSpec& s) { return detail::make_vit(s, 192, 3); }, true},
      {"vit_small", [](const ModelSpec& s) { return detail::make_vit(s, 384, 6); }, true},
      {"vit_base", [](const ModelSpec& s) { return detail::make_vit(s, 768, 12); }, true},
      {"text_tiny", [](const ModelSpec& s) { return detail::make_text_encoder(s, 128, 2, 4); }, false, true},
      {"text_small", [](const ModelSpec& s) { return detail::make_text_encoder(s, 256, 4, 4); }, false, true},
      {"text_base", [](const ModelSpec& s) { return detail::make_text_encoder(s, 512, 8, 8); }, false, true},
  };
  return entries;
}

}  // namespace

bool is_text_model(const std::string& name) {
  for (const auto& e : table())
    if (name == e.name) return e.is_text;
  return false;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& e : table()) names.emplace_back(e.name);
  return names;
}

ModelSpec model_spec_from_config(const Config& config, int num_classes) {
  ModelSpec spec;
  spec.name = config.model.name;
  spec.num_classes = num_classes;
  spec.image_size = config.augment.image_size;
  spec.dropout = config.model.dropout;
  spec.channels_last = config.model.channels_last;
  spec.vocab_size = config.text.vocab_size;
  spec.max_length = config.text.max_length;
  for (double c : config.text.categorical_cardinalities) spec.categorical_cardinalities.push_back(static_cast<int>(c));
  spec.numeric_fields = config.text.numeric_fields;
  spec.pooling = config.text.pooling;
  spec.attention = config.text.attention;
  return spec;
}

std::shared_ptr<Classifier> make_model(const ModelSpec& spec) {
  const Entry* entry = nullptr;
  for (const auto& e : table())
    if (spec.name == e.name) entry = &e;
  if (!entry)
    throw ConfigError("unknown model '" + spec.name + "'" + did_you_mean(spec.name, model_names()) +
                      "; known: " + join(model_names(), ", "));
  detail::check_num_classes(spec.num_classes);
  if (!(spec.dropout >= 0.0 && spec.dropout < 1.0))
    throw ConfigError("model.dropout must be in [0, 1), got " + std::to_string(spec.dropout));
  // A ViT's position embedding has one entry per 16x16 patch, so the size must be a multiple.
  if (!entry->is_text && spec.vocab_size > 0)
    throw ConfigError(spec.name + " is an image model but the data is text: choose text_tiny, text_small or text_base");
  if (entry->is_vit && (spec.image_size < 16 || spec.image_size % 16 != 0))
    throw ConfigError(spec.name + " needs model.image_size to be a positive multiple of 16 (the patch size), got " +
                      std::to_string(spec.image_size));
  return entry->make(spec);
}

}  // namespace shoplens
