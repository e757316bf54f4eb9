// The model table: name -> factory, in the order --help lists them.
#include <functional>

#include <torch/torch.h>

#include "models_internal.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/models/model_facts.h"

namespace shoplens {
namespace {

// The factories; what is known of each model without building it is in model_facts.cpp.
struct Entry {
  const char* name;
  std::function<std::shared_ptr<Classifier>(const ModelSpec&)> make;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = {
      {"small_cnn", detail::make_small_cnn},
      {"resnet18", [](const ModelSpec& s) { return detail::make_resnet(s, 18); }},
      {"resnet34", [](const ModelSpec& s) { return detail::make_resnet(s, 34); }},
      {"resnet50", [](const ModelSpec& s) { return detail::make_resnet(s, 50); }},
      {"vit_tiny", [](const ModelSpec& s) { return detail::make_vit(s, 192, 3); }},
      {"vit_small", [](const ModelSpec& s) { return detail::make_vit(s, 384, 6); }},
      {"vit_base", [](const ModelSpec& s) { return detail::make_vit(s, 768, 12); }},
      {"text_tiny", [](const ModelSpec& s) { return detail::make_text_encoder(s, 128, 2, 4); }},
      {"text_small", [](const ModelSpec& s) { return detail::make_text_encoder(s, 256, 4, 4); }},
      {"text_base", [](const ModelSpec& s) { return detail::make_text_encoder(s, 512, 8, 8); }},
  };
  return entries;
}

}  // namespace

std::vector<std::string> registered_model_factories() {
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
  spec.drop_path = config.model.drop_path;
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
  const ModelFacts& facts = model_facts(spec.name);  // ConfigError naming the known models
  const Entry* entry = nullptr;
  for (const auto& e : table())
    if (spec.name == e.name) entry = &e;
  if (!entry) throw ConfigError("model '" + spec.name + "' has facts but no factory (src/models/registry_torch.cpp)");
  detail::check_num_classes(spec.num_classes);
  if (!(spec.dropout >= 0.0 && spec.dropout < 1.0))
    throw ConfigError("model.dropout must be in [0, 1), got " + std::to_string(spec.dropout));
  if (!(spec.drop_path >= 0.0 && spec.drop_path <= 1.0))
    throw ConfigError("model.drop_path must be in [0, 1], got " + std::to_string(spec.drop_path));
  if (spec.drop_path > 0 && !facts.drop_path)
    throw ConfigError("model.drop_path=" + c10::str(spec.drop_path) + ": model " + spec.name +
                      " has no blocks that take stochastic depth; set it to 0 or use one of " +
                      drop_path_model_names());
  if (facts.input == ModelInput::image && spec.vocab_size > 0)
    throw ConfigError(spec.name + " is an image model but the data is text: choose one of " +
                      model_names_text(ModelInput::tokens));
  // A ViT's position embedding has one entry per patch, so the size must be a multiple of it.
  if (facts.patch_size > 0 && (spec.image_size < facts.patch_size || spec.image_size % facts.patch_size != 0))
    throw ConfigError(spec.name + " needs model.image_size to be a positive multiple of " +
                      std::to_string(facts.patch_size) + " (the patch size), got " + std::to_string(spec.image_size));
  return entry->make(spec);
}

std::int64_t tensor_bytes(const std::vector<at::Tensor>& tensors) {
  std::int64_t bytes = 0;
  for (const auto& t : tensors) bytes += t.numel() * static_cast<std::int64_t>(t.element_size());
  return bytes;
}

}  // namespace shoplens
