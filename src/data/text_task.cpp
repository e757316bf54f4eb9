#include "shoplens/data/text_task.h"

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"

namespace shoplens {

bool is_text_dataset(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / kTextShardFormat.dataset_file);
}

void resolve_text_config(Config& config, const TextDatasetInfo& info, const std::string& where) {
  std::vector<double> cardinalities;
  for (const auto& field : info.categorical) cardinalities.push_back(static_cast<double>(field.vocabulary.size()));
  const int numeric = static_cast<int>(info.numeric.size());
  auto disagree = [&](const std::string& key, const std::string& saved, const std::string& data) {
    throw ConfigError("text." + key + " is " + saved + " in the config (a resumed run?) but " + where +
                      "/text_dataset.json says " + data + ": the model was built for another dataset");
  };
  if (config.text.vocab_size != 0 && config.text.vocab_size != info.vocab_size)
    disagree("vocab_size", std::to_string(config.text.vocab_size), std::to_string(info.vocab_size));
  if (!config.text.categorical_cardinalities.empty() && config.text.categorical_cardinalities != cardinalities)
    disagree("categorical_cardinalities", nlohmann::json(config.text.categorical_cardinalities).dump(),
             nlohmann::json(cardinalities).dump());
  if (config.text.numeric_fields != 0 && config.text.numeric_fields != numeric)
    disagree("numeric_fields", std::to_string(config.text.numeric_fields), std::to_string(numeric));
  config.text.vocab_size = info.vocab_size;
  config.text.categorical_cardinalities = cardinalities;
  config.text.numeric_fields = numeric;
}

TextBatchOptions text_batch_options(const Config& config, const TextDatasetInfo& info) {
  TextBatchOptions o;
  o.max_length = config.text.max_length;
  o.pad_id = info.pad_id;
  o.bucket_by_length = config.text.bucket_by_length;
  o.bucket_window = config.text.bucket_window;
  o.seed = static_cast<std::uint64_t>(config.run.seed);
  return o;
}

std::vector<std::string> text_class_names() { return {"negative", "positive"}; }

}  // namespace shoplens
