// What the training augmentation did to the samples of a batch, in words and as a picture:
// `shoplens load --preview` tiles the first images of a batch with a caption under each (the
// class, then the augmentation drawn for it), so a person can check what the model is shown.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shoplens/core/config.h"

namespace shoplens {

struct Batch;

// The random choices Augmenter::apply (train) makes for `sample_seed`, in words: the
// TrivialAugment op and its magnitude, "flip", "jitter", "erase" (each only when drawn), or
// "crop only". The same seed gives the same draws as the augmenter (the same streams).
std::string describe_augmentation(const AugmentConfig& config, std::uint64_t sample_seed);

// The first 16 images of an image batch, un-normalised, 4 per row, each above a caption strip:
// its class name, then describe_augmentation of its seed (or "eval transform"), "mixed" when the
// batch was mixed. PNG or JPEG by the file's extension. DataError for a text batch.
void write_augment_preview(const Batch& batch, const AugmentConfig& augment, bool train,
                           const std::vector<std::string>& class_names, const std::filesystem::path& file);

}  // namespace shoplens
