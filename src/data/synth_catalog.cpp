// The synthetic catalog: plans labels, splits, corruptions and missing metadata for the whole
// catalog up front (from the seed alone), then renders, encodes and writes images in parallel,
// each from its own random streams, so the output is byte-identical for any thread count.
#include "shoplens/data/synth_catalog.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/manifest.h"
#include "synth_internal.h"

namespace shoplens {
namespace synth {}  // namespace synth

using synth::Defect;
using synth::ProductKind;

const std::vector<SynthClass>& synth_classes() {
  static const std::vector<SynthClass> classes = {
      {"good_image", 0.41}, {"blurry", 0.09},         {"background_issue", 0.08}, {"low_light", 0.07},
      {"watermark", 0.06},  {"cropped", 0.05},        {"overexposed", 0.045},     {"noisy", 0.045},
      {"duplicate", 0.04},  {"low_resolution", 0.04}, {"color_cast", 0.035},      {"compression_artifacts", 0.035},
  };
  return classes;
}

const std::vector<std::string>& synth_metadata_fields() {
  static const std::vector<std::string> fields = {"source_channel", "device_type", "upload_region",
                                                  "aspect_ratio",   "category",    "seller_tier"};
  return fields;
}

const std::vector<std::string>& synth_corruption_kinds() {
  static const std::vector<std::string> kinds = {"truncated", "zero_bytes", "not_an_image", "bad_header",
                                                 "wrong_extension"};
  return kinds;
}

void validate_synth_options(const SynthOptions& o) {
  const auto fraction = [](double v, const char* what, bool below_one) {
    if (!(v >= 0.0 && (below_one ? v < 1.0 : v <= 1.0)))
      throw UsageError(std::string(what) + " must be in [0, 1" + (below_one ? ")" : "]") + " (got " +
                       std::to_string(v) + ")");
  };
  if (o.out_dir.empty()) throw UsageError("synthetic catalog: the output folder is required");
  if (o.num_images < 1)
    throw UsageError("number of images must be at least 1 (got " + std::to_string(o.num_images) + ")");
  if (o.min_side < 32)
    throw UsageError("image size range: the minimum side must be at least 32 (got " + std::to_string(o.min_side) + ")");
  if (o.max_side < o.min_side)
    throw UsageError("image size range: the minimum side " + std::to_string(o.min_side) + " exceeds the maximum " +
                     std::to_string(o.max_side));
  if (o.max_side > 8192)
    throw UsageError("image size range: the maximum side must be at most 8192 (got " + std::to_string(o.max_side) +
                     ")");
  fraction(o.corrupt_fraction, "corrupt fraction", false);
  fraction(o.missing_metadata_fraction, "missing-metadata fraction", false);
  fraction(o.png_fraction, "PNG fraction", false);
  fraction(o.val_fraction, "validation fraction", true);
  fraction(o.test_fraction, "test fraction", true);
  if (o.val_fraction + o.test_fraction >= 1.0)
    throw UsageError("validation + test fractions must leave images for training (got " +
                     std::to_string(o.val_fraction + o.test_fraction) + ")");
  if (o.threads < 0) throw UsageError("threads must be 0 (all cores) or more (got " + std::to_string(o.threads) + ")");
}

namespace {

enum class Corruption { kNone = -1, kTruncated = 0, kZeroBytes, kNotAnImage, kBadHeader, kWrongExtension };

// Random streams of one image; see synth::derive_seed.
constexpr std::uint64_t kStreamAttributes = 1, kStreamPixels = 2, kStreamCorruption = 3;
constexpr std::uint64_t kPlanIndex = ~0ULL;

// What is decided for the catalog as a whole, so that counts are exact rather than expected.
struct ImagePlan {
  int label = 0;
  Split split = Split::kTrain;
  Corruption corruption = Corruption::kNone;
  bool missing_metadata = false;
};

// Largest-remainder apportionment: every class count is within 1 of share * n.
std::vector<int> class_counts(int n) {
  const auto& classes = synth_classes();
  std::vector<int> counts(classes.size());
  std::vector<std::pair<double, std::size_t>> remainders;
  int assigned = 0;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const double exact = classes[c].share * n;
    counts[c] = static_cast<int>(std::floor(exact));
    assigned += counts[c];
    remainders.emplace_back(exact - counts[c], c);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; assigned < n; ++i, ++assigned) ++counts[remainders[i % remainders.size()].second];
  return counts;
}

// Per class: at least one val and one test image once the class has 3 (when those fractions are
// non-zero), and never all of a class outside train.
void assign_splits(std::vector<ImagePlan>& plan, double val_fraction, double test_fraction, Rng& rng) {
  std::vector<std::vector<std::size_t>> members(synth_classes().size());
  for (std::size_t i = 0; i < plan.size(); ++i) members[plan[i].label].push_back(i);
  for (auto& idx : members) {
    rng.shuffle(idx);  // otherwise the lowest ids of every class would all land in val
    const int n = static_cast<int>(idx.size());
    const auto quota = [n](double f) {
      int k = static_cast<int>(std::lround(f * n));
      if (f > 0 && n >= 3) k = std::max(k, 1);
      return k;
    };
    int n_val = quota(val_fraction), n_test = quota(test_fraction);
    while (n_val + n_test > n - 1 && n_val + n_test > 0) (n_val >= n_test ? n_val : n_test)--;
    for (int k = 0; k < n; ++k)
      plan[idx[k]].split = k < n_val ? Split::kVal : k < n_val + n_test ? Split::kTest : Split::kTrain;
  }
}

std::vector<ImagePlan> make_plan(const SynthOptions& o) {
  Rng rng(mix_seed(o.seed, kPlanIndex, 0));
  const int n = o.num_images;
  std::vector<int> labels;
  labels.reserve(n);
  const auto counts = class_counts(n);
  for (std::size_t c = 0; c < counts.size(); ++c) labels.insert(labels.end(), counts[c], static_cast<int>(c));
  rng.shuffle(labels);

  std::vector<ImagePlan> plan(n);
  for (int i = 0; i < n; ++i) plan[i].label = labels[i];
  assign_splits(plan, o.val_fraction, o.test_fraction, rng);

  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  rng.shuffle(order);
  const int corrupted = static_cast<int>(std::lround(o.corrupt_fraction * n));
  const int kinds = static_cast<int>(synth_corruption_kinds().size());
  for (int k = 0; k < corrupted; ++k) plan[order[k]].corruption = static_cast<Corruption>(k % kinds);
  rng.shuffle(order);
  const int missing = static_cast<int>(std::lround(o.missing_metadata_fraction * n));
  for (int k = 0; k < missing; ++k) plan[order[k]].missing_metadata = true;
  return plan;
}

// ---- metadata: mildly tied to the defect (phones in dim rooms blur, studios shoot clean) ----

std::size_t pick_weighted(std::vector<double> weights, const std::vector<std::pair<std::size_t, double>>& tilt,
                          Rng& rng) {
  for (const auto& [i, factor] : tilt) weights[i] *= factor;
  return rng.pick(weights);
}

bool is_capture_defect(Defect d) { return d == Defect::kBlurry || d == Defect::kLowLight || d == Defect::kNoisy; }
bool is_reupload_defect(Defect d) {
  return d == Defect::kCompressionArtifacts || d == Defect::kLowResolution || d == Defect::kWatermark ||
         d == Defect::kDuplicate;
}

const char* const kChannels[] = {"mobile_app", "web_upload", "studio", "marketplace_api"};
const char* const kDevices[] = {"iphone", "android", "dslr", "webcam", "scanner"};
const char* const kRegions[] = {"na", "eu", "apac", "latam", "mea"};
const char* const kCategories[] = {"apparel", "electronics", "home", "beauty", "toys", "sports"};
const char* const kTiers[] = {"gold", "silver", "bronze", "new"};

std::size_t pick_channel(Defect d, Rng& rng) {
  std::vector<std::pair<std::size_t, double>> tilt;
  if (d == Defect::kGood)
    tilt = {{2, 2.0}, {0, 0.8}};
  else if (is_capture_defect(d))
    tilt = {{0, 1.8}, {2, 0.5}};
  else if (is_reupload_defect(d))
    tilt = {{3, 1.8}, {1, 1.2}, {2, 0.6}};
  else if (d == Defect::kBackgroundIssue)
    tilt = {{0, 1.4}, {2, 0.3}};
  else if (d == Defect::kOverexposed)
    tilt = {{0, 1.3}};
  else if (d == Defect::kCropped || d == Defect::kColorCast)
    tilt = {{1, 1.3}};
  return pick_weighted({0.35, 0.3, 0.15, 0.2}, tilt, rng);
}

std::size_t pick_device(Defect d, std::size_t channel, Rng& rng) {
  std::vector<std::pair<std::size_t, double>> tilt;
  if (channel == 2) tilt = {{2, 4.0}, {3, 0.3}};
  if (channel == 0) tilt = {{0, 1.8}, {1, 1.8}, {2, 0.3}};
  if (is_capture_defect(d)) tilt.insert(tilt.end(), {{3, 2.2}, {1, 1.2}, {2, 0.6}});
  if (d == Defect::kGood) tilt.push_back({2, 1.5});
  if (d == Defect::kLowResolution || d == Defect::kCompressionArtifacts) tilt.push_back({4, 1.5});
  return pick_weighted({0.3, 0.3, 0.15, 0.1, 0.15}, tilt, rng);
}

std::size_t pick_region(Defect d, Rng& rng) {
  std::vector<std::pair<std::size_t, double>> tilt;
  if (d == Defect::kLowResolution || d == Defect::kCompressionArtifacts) tilt = {{2, 1.3}, {3, 1.3}, {4, 1.3}};
  return pick_weighted({0.3, 0.25, 0.25, 0.1, 0.1}, tilt, rng);
}

// Mostly what the product is; one listing in ten is filed under some other category.
std::size_t pick_category(ProductKind kind, Rng& rng) {
  if (rng.bernoulli(0.1)) return static_cast<std::size_t>(rng.uniform_int(0, 5));
  return rng.pick(synth::product_kind_facts(kind).category_weights);
}

std::size_t pick_tier(Defect d, Rng& rng) {
  std::vector<std::pair<std::size_t, double>> tilt;
  if (d == Defect::kGood)
    tilt = {{0, 1.6}, {3, 0.7}};
  else if (is_reupload_defect(d))
    tilt = {{3, 1.8}, {0, 0.6}};
  return pick_weighted({0.2, 0.3, 0.3, 0.2}, tilt, rng);
}

// Original size: long side uniform in [min, max], aspect ratio from the common photo formats.
cv::Size pick_size(const SynthOptions& o, Rng& rng) {
  static const double kAspects[] = {1.0, 4.0 / 3, 3.0 / 4, 16.0 / 9, 2.0 / 3, 3.0 / 2};
  const std::size_t k = rng.pick({0.3, 0.15, 0.15, 0.08, 0.1, 0.07, 0.15});
  const double aspect = k < 6 ? kAspects[k] : rng.uniform(0.6, 1.8);
  const int long_side = rng.uniform_int(o.min_side, o.max_side);
  if (aspect >= 1.0) return {long_side, std::max(8, static_cast<int>(std::lround(long_side / aspect)))};
  return {std::max(8, static_cast<int>(std::lround(long_side * aspect))), long_side};
}

struct Attributes {
  ProductKind kind;
  cv::Size size;
  bool png;
  int jpeg_quality;
  std::array<std::string, 6> metadata;  // synth_metadata_fields() order
};

Attributes pick_attributes(const SynthOptions& o, std::size_t index, const ImagePlan& p) {
  Rng rng(mix_seed(o.seed, index, kStreamAttributes));
  const auto defect = static_cast<Defect>(p.label);
  Attributes a;
  a.kind = static_cast<ProductKind>(rng.uniform_int(0, synth::kNumProductKinds - 1));
  a.size = pick_size(o, rng);
  a.png = rng.bernoulli(o.png_fraction);
  a.jpeg_quality = rng.uniform_int(85, 95);
  const std::size_t channel = pick_channel(defect, rng);
  char aspect[32];
  std::snprintf(aspect, sizeof aspect, "%.2f", static_cast<double>(a.size.width) / a.size.height);
  a.metadata = {kChannels[channel],
                kDevices[pick_device(defect, channel, rng)],
                kRegions[pick_region(defect, rng)],
                aspect,
                kCategories[pick_category(a.kind, rng)],
                kTiers[pick_tier(defect, rng)]};
  if (p.missing_metadata) {
    std::vector<std::size_t> fields = {0, 1, 2, 3, 4, 5};
    rng.shuffle(fields);
    const std::size_t blank = 1 + rng.pick({0.55, 0.3, 0.15});
    for (std::size_t k = 0; k < blank; ++k) a.metadata[fields[k]].clear();
  }
  return a;
}

// ---- pixels, encoding and corruption ----

// The pixels are BGR, OpenCV's drawing order.
std::vector<uchar> encode(const cv::Mat3b& image, bool png, int jpeg_quality) {
  if (png) {
    // Huffman-only deflate: photos gain little from LZ77 matching, and it halves PNG encode time.
    PngEncodeOptions options;
    options.compression_level = 1;
    options.huffman_only = true;
    options.order = ChannelOrder::kBgr;
    return encode_png(image, options);
  }
  JpegEncodeOptions options;
  options.quality = jpeg_quality;
  options.order = ChannelOrder::kBgr;
  options.fast_dct = false;  // libjpeg's default DCT, as a camera or an image editor would use
  return encode_jpeg(image, options);
}

const char* const kNotImages[] = {
    "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n",
    "{\"error\": \"upload expired\", \"code\": 410}\n",
    "Error: the requested object does not exist.\n",
};

// Turns good bytes into the damaged file of `kind`, as broken uploads and storage produce them.
std::vector<uchar> corrupt(std::vector<uchar> bytes, Corruption kind, const cv::Mat3b& image, bool png,
                           int jpeg_quality, Rng& rng) {
  switch (kind) {
    case Corruption::kTruncated: {
      // A transfer that died part way through the compressed scan: the headers are intact, so
      // a decoder starts and then runs out of data (libjpeg pads the rest with grey and warns).
      const std::size_t cut = static_cast<std::size_t>(bytes.size() * rng.uniform(0.2, 0.7));
      const uchar sos[] = {0xFF, 0xDA};
      const auto scan = std::search(bytes.begin(), bytes.end(), std::begin(sos), std::end(sos));
      const std::size_t scan_start = static_cast<std::size_t>(scan - bytes.begin()) + 32;
      bytes.resize(std::min(bytes.size() - 2, std::max(cut, scan_start)));
      return bytes;
    }
    case Corruption::kZeroBytes:
      return {};
    case Corruption::kNotAnImage: {
      const std::string text = kNotImages[rng.uniform_int(0, 2)];
      return {text.begin(), text.end()};
    }
    case Corruption::kBadHeader: {
      // The magic number and the first segment headers become garbage. A zero first byte starts
      // no signature an image decoder sniffs for, so garbage never turns into another format.
      const std::size_t n = std::min<std::size_t>(bytes.size(), rng.uniform_int(8, 48));
      for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<uchar>(rng.next() & 0xFF);
      bytes[0] = 0;
      return bytes;
    }
    case Corruption::kWrongExtension:
      // Valid bytes of the other format: decodable by content sniffing, misleading by name.
      return encode(image, !png, jpeg_quality);
    case Corruption::kNone:
      break;
  }
  return bytes;
}

void write_bytes(const std::filesystem::path& path, const std::vector<uchar>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw IoError("cannot create '" + path.string() + "': " + std::strerror(errno));
  const bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int saved = errno;
  if (std::fclose(f) != 0 || !ok)
    throw IoError("cannot write '" + path.string() + "': " + std::strerror(ok ? errno : saved));
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string image_id(std::size_t index) {
  char id[32];
  std::snprintf(id, sizeof id, "img_%06zu", index);
  return id;
}

struct ImageResult {
  std::string manifest_row;
  std::string relative_path;
  std::uint64_t bytes = 0;
};

ImageResult make_image(const SynthOptions& o, std::size_t index, const ImagePlan& p) {
  const Attributes a = pick_attributes(o, index, p);
  const auto defect = static_cast<Defect>(p.label);
  const std::string& class_name = synth_classes()[p.label].name;
  // A truncated file is a cut JPEG: the loader's partial-decode path is what it exercises.
  const bool png = a.png && p.corruption != Corruption::kTruncated;
  ImageResult r;
  r.relative_path = "images/" + class_name + "/" + image_id(index) + (png ? ".png" : ".jpg");

  std::vector<uchar> bytes;
  if (p.corruption != Corruption::kZeroBytes && p.corruption != Corruption::kNotAnImage) {
    Rng pixels(mix_seed(o.seed, index, kStreamPixels));
    cv::Mat3b image = synth::render_scene(defect, a.kind, a.size, pixels);
    synth::apply_natural_variation(image, pixels);
    synth::apply_defect(image, defect, pixels);
    bytes = encode(image, png, a.jpeg_quality);
    if (p.corruption != Corruption::kNone) {
      Rng damage(mix_seed(o.seed, index, kStreamCorruption));
      bytes = corrupt(std::move(bytes), p.corruption, image, png, a.jpeg_quality, damage);
    }
  } else {
    Rng damage(mix_seed(o.seed, index, kStreamCorruption));
    bytes = corrupt({}, p.corruption, cv::Mat3b(), png, a.jpeg_quality, damage);
  }
  write_bytes(o.out_dir / r.relative_path, bytes);
  r.bytes = bytes.size();

  r.manifest_row = image_id(index) + "," + csv_field(r.relative_path) + "," + class_name + "," + split_name(p.split);
  for (const auto& v : a.metadata) r.manifest_row += "," + csv_field(v);
  r.manifest_row += "\n";
  return r;
}

void create_folders(const SynthOptions& o) {
  std::error_code ec;
  for (const auto& c : synth_classes()) {
    std::filesystem::create_directories(o.out_dir / "images" / c.name, ec);
    if (ec) throw IoError("cannot create '" + (o.out_dir / "images" / c.name).string() + "': " + ec.message());
  }
}

// Our worker threads are the parallelism; OpenCV's own pool inside each of them would only
// oversubscribe the cores (and make the per-thread speed figure meaningless).
class ScopedOpenCvThreads {
 public:
  explicit ScopedOpenCvThreads(int n) : previous_(cv::getNumThreads()) { cv::setNumThreads(n); }
  ~ScopedOpenCvThreads() { cv::setNumThreads(previous_); }

 private:
  int previous_;
};

std::vector<ImageResult> generate_images(const SynthOptions& o, const std::vector<ImagePlan>& plan, int threads) {
  std::vector<ImageResult> results(plan.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  Progress progress("make-data", plan.size(), "images");
  const auto work = [&] {
    try {
      for (std::size_t i = next++; i < plan.size() && !failed; i = next++) {
        throw_if_interrupted();
        results[i] = make_image(o, i, plan[i]);
        progress.advance();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  {
    ScopedOpenCvThreads single(1);
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
  progress.finish();
  return results;
}

}  // namespace

SynthSummary generate_synthetic_catalog(const SynthOptions& options) {
  validate_synth_options(options);
  const auto start = std::chrono::steady_clock::now();
  const auto& classes = synth_classes();
  create_folders(options);
  std::string class_list;
  for (const auto& c : classes) class_list += c.name + "\n";
  write_file_atomic(options.out_dir / "classes.txt", class_list);

  const std::vector<ImagePlan> plan = make_plan(options);
  const int threads = std::max(1, std::min(resolve_threads(options.threads), options.num_images));
  const std::vector<ImageResult> results = generate_images(options, plan, threads);

  SynthSummary summary;
  summary.images = options.num_images;
  summary.threads = threads;
  summary.per_class.assign(classes.size(), 0);
  std::string manifest = "id,path,label,split";
  for (const auto& f : synth_metadata_fields()) manifest += "," + f;
  manifest += "\n";
  std::string corruptions = "id,path,kind\n";
  for (std::size_t i = 0; i < plan.size(); ++i) {
    manifest += results[i].manifest_row;
    summary.bytes_written += results[i].bytes;
    ++summary.per_class[plan[i].label];
    if (plan[i].missing_metadata) ++summary.records_missing_metadata;
    if (plan[i].corruption == Corruption::kNone) continue;
    const std::string& kind = synth_corruption_kinds()[static_cast<int>(plan[i].corruption)];
    ++summary.corrupted;
    ++summary.corrupted_by_kind[kind];
    corruptions += image_id(i) + "," + csv_field(results[i].relative_path) + "," + kind + "\n";
  }
  summary.corruptions = options.out_dir / "corruptions.csv";
  write_file_atomic(summary.corruptions, corruptions);
  // Written last: a manifest present means the catalog is complete.
  summary.manifest = options.out_dir / "manifest.csv";
  write_file_atomic(summary.manifest, manifest);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace shoplens
