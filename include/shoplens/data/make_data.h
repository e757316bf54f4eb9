// `shoplens make-data`: a synthetic product catalog (images, manifest.csv, classes.txt,
// corruptions.csv) or a tokenized text dataset, written into the options' out_dir with a log
// (make-data.log) and a summary (make-data.json) beside it. Each returns the summary's path.
#pragma once

#include <filesystem>

#include "shoplens/data/synth_catalog.h"
#include "shoplens/data/synth_text.h"

namespace shoplens {

std::filesystem::path make_image_catalog(const SynthOptions& options);
// UsageError for options validate_synth_text_options refuses, before anything is written.
std::filesystem::path make_text_dataset(const SynthTextOptions& options);

}  // namespace shoplens
