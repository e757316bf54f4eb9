// The registry's facts table: what code outside src/models may know of a model without building it.
#include <gtest/gtest.h>

#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/model_facts.h"

namespace shoplens {
namespace {

TEST(ModelFacts, EveryFactoryHasFactsAndEveryFactHasAFactoryInTheSameOrder) {
  EXPECT_EQ(registered_model_factories(), model_names());
}

TEST(ModelFacts, GemmBoundModelsAreTheTransformers) {
  for (const char* name : {"text_tiny", "text_base", "vit_tiny", "vit_base"})
    EXPECT_TRUE(gemm_bound_model(name)) << name;
  for (const char* name : {"small_cnn", "resnet18", "resnet50", "no_such_model"})
    EXPECT_FALSE(gemm_bound_model(name)) << name;
}

TEST(ModelFacts, InputKindAndParameterNaming) {
  EXPECT_TRUE(is_text_model("text_small"));
  EXPECT_FALSE(is_text_model("vit_small"));
  EXPECT_FALSE(is_text_model("text_huge"));  // unknown: not a text model
  EXPECT_STREQ(parameter_naming_name(model_facts("resnet34").naming), "torchvision");
  EXPECT_STREQ(parameter_naming_name(model_facts("vit_tiny").naming), "timm");
  EXPECT_STREQ(parameter_naming_name(model_facts("small_cnn").naming), "shoplens");
  EXPECT_EQ(model_facts("vit_base").patch_size, 16);
  EXPECT_EQ(model_facts("resnet18").patch_size, 0);
}

TEST(ModelFacts, AnUnknownNameIsAConfigErrorThatSuggestsTheNearestName) {
  try {
    model_facts("resnet19");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet18"), std::string::npos) << e.what();
  }
}

TEST(ModelFacts, HelpTextsListEachKind) {
  const std::string images = model_names_text(ModelInput::image);
  const std::string texts = model_names_text(ModelInput::tokens);
  EXPECT_NE(images.find("vit_base"), std::string::npos);
  EXPECT_EQ(images.find("text_tiny"), std::string::npos);
  EXPECT_NE(texts.find("text_tiny"), std::string::npos);
  EXPECT_EQ(texts.find("resnet18"), std::string::npos);
}

}  // namespace
}  // namespace shoplens
