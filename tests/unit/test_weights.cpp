#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "models/models_internal.h"
#include "models/pickle_internal.h"
#include "models/zip_directory.h"
#include "model_test_util.h"
#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"
#include "test_util.h"

namespace shoplens {
namespace {

using testing::ScratchDir;

using testing::spec;

const at::Tensor* find(const StateDict& sd, const std::string& name) {
  for (const auto& [n, t] : sd)
    if (n == name) return &t;
  return nullptr;
}

std::string bytes_of(const std::filesystem::path& p) { return testing::read_text(p); }

void write_bytes(const std::filesystem::path& p, const std::string& s) { testing::write_text(p, s); }

template <typename Fn>
std::string data_error(Fn&& fn) {
  try {
    fn();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

// ---------------------------------------------------------------------------- safetensors

TEST(WeightsSafetensors, RoundTripEveryDtypeWithMetadata) {
  ScratchDir dir("st");
  torch::manual_seed(0);
  StateDict in = {
      {"f32", torch::randn({2, 3})},
      {"f16", torch::randn({4}).to(at::kHalf)},
      {"bf16", torch::randn({2, 2}).to(at::kBFloat16)},
      {"f64", torch::randn({3}, at::kDouble)},
      {"i64", torch::tensor({std::int64_t{1} << 40, std::int64_t{-5}})},
      {"i32", torch::tensor({-7, 70000}, at::kInt)},
      {"i16", torch::tensor({-300, 300}, at::kShort)},
      {"i8", torch::tensor({-100, 100}, at::kChar)},
      {"u8", torch::tensor({0, 255}, at::kByte)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5)},
      {"empty", torch::zeros({0, 4})},
      {"strided", torch::arange(12, at::kFloat).reshape({3, 4}).t()},  // stored contiguous
  };
  const auto path = dir / "w.safetensors";
  write_safetensors(path, in, {{"format", "pt"}, {"who", "test"}});
  EXPECT_EQ(detect_weight_format(path), WeightFormat::kSafetensors);
  const auto raw = bytes_of(path);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(raw[i]);
  EXPECT_EQ((8 + header_len) % 8, 0u);  // padded so the data starts 8-byte aligned
  std::map<std::string, std::string> meta;
  auto out = read_safetensors(path, &meta);
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"format", "pt"}, {"who", "test"}}));
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);  // written in order, read back in data order
    EXPECT_EQ(out[i].second.scalar_type(), in[i].second.scalar_type()) << in[i].first;
    EXPECT_TRUE(torch::equal(out[i].second, in[i].second)) << in[i].first;
  }
  EXPECT_EQ(read_weights(path).size(), in.size());
}

// A valid file with one 2x2 F32 tensor, and its pieces for corrupting.
std::string small_safetensors(const std::string& header) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(16, '\x01');
}

TEST(WeightsSafetensors, MalformedFilesAreDataErrorsNamingTheFile) {
  ScratchDir dir("bad");
  const auto path = dir / "bad.safetensors";
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  write_bytes(path, small_safetensors(ok));
  ASSERT_EQ(read_safetensors(path).size(), 1u);

  auto expect_error = [&](const std::string& content, const std::string& needle) {
    write_bytes(path, content);
    const auto msg = data_error([&] { read_weights(path); });
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << msg;
  };
  const auto good = small_safetensors(ok);
  expect_error(good.substr(0, good.size() - 3), "truncated");
  std::string past_end = good;
  past_end[0] = static_cast<char>(0xf0);
  past_end[2] = 0x01;
  expect_error(past_end, "runs past the end");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})"), "ends at byte 24");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})"), "do not hold 16");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"),
               "overlapping");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"), "bytes after the last");
  expect_error(small_safetensors(R"({"a":{"dtype":"U32","shape":[4],"data_offsets":[0,16]}})"), "dtype U32");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})"), "non-negative");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[4]}})"), "no 'data_offsets'");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},  )"), "not JSON");
  expect_error(small_safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})"),
               "too large");
  expect_error(small_safetensors(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})"),
               "__metadata__");
  expect_error(std::string("\x05\0\0\0", 4), "starts with bytes 05 00 00 00");
}

TEST(WeightsFiles, NonWeightFilesAreDataErrors) {
  ScratchDir dir("nw");
  const auto text = dir / "notes.pt";
  write_bytes(text, "hello, these are not weights\n");
  auto msg = data_error([&] { read_weights(text); });
  EXPECT_NE(msg.find("neither a torch.save zip archive nor a safetensors file"), std::string::npos) << msg;
  EXPECT_NE(msg.find(text.string()), std::string::npos) << msg;

  const auto empty = dir / "empty.safetensors";
  write_bytes(empty, "");
  EXPECT_NE(data_error([&] { read_weights(empty); }).find("empty file"), std::string::npos);

  // A zip that is not a torch.save archive (just a local file header, no central directory).
  const auto zip = dir / "w.pt";
  write_bytes(zip, std::string("PK\x03\x04", 4) + std::string(60, '\0'));
  msg = data_error([&] { read_weights(zip); });
  EXPECT_NE(msg.find(zip.string()), std::string::npos) << msg;

  EXPECT_THROW(read_weights(dir / "absent.pt"), IoError);
}

// A zip archive written field by field: each entry holds `stored` zero bytes and declares
// `declared` bytes uncompressed with compression `method`.
struct FakeZipEntry {
  std::string name;
  std::uint16_t method;
  std::uint32_t stored, declared;
};

std::string fake_zip(const std::vector<FakeZipEntry>& entries) {
  auto put = [](std::string& out, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  };
  std::string out, directory;
  for (const auto& e : entries) {
    const auto offset = out.size();
    put(out, 0x04034b50, 4);
    put(out, 20, 2), put(out, 0, 2), put(out, e.method, 2), put(out, 0, 4), put(out, 0, 4);
    put(out, e.stored, 4), put(out, e.declared, 4), put(out, e.name.size(), 2), put(out, 0, 2);
    out += e.name + std::string(e.stored, '\0');
    put(directory, 0x02014b50, 4);
    put(directory, 20, 2), put(directory, 20, 2), put(directory, 0, 2), put(directory, e.method, 2);
    put(directory, 0, 4), put(directory, 0, 4), put(directory, e.stored, 4), put(directory, e.declared, 4);
    put(directory, e.name.size(), 2), put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 2);
    put(directory, 0, 2), put(directory, 0, 4), put(directory, offset, 4);
    directory += e.name;
  }
  const auto directory_at = out.size();
  out += directory;
  put(out, 0x06054b50, 4);
  put(out, 0, 2), put(out, 0, 2), put(out, entries.size(), 2), put(out, entries.size(), 2);
  put(out, directory.size(), 4), put(out, directory_at, 4), put(out, 0, 2);
  return out;
}

// A 10 KB archive declaring gigabytes reached 1.7 GB of memory before anything was checked.
TEST(WeightsFiles, ZipBombArchiveIsRefusedBeforeExtraction) {
  ScratchDir dir("zb");
  const auto bomb = dir / "bomb.pt";
  write_bytes(bomb, fake_zip({{"archive/data.pkl", 8, 10000, 2000000000u}, {"archive/version", 0, 2, 2}}));
  const auto msg = data_error([&] { read_weights(bomb); });
  EXPECT_NE(msg.find("zip bomb"), std::string::npos) << msg;
  EXPECT_NE(msg.find("archive/data.pkl"), std::string::npos) << msg;
  EXPECT_NE(msg.find(bomb.string()), std::string::npos) << msg;
  // Stored entries whose two sizes disagree, and unknown compression methods, are refused too.
  write_bytes(bomb, fake_zip({{"archive/data.pkl", 0, 100, 100000}}));
  EXPECT_NE(data_error([&] { read_weights(bomb); }).find("two different sizes"), std::string::npos);
  write_bytes(bomb, fake_zip({{"archive/data.pkl", 14, 100, 100}}));
  EXPECT_NE(data_error([&] { read_weights(bomb); }).find("compression method 14"), std::string::npos);
}

TEST(WeightsFiles, ZipDirectoryListsEveryEntryAndRejectsDamage) {
  const std::string zip = fake_zip({{"a/data.pkl", 0, 7, 7}, {"a/data/0", 8, 3, 12}});
  auto read_at = [&](std::uint64_t offset, std::size_t size) { return zip.substr(offset, size); };
  const auto entries = detail::read_zip_directory(zip.size(), read_at, "z.pt");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].name, "a/data/0");
  EXPECT_EQ(entries[1].method, 8);
  EXPECT_EQ(entries[1].uncompressed_size, 12u);
  // Cut anywhere: a DataError naming the file, never a read outside the bytes.
  for (std::size_t cut = 0; cut < zip.size(); ++cut) {
    const std::string part = zip.substr(0, cut);
    auto read_part = [&](std::uint64_t offset, std::size_t size) {
      if (offset + size > part.size()) throw std::logic_error("read past the end");
      return part.substr(offset, size);
    };
    EXPECT_THROW(detail::read_zip_directory(part.size(), read_part, "z.pt"), DataError) << cut;
  }
}

// ---------------------------------------------------------------------------- unpickler

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

detail::PickleValuePtr unpickle_bytes(const std::string& bytes) {
  return detail::unpickle(bytes, "test.pkl", [](const std::string&, at::ScalarType dtype, std::int64_t numel) {
    return torch::arange(numel).to(dtype);
  });
}

TEST(WeightsUnpickler, ReadsContainersAndScalars) {
  using Kind = detail::PickleValue::Kind;
  // pickle.dumps({'a': [1, -2, 3.5, True, None, 2**40, -2**40], 'b': (b'xy', 'z')}, protocol=3)
  auto v = unpickle_bytes(from_hex(
      "80037d71002858010000006171015d7102284b014afeffffff47400c000000000000884e8a060000000000018a060000000000ff65"
      "580100000062710343027879710458010000007a7105867106752e"));
  ASSERT_EQ(v->kind, Kind::kDict);
  ASSERT_EQ(v->entries.size(), 2u);
  EXPECT_EQ(v->entries[0].first->text, "a");
  const auto& list = *v->entries[0].second;
  ASSERT_EQ(list.items.size(), 7u);
  EXPECT_EQ(list.items[0]->integer, 1);
  EXPECT_EQ(list.items[1]->integer, -2);
  EXPECT_DOUBLE_EQ(list.items[2]->real, 3.5);
  EXPECT_TRUE(list.items[3]->boolean);
  EXPECT_EQ(list.items[4]->kind, Kind::kNone);
  EXPECT_EQ(list.items[5]->integer, std::int64_t{1} << 40);
  EXPECT_EQ(list.items[6]->integer, -(std::int64_t{1} << 40));
  const auto& tuple = *v->entries[1].second;
  EXPECT_EQ(tuple.items[0]->kind, Kind::kBytes);
  EXPECT_EQ(tuple.items[0]->text, "xy");
  EXPECT_EQ(tuple.items[1]->text, "z");
  // pickle.dumps({'k': [1, 2]}, protocol=4): FRAME, MEMOIZE, SHORT_BINUNICODE.
  v = unpickle_bytes(from_hex("80049510000000000000007d948c016b945d94284b014b0265732e"));
  ASSERT_EQ(v->entries.size(), 1u);
  EXPECT_EQ(v->entries[0].second->items.size(), 2u);
}

TEST(WeightsUnpickler, RebuildsTensorViewsInsideTheirStorage) {
  // _rebuild_tensor_v2(('storage', FloatStorage, '0', 'cpu', 4), offset, (2,), (1,), False, None)
  auto v = unpickle_bytes(
      from_hex("800263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a2828580700000073746f726167656374"
               "6f7263680a466c6f617453746f726167650a58010000003058030000006370754b0474514b024b02854b0185894e74522e"));
  ASSERT_EQ(v->kind, detail::PickleValue::Kind::kTensor);
  EXPECT_TRUE(torch::equal(v->tensor, torch::tensor({2.0f, 3.0f})));
  // The same with size (4,) from offset 2: it would read past the 4-element storage.
  const auto msg = data_error([] {
    unpickle_bytes(from_hex(
        "800263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a2828580700000073746f726167656374"
        "6f7263680a466c6f617453746f726167650a58010000003058030000006370754b0474514b024b04854b0185894e74522e"));
  });
  EXPECT_NE(msg.find("reaches element 5 of a 4-element storage"), std::string::npos) << msg;
}

TEST(WeightsUnpickler, MalformedPicklesAreDataErrors) {
  auto error_of = [](const std::string& hex) { return data_error([&] { unpickle_bytes(from_hex(hex)); }); };
  EXPECT_NE(error_of("80027d").find("ends without STOP"), std::string::npos);
  EXPECT_NE(error_of("800268052e").find("memo key 5"), std::string::npos);
  EXPECT_NE(error_of("800258ffff000061622e").find("runs past the end"), std::string::npos);
  EXPECT_NE(error_of("800249310a2e").find("unsupported pickle opcode 0x49"), std::string::npos);  // text INT
  EXPECT_NE(error_of("8002732e").find("stack underflow"), std::string::npos);
  EXPECT_NE(error_of("80024e4e2e").find("STOP with 2 values"), std::string::npos);
  EXPECT_NE(error_of("80024e4e2e").find("test.pkl"), std::string::npos);
  // A persistent id that is not a storage tuple.
  EXPECT_NE(error_of("80024e512e").find("not a torch storage"), std::string::npos);
  // l = []; l.append(l): a cycle, rejected (and freed: the sanitizer build checks for leaks).
  EXPECT_NE(error_of("80025d71006800612e").find("contains itself"), std::string::npos);
}

TEST(WeightsUnpickler, DeepNestingIsFreedWithoutRecursion) {
  // [] wrapped in a million 1-tuples: (((...([],),...),),)
  const std::string pkl = "\x80\x02]" + std::string(1000000, '\x85') + ".";
  auto v = unpickle_bytes(pkl);
  EXPECT_EQ(v->kind, detail::PickleValue::Kind::kTuple);
  v.reset();  // must not overflow the stack
}

TEST(WeightsUnpickler, DictKeysNestedDeepAreDescribedWithoutRecursion) {
  // d0 = {d1: None}, d1 = {d2: None}, ... 100,000 deep (a hand-made pickle: Python's dicts are not
  // hashable, but nothing stops a file from holding this).
  const int depth = 100000;
  std::string pkl = "\x80\x02" + std::string(depth + 1, '}');
  for (int i = 0; i < depth; ++i) pkl += "Ns";
  pkl += ".";
  auto v = unpickle_bytes(pkl);
  ASSERT_EQ(v->kind, detail::PickleValue::Kind::kDict);
  EXPECT_EQ(detail::describe(*v), "a dict of 1 entries with keys [a dict]");
}

// Random byte flips of valid inputs: the readers must answer with a DataError or a result,
// never crash, hang or throw anything else.
TEST(WeightsUnpickler, MutatedPicklesFailCleanly) {
  const auto base = from_hex(
      "80027d71002858010000006171015d71022863746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a2828"
      "580700000073746f7261676563746f7263680a466c6f617453746f726167650a58010000003058030000006370754b0474514b00"
      "4b02854b0185894e7452710368034b014a0fffffff47400c000000000000884e65580100000062710443027879710586710675"
      "2e");
  auto loader = [](const std::string&, at::ScalarType dtype, std::int64_t numel) {
    if (numel > (1 << 20)) throw DataError("storage too large for the test");
    return torch::arange(numel).to(dtype);
  };
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string bytes = base;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
      bytes[rng() % bytes.size()] = static_cast<char>(rng() % 256);
    try {
      detail::unpickle(bytes, "fuzz.pkl", loader);
      ++accepted;
    } catch (const DataError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << i << ": " << e.what();
      break;
    }
  }
  EXPECT_GT(accepted, 0);
}

TEST(WeightsSafetensors, MutatedFilesFailCleanly) {
  ScratchDir dir("stfuzz");
  const auto path = dir / "m.safetensors";
  write_safetensors(path, {{"a", torch::ones({2, 3})}, {"b", torch::arange(4)}, {"c", torch::tensor(true)}},
                    {{"k", "v"}});
  const auto base = bytes_of(path);
  std::mt19937 rng(11);
  for (int i = 0; i < 400; ++i) {
    std::string bytes = base;
    // Mostly the length and the header, where the parsing happens.
    const std::size_t span = std::min<std::size_t>(bytes.size(), 160);
    bytes[rng() % span] = static_cast<char>(rng() % 256);
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    write_bytes(path, bytes);
    try {
      read_weights(path);
    } catch (const DataError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << i << ": " << e.what();
      break;
    }
  }
}

// ---------------------------------------------------------------------------- load_weights

TEST(WeightsLoad, CopiesEverythingFromTheSameArchitecture) {
  torch::manual_seed(0);
  auto a = make_model(spec("resnet18"));
  auto b = make_model(spec("resnet18"));
  auto report = load_weights(*b, model_state_dict(*a), false);
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_EQ(report.loaded.size(), 122u);
  EXPECT_EQ(report.model_tensors, 122u);
  EXPECT_TRUE(report.unexpected.empty());
  EXPECT_EQ(report.weights_num_classes, 5);
  auto sa = model_state_dict(*a), sb = model_state_dict(*b);
  for (std::size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(torch::equal(sa[i].second, sb[i].second)) << sa[i].first;
  EXPECT_NE(report.summary().find("loaded 122 of 122 model tensors (complete)"), std::string::npos) << report.summary();
}

TEST(WeightsLoad, ReportsMissingUnexpectedAndMismatchedKeys) {
  torch::manual_seed(1);
  auto model = make_model(spec("resnet18"));
  auto before = model_state_dict(*model);
  auto weights = model_state_dict(*make_model(spec("resnet18")));
  weights.erase(std::remove_if(weights.begin(), weights.end(),
                               [](const auto& kv) { return kv.first == "layer3.1.bn1.running_var"; }),
                weights.end());
  weights.emplace_back("aux_head.weight", torch::zeros({3}));
  for (auto& [name, t] : weights)
    if (name == "layer2.0.conv1.weight") t = torch::zeros({128, 64, 1, 1});
  auto report = load_weights(*model, weights, false);
  EXPECT_FALSE(report.complete());
  EXPECT_EQ(report.missing, std::vector<std::string>{"layer3.1.bn1.running_var"});
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"aux_head.weight"});
  ASSERT_EQ(report.shape_mismatched.size(), 1u);
  EXPECT_EQ(report.shape_mismatched[0].name, "layer2.0.conv1.weight");
  EXPECT_EQ(report.shape_mismatched[0].expected, (std::vector<std::int64_t>{128, 64, 3, 3}));
  EXPECT_EQ(report.shape_mismatched[0].found, (std::vector<std::int64_t>{128, 64, 1, 1}));
  EXPECT_EQ(report.loaded.size(), 120u);
  EXPECT_FALSE(report.head_reset);
  // The mismatched and missing tensors keep the model's own values.
  auto after = model_state_dict(*model);
  EXPECT_TRUE(torch::equal(*find(after, "layer2.0.conv1.weight"), *find(before, "layer2.0.conv1.weight")));
  EXPECT_TRUE(torch::equal(*find(after, "layer3.1.bn1.running_var"), *find(before, "layer3.1.bn1.running_var")));

  const auto j = report.to_json();
  EXPECT_EQ(j["missing"][0], "layer3.1.bn1.running_var");
  EXPECT_EQ(j["shape_mismatched"][0]["found"].get<std::vector<std::int64_t>>(),
            (std::vector<std::int64_t>{128, 64, 1, 1}));
  EXPECT_EQ(j["complete"], false);
  const auto text = report.summary();
  for (const char* needle :
       {"missing, kept their initial values (1): layer3.1.bn1.running_var", "unexpected, ignored (1): aux_head.weight",
        "layer2.0.conv1.weight [128, 64, 3, 3] <- [128, 64, 1, 1]"})
    EXPECT_NE(text.find(needle), std::string::npos) << text;
}

TEST(WeightsLoad, NewHeadWhenClassCountDiffersOrConfigError) {
  torch::manual_seed(2);
  auto weights = model_state_dict(*make_model(spec("resnet18", 10)));
  auto strict = make_model(spec("resnet18", 5));
  try {
    load_weights(*strict, weights, false);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the weights have 10 classes and the config has 5"), std::string::npos)
        << e.what();
  }
  auto model = make_model(spec("resnet18", 5));
  auto report = load_weights(*model, weights, true);
  EXPECT_TRUE(report.head_reset);
  EXPECT_EQ(report.weights_num_classes, 10);
  EXPECT_EQ(report.model_num_classes, 5);
  EXPECT_EQ(model->num_classes(), 5);
  EXPECT_EQ(report.loaded.size(), 120u);  // everything but fc.weight and fc.bias
  EXPECT_TRUE(report.shape_mismatched.empty());
  EXPECT_TRUE(
      torch::equal(*find(model_state_dict(*model), "layer4.1.conv2.weight"), *find(weights, "layer4.1.conv2.weight")));
  EXPECT_NE(report.summary().find("the weights have 10 classes, the model 5"), std::string::npos);
  torch::NoGradGuard no_grad;
  model->eval();
  EXPECT_EQ(model->forward(torch::randn({1, 3, 64, 64})).size(1), 5);
}

TEST(WeightsLoad, StripsWrapperPrefixesAndConvertsDtypes) {
  torch::manual_seed(3);
  auto source = make_model(spec("small_cnn"));
  StateDict ddp;
  for (const auto& [name, t] : model_state_dict(*source))
    ddp.emplace_back("module." + name, t.is_floating_point() ? t.to(at::kHalf) : t);
  auto model = make_model(spec("small_cnn"));
  auto report = load_weights(*model, ddp, false);
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_EQ(report.stripped_prefixes, std::vector<std::string>{"module."});
  ASSERT_EQ(report.converted_dtypes.size(), 1u);
  EXPECT_EQ(report.converted_dtypes[0].rfind("Half -> Float (", 0), 0u) << report.converted_dtypes[0];
  auto w = model->named_parameters()["features.0.weight"];
  EXPECT_EQ(w.scalar_type(), at::kFloat);
  EXPECT_TRUE(torch::allclose(w, source->named_parameters()["features.0.weight"], 1e-3, 1e-3));

  StateDict lightning;
  for (const auto& [name, t] : model_state_dict(*source)) lightning.emplace_back("model." + name, t);
  EXPECT_TRUE(load_weights(*model, lightning, false).complete());
}

TEST(WeightsLoad, MissingBatchNormCountersAreNotMissingWeights) {
  auto model = make_model(spec("small_cnn"));
  StateDict old_style;
  for (const auto& [name, t] : model_state_dict(*make_model(spec("small_cnn"))))
    if (name.find("num_batches_tracked") == std::string::npos) old_style.emplace_back(name, t);
  auto report = load_weights(*model, old_style, false);
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_EQ(report.untracked_batchnorm, 4);
}

TEST(WeightsLoad, VitPosEmbedResampledToTheModelGrid) {
  torch::manual_seed(4);
  auto big = make_model(spec("vit_tiny", 5, 64));    // 4x4 patches
  auto small = make_model(spec("vit_tiny", 5, 32));  // 2x2 patches
  auto report = load_weights(*small, model_state_dict(*big), false);
  ASSERT_EQ(report.resampled.size(), 1u) << report.summary();
  EXPECT_EQ(report.resampled[0].name, "pos_embed");
  EXPECT_EQ(report.resampled[0].expected, (std::vector<std::int64_t>{1, 5, 192}));
  EXPECT_EQ(report.resampled[0].found, (std::vector<std::int64_t>{1, 17, 192}));
  EXPECT_TRUE(report.missing.empty());
  EXPECT_TRUE(report.shape_mismatched.empty());
  EXPECT_EQ(report.loaded.size(), report.model_tensors);
  auto pe = small->named_parameters()["pos_embed"];
  auto src = big->named_parameters()["pos_embed"];
  EXPECT_TRUE(torch::equal(pe.select(1, 0), src.select(1, 0)));  // the class token is kept as is
  EXPECT_NE(report.summary().find("pos_embed [1, 5, 192] <- [1, 17, 192]"), std::string::npos) << report.summary();
}

TEST(WeightsLoad, LoadWeightsFileLogsAndNamesTheFileInErrors) {
  ScratchDir dir("lw");
  torch::manual_seed(5);
  const auto path = (dir / "cnn.safetensors").string();
  write_safetensors(path, model_state_dict(*make_model(spec("small_cnn", 12))));
  auto model = make_model(spec("small_cnn", 12));
  auto report = load_weights_file(*model, path, false, false);
  EXPECT_EQ(report.source, path);
  EXPECT_TRUE(report.complete());
  auto other = make_model(spec("small_cnn", 3));
  try {
    load_weights_file(*other, path, false, false);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": the weights have 12 classes and the config has 3"),
              std::string::npos)
        << e.what();
  }
}

// Weights of another model matched nothing, and training went on from scratch with exit 0.
TEST(WeightsLoad, WeightsMatchingNothingOrPartlyAreAConfigErrorUnlessPartialIsAllowed) {
  ScratchDir dir("lw");
  const auto vit = (dir / "vit.safetensors").string();
  write_safetensors(vit, model_state_dict(*make_model(spec("vit_tiny", 3))));
  auto model = make_model(spec("small_cnn", 3));
  try {
    load_weights_file(*model, vit, true, false);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(vit + ": loaded 0 of"), std::string::npos) << what;
    EXPECT_NE(what.find("no model tensor matched"), std::string::npos) << what;
    EXPECT_NE(what.find("model.partial_load"), std::string::npos) << what;
  }
  // Half a state dict: the missing names are listed; with partial_load it loads what it can.
  StateDict half = model_state_dict(*make_model(spec("small_cnn", 3)));
  half.resize(half.size() / 2);
  const auto part = (dir / "half.safetensors").string();
  write_safetensors(part, half);
  try {
    load_weights_file(*model, part, true, false);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model tensors have no weights"), std::string::npos) << e.what();
  }
  auto report = load_weights_file(*model, part, true, true);
  EXPECT_EQ(report.loaded.size(), half.size());
  EXPECT_FALSE(report.missing.empty());
}

// ---------------------------------------------------------------------------- against Python

// Reference files written by scripts/fixtures/torchvision_fixture.py with Debian's PyTorch and
// torchvision, skipped where they are not installed. ctest runs every test in its own process,
// so the files are cached beside the test binary, keyed by the script's content: the script
// (a few seconds, mostly importing torch) runs once per build tree, not once per test.
class WeightsTorchvision : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string script = testing::source_dir() + "/scripts/fixtures/torchvision_fixture.py";
    const auto key = std::hash<std::string>{}(testing::read_text(script));
    dir_ = new std::filesystem::path(std::filesystem::canonical("/proc/self/exe").parent_path() /
                                     ("fixtures-" + std::to_string(key)));
    if (std::filesystem::exists(*dir_ / "done")) return;
    auto probe = testing::run_shell(testing::python() + " -c 'import torch, torchvision' 2>&1");
    if (probe.exit_code != 0) {
      skip_reason_ = new std::string(testing::python() + " cannot import torch and torchvision: " + probe.output);
      return;
    }
    // Written aside and renamed into place, so concurrent test processes never see half a set.
    const std::filesystem::path staging = dir_->string() + ".tmp" + std::to_string(::getpid());
    std::filesystem::remove_all(staging);
    auto run = testing::run_shell(testing::python() + " " + script + " " + staging.string());
    if (run.exit_code != 0) {
      failure_ = new std::string(run.output);
      std::filesystem::remove_all(staging);
      return;
    }
    testing::write_text(staging / "done", "");
    std::error_code ec;
    std::filesystem::rename(staging, *dir_, ec);
    if (ec) std::filesystem::remove_all(staging);  // another process won the race: same content
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_) GTEST_SKIP() << *skip_reason_;
    if (failure_) FAIL() << "the fixture script failed:\n" << *failure_;
  }
  static std::filesystem::path file(const std::string& name) { return *dir_ / name; }

  // Loads `weights` into a fresh model and compares its eval-mode logits with Python's.
  static void expect_same_logits(const ModelSpec& s, const std::filesystem::path& weights, const std::string& io) {
    auto model = make_model(s);
    auto report = load_weights_file(*model, weights.string(), false, false);
    EXPECT_TRUE(report.complete()) << report.summary();
    EXPECT_TRUE(report.unexpected.empty()) << report.summary();
    auto ref = read_weights(file(io));
    model->eval();
    torch::NoGradGuard no_grad;
    auto logits = model->forward(*find(ref, "input"));
    const auto& expected = *find(ref, "logits");
    ASSERT_EQ(logits.sizes(), expected.sizes());
    EXPECT_LT((logits - expected).abs().max().item<double>(), 1e-4) << weights << "\n" << logits << "\n" << expected;
  }

  static std::filesystem::path* dir_;
  static std::string* skip_reason_;
  static std::string* failure_;
};

std::filesystem::path* WeightsTorchvision::dir_ = nullptr;
std::string* WeightsTorchvision::skip_reason_ = nullptr;
std::string* WeightsTorchvision::failure_ = nullptr;

TEST_F(WeightsTorchvision, Resnet18StateDictNamesAndOrderMatch) {
  auto sd = read_weights(file("resnet18.pt"));
  auto ours = model_state_dict(*make_model(spec("resnet18")));
  ASSERT_EQ(sd.size(), ours.size());
  for (std::size_t i = 0; i < sd.size(); ++i) {
    EXPECT_EQ(sd[i].first, ours[i].first);
    EXPECT_EQ(sd[i].second.sizes(), ours[i].second.sizes()) << sd[i].first;
    EXPECT_EQ(sd[i].second.scalar_type(), ours[i].second.scalar_type()) << sd[i].first;
  }
  // The same tensors through both formats.
  auto st = read_weights(file("resnet18.safetensors"));
  ASSERT_EQ(st.size(), sd.size());
  for (const auto& [name, t] : sd) EXPECT_TRUE(torch::equal(*find(st, name), t)) << name;
  EXPECT_EQ(find(sd, "bn1.num_batches_tracked")->item<std::int64_t>(), 3);  // three train-mode forwards
}

TEST_F(WeightsTorchvision, Resnet18LogitsMatchFromTorchSaveAndSafetensors) {
  expect_same_logits(spec("resnet18"), file("resnet18.pt"), "resnet18_io.pt");
  expect_same_logits(spec("resnet18"), file("resnet18.safetensors"), "resnet18_io.pt");
  auto nhwc = spec("resnet18");
  nhwc.channels_last = true;
  expect_same_logits(nhwc, file("resnet18.pt"), "resnet18_io.pt");
}

TEST_F(WeightsTorchvision, SmallCnnLogitsMatchFromCheckpointAndSafetensors) {
  auto s = spec("small_cnn");
  s.dropout = 0.2;
  expect_same_logits(s, file("small_cnn_ckpt.pt"), "small_cnn_io.pt");  // {"epoch", "model", "optimizer", ...}
  expect_same_logits(s, file("small_cnn.safetensors"), "small_cnn_io.pt");
  std::map<std::string, std::string> meta;
  read_safetensors(file("small_cnn.safetensors"), &meta);
  EXPECT_EQ(meta["source"], "fixture");
}

TEST_F(WeightsTorchvision, VitTinyLogitsMatchTimmLayout) {
  auto sd = read_weights(file("vit_tiny.pt"));
  auto ours = model_state_dict(*make_model(spec("vit_tiny", 5, 32)));
  ASSERT_EQ(sd.size(), ours.size());
  for (std::size_t i = 0; i < sd.size(); ++i) {
    EXPECT_EQ(sd[i].first, ours[i].first);
    EXPECT_EQ(sd[i].second.sizes(), ours[i].second.sizes()) << sd[i].first;
  }
  expect_same_logits(spec("vit_tiny", 5, 32), file("vit_tiny.pt"), "vit_tiny_io.pt");
  expect_same_logits(spec("vit_tiny", 5, 32), file("vit_tiny.safetensors"), "vit_tiny_io.pt");
}

TEST_F(WeightsTorchvision, TensorViewsAndDtypesFromTorchSave) {
  auto sd = read_weights(file("tensors.pt"));
  const auto base = torch::arange(12, at::kFloat).reshape({3, 4});
  EXPECT_TRUE(torch::equal(*find(sd, "base"), base));
  EXPECT_TRUE(torch::equal(*find(sd, "row"), base[1]));            // storage offset
  EXPECT_TRUE(torch::equal(*find(sd, "col"), base.select(1, 2)));  // offset + stride
  EXPECT_TRUE(torch::equal(*find(sd, "t"), base.t()));             // transposed strides
  EXPECT_TRUE(torch::equal(*find(sd, "half"), torch::tensor({1.5, -2.0}).to(at::kHalf)));
  EXPECT_TRUE(torch::equal(*find(sd, "bf16"), torch::tensor({0.5, 3.0}).to(at::kBFloat16)));
  EXPECT_EQ(find(sd, "f64")->scalar_type(), at::kDouble);
  EXPECT_DOUBLE_EQ((*find(sd, "f64"))[0].item<double>(), 1e-300);
  EXPECT_TRUE(torch::equal(*find(sd, "i32"), torch::tensor({-7, 70000}, at::kInt)));
  EXPECT_TRUE(torch::equal(*find(sd, "u8"), torch::tensor({0, 255}, at::kByte)));
  EXPECT_TRUE(torch::equal(*find(sd, "flags"), torch::tensor({true, false, true})));
  EXPECT_EQ(find(sd, "scalar")->dim(), 0);
  EXPECT_FLOAT_EQ(find(sd, "scalar")->item<float>(), 3.25f);
  EXPECT_EQ(find(sd, "empty")->sizes(), (std::vector<std::int64_t>{0, 3}));
}

TEST_F(WeightsTorchvision, PosEmbedResampleMatchesTimm) {
  auto sd = read_weights(file("pos_embed.pt"));
  const auto& src = *find(sd, "src");
  for (const char* name : {"to2", "to6"}) {
    const auto& expected = *find(sd, name);
    auto ours = detail::resample_pos_embed(src, expected.sizes());
    ASSERT_TRUE(ours.has_value());
    EXPECT_LT((*ours - expected).abs().max().item<double>(), 1e-5) << name;
  }
}

TEST_F(WeightsTorchvision, PickledModulesAndLegacyFilesAreRejected) {
  auto msg = data_error([&] { read_weights(file("module.pt")); });
  EXPECT_NE(msg.find("an object of class difficulty.SmallCNN"), std::string::npos) << msg;
  EXPECT_NE(msg.find("save model.state_dict()"), std::string::npos) << msg;
  msg = data_error([&] { read_weights(file("legacy.pt")); });
  EXPECT_NE(msg.find("legacy (non-zip) torch.save"), std::string::npos) << msg;
  EXPECT_NE(msg.find("legacy.pt"), std::string::npos) << msg;
  // A file that is the io dict, not a state dict of the model: loads, but nothing matches.
  auto model = make_model(spec("small_cnn"));
  auto report = load_weights(*model, read_weights(file("small_cnn_io.pt")), false);
  EXPECT_TRUE(report.loaded.empty());
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"input", "logits"}));
}

}  // namespace
}  // namespace shoplens
