// The models layer's sections of the run configuration (docs/CONFIG.md): which model and how it
// starts (model), and the text models' shape (text). Schema rows: src/core/config.cpp.
#pragma once

#include <string>
#include <vector>

#include "shoplens/core/enum_names.h"

namespace shoplens {

struct ModelConfig {
  std::string name = "small_cnn";  // see `shoplens train --help` / docs/MODELS.md (the registry checks it)
  std::string pretrained;          // .safetensors or torch.save state dict; empty = from scratch
  bool new_head = true;            // re-initialise the head when the weights' class count differs
  bool partial_load = false;       // accept weights that leave model tensors at their init
  double dropout = 0.0;            // before the head
  bool channels_last = false;
  double drop_path = 0.0;  // stochastic depth of the last block (ViTs; 0 disables)
};

enum class TextPooling { kMean, kCls };  // mean over real tokens | the first token
inline constexpr EnumName<TextPooling> kTextPoolingNames[] = {{TextPooling::kMean, "mean"}, {TextPooling::kCls, "cls"}};

// fused: LibTorch's scaled-dot-product kernel; math: the reference composition; auto: fused
// where the LibTorch version has it.
enum class AttentionKernel { kAuto, kFused, kMath };
inline constexpr EnumName<AttentionKernel> kAttentionKernelNames[] = {
    {AttentionKernel::kAuto, "auto"}, {AttentionKernel::kFused, "fused"}, {AttentionKernel::kMath, "math"}};

// Text tasks (docs/TEXT.md). The dataset's shape (vocabulary, metadata fields) is resolved from
// text_dataset.json by the commands and saved with the run, so a checkpoint rebuilds its model
// without the data.
struct TextConfig {
  int max_length = 512;          // tokens read per example (longer ones are truncated)
  bool bucket_by_length = true;  // group similar lengths into a step: less padding
  int bucket_window = 64;        // global batches sorted by length together
  TextPooling pooling = TextPooling::kMean;
  AttentionKernel attention = AttentionKernel::kAuto;
  int vocab_size = 0;  // resolved from the dataset
  std::vector<double>
      categorical_cardinalities;  // resolved: vocabulary size per categorical field (0 = missing on top)
  int numeric_fields = 0;         // resolved
};

}  // namespace shoplens
