// The facts table. Its names and order must match the factory table in registry_torch.cpp (a unit
// test checks both directions).
#include "shoplens/models/model_facts.h"

#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/enum_names.h"

namespace shoplens {

const std::vector<ModelFacts>& all_model_facts() {
  using I = ModelInput;
  using N = ParameterNaming;
  static const std::vector<ModelFacts> facts = {
      {"small_cnn", I::image, N::shoplens, false, 0, false},   {"resnet18", I::image, N::torchvision, false, 0, false},
      {"resnet34", I::image, N::torchvision, false, 0, false}, {"resnet50", I::image, N::torchvision, false, 0, false},
      {"vit_tiny", I::image, N::timm, true, 16, true},         {"vit_small", I::image, N::timm, true, 16, true},
      {"vit_base", I::image, N::timm, true, 16, true},         {"text_tiny", I::tokens, N::shoplens, true, 0, false},
      {"text_small", I::tokens, N::shoplens, true, 0, false},  {"text_base", I::tokens, N::shoplens, true, 0, false},
  };
  return facts;
}

const ModelFacts* find_model_facts(const std::string& name) {
  for (const auto& f : all_model_facts())
    if (name == f.name) return &f;
  return nullptr;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& f : all_model_facts()) names.emplace_back(f.name);
  return names;
}

const ModelFacts& model_facts(const std::string& name) {
  if (const ModelFacts* f = find_model_facts(name)) return *f;
  throw ConfigError("unknown model '" + name + "'" + did_you_mean(name, model_names()) +
                    "; known: " + join(model_names(), ", "));
}

bool is_text_model(const std::string& name) {
  const ModelFacts* f = find_model_facts(name);
  return f && f->input == ModelInput::tokens;
}

bool gemm_bound_model(const std::string& name) {
  const ModelFacts* f = find_model_facts(name);
  return f && f->gemm_bound;
}

std::string drop_path_model_names() {
  std::vector<std::string> names;
  for (const auto& f : all_model_facts())
    if (f.drop_path) names.emplace_back(f.name);
  return join(names, ", ");
}

std::string model_names_text(ModelInput input) {
  std::vector<std::string> names;
  for (const auto& f : all_model_facts())
    if (f.input == input) names.emplace_back(f.name);
  return join(names, ", ");
}

const char* parameter_naming_name(ParameterNaming naming) {
  static constexpr EnumName<ParameterNaming> kNames[] = {{ParameterNaming::torchvision, "torchvision"},
                                                         {ParameterNaming::timm, "timm"},
                                                         {ParameterNaming::shoplens, "shoplens"}};
  return name_in(kNames, naming, "shoplens");
}

}  // namespace shoplens
