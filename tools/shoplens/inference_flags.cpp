#include "inference_flags.h"

#include <string>
#include <vector>

#include "shoplens/core/atomic_file.h"
#include "command.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "shoplens/models/model_facts.h"

namespace shoplens::cli {

void ComputeFlags::add_to(CLI::App& app) {
  app.add_option("--precision", precision_, "compute precision: fp32, bf16 or fp16 (CUDA)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--device", device_, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
}

void ComputeFlags::apply(Precision& precision, DeviceChoice& device) const {
  precision = parse_enum(kPrecisionNames, precision_, "--precision");
  device = parse_enum(kDeviceChoiceNames, device_, "--device");
}

void InferenceFlags::add_to(CLI::App& app, ModelInputOptions& options) {
  ModelSource& source = options.model;
  verb_ = app.get_name();
  app.add_option("-w,--weights", weights_,
                 "what to load: an exported model folder, a training run, a checkpoint (.ckpt), or a weights file "
                 "(.safetensors, .pth, .pt: name its --model)")
      ->type_name("PATH");
  app.add_option("-m,--model", model_,
                 "weights files: the architecture, " + model_names_text(ModelInput::image) +
                     " (model folders, runs and checkpoints name their own)")
      ->type_name("NAME");
  add_old_spelling(app, "--arch", arch_, "--model");
  app.add_option("--classes", classes_,
                 "weights files: class names, comma-separated, in output order (empty: 0, 1, ...)");
  app.add_option("--classes-file", classes_file_, "weights files: class names, one per line, in output order")
      ->check(CLI::ExistingFile)
      ->type_name("FILE");
  app.add_option("--image-size", source.image_size, "weights files: input side in pixels")->check(CLI::Range(8, 4096));
  app.add_option("--crop-pct", source.crop_pct,
                 "weights files: resize the short side to floor(size / crop-pct), then center crop")
      ->check(CLI::Range(0.05, 1.0));
  app.add_option("--variant", source.variant, "model folders: weights file to load (fp32, bf16, fp16)");
  app.add_option("--checkpoint", source.checkpoint, "runs: best or last");
  compute_.add_to(app);
  app.add_flag("--fast-decode", fast_decode_,
               "decode JPEGs with the fast DCT at reduced scale (faster; pixels differ slightly from torchvision's)");
  app.add_option("--root", options.root,
                 "CSV or list input: folder relative paths start from (empty: the file's folder)");
  app.add_option("--split", options.split, "shards input: all, train, val or test");
  app.add_option("-b,--batch-size", options.batch_size, "images per forward pass")->check(positive());
  app.add_option("--workers", options.workers, "decode threads (0: usable cores)")->check(thread_count());
  app.add_option("--threads", threads_, "compute threads (0: usable cores)")->check(thread_count());
  app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
}

void InferenceFlags::apply(ModelInputOptions& options) const {
  set_log_level(log_level_);
  set_compute_threads(threads_);
  std::string model = model_;
  options.model.path = weights_path(verb_, weights_, model);
  if (!arch_.empty() && !model.empty() && model != arch_)
    throw UsageError(verb_ + ": give the architecture once: --model, or its old spelling --arch");
  options.model.arch = arch_.empty() ? model : arch_;
  if (!classes_.empty() && !classes_file_.empty()) throw UsageError("give --classes or --classes-file, not both");
  std::vector<std::string>& names = options.model.class_names;
  if (!classes_.empty())
    for (const auto& c : shoplens::split(classes_, ',')) names.emplace_back(trim(c));
  if (!classes_file_.empty())
    for (const auto& line : shoplens::split(read_file(classes_file_), '\n'))
      if (!trim(line).empty()) names.emplace_back(trim(line));
  options.inference.exact_decode = !fast_decode_;
  compute_.apply(options.inference.precision, options.inference.device);
}

}  // namespace shoplens::cli
