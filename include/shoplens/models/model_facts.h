// What the rest of ShopLens may know about a model, by name, without building it (plain C++, no
// torch): the registry's facts table. Code outside src/models asks these questions here instead of
// testing a model name's prefix.
#pragma once

#include <string>
#include <vector>

namespace shoplens {

enum class ModelInput { image, tokens };

// Whose parameter names the model's state dict follows, so that weights trained elsewhere load by name.
enum class ParameterNaming { shoplens, torchvision, timm };

struct ModelFacts {
  const char* name;
  ModelInput input;
  ParameterNaming naming;
  // Its step is dominated by GEMMs (transformers): OpenMP's spinning idle threads take the cores
  // that OpenBLAS needs, so a multi-threaded run prefers OMP_WAIT_POLICY=PASSIVE.
  bool gemm_bound;
  // A ViT: the image size must be a multiple of its 16-pixel patch.
  int patch_size;  // 0: not a patch model
  // Its residual blocks take stochastic depth (model.drop_path).
  bool drop_path;
};

// Every registered model, in the order --help lists them.
const std::vector<ModelFacts>& all_model_facts();
// The facts of `name`; ConfigError naming the known models when there is no such model.
const ModelFacts& model_facts(const std::string& name);
// nullptr when there is no such model.
const ModelFacts* find_model_facts(const std::string& name);

// The registered names, in the order `--help` lists them.
std::vector<std::string> model_names();
// Models that read token batches (text_tiny, text_small, text_base). False for unknown names.
bool is_text_model(const std::string& name);
// Whether `name`'s step is GEMM-bound (ModelFacts::gemm_bound). False for unknown names.
bool gemm_bound_model(const std::string& name);
// The models that take model.drop_path, for error messages: "vit_tiny, vit_small, vit_base".
std::string drop_path_model_names();
// Image models, text models: "small_cnn, resnet18, ..." for help texts.
std::string model_names_text(ModelInput input);
// "torchvision", "timm" or "shoplens": the model card's parameter_names field.
const char* parameter_naming_name(ParameterNaming naming);

}  // namespace shoplens
