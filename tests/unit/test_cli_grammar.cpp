// The command line's grammar, on the real verbs built in process (tools/shoplens/program.h): what
// every verb's --help shows, the defaults it names, and the hint for a mistyped flag. Checks look
// for what a user reads, never for one CLI11 version's layout.
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "program.h"
#include "shoplens/core/errors.h"
#include "test_util.h"

namespace shoplens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

CLI::App& verb(cli::Program& program, const std::string& name) {
  for (CLI::App* v : program.verbs())
    if (v->get_name() == name) return *v;
  throw std::runtime_error("no verb " + name);
}

// The help text from `option`'s entry (a line that starts with its names) up to the next entry.
std::string entry_of(const std::string& help, const std::string& long_name) {
  std::smatch match;
  if (!std::regex_search(help, match, std::regex("\n[ \t]+(-[a-zA-Z],)?" + long_name + "(?![a-z-])"))) return {};
  const auto start = static_cast<std::size_t>(match.position(0)) + 1;
  const auto next = help.find("\n  -", start);
  return help.substr(start, next == std::string::npos ? std::string::npos : next - start);
}

TEST(CliHelp, NoVerbShowsValidatorText) {
  cli::Program program;
  ASSERT_EQ(program.verbs().size(), cli::command_names().size());
  for (CLI::App* v : program.verbs()) {
    const std::string help = v->help();
    for (const char* leak : {"=[]", "{false}", "{true}", "TEXT:", "INT:", "UINT:", "FLOAT:", "NUMBER:", "BOOL:",
                             ":FILE", ":DIR", ":PATH", ":{", " in [", "finite number", "thread count from"})
      EXPECT_THAT(help, Not(HasSubstr(leak))) << v->get_name() << " --help shows '" << leak << "':\n" << help;
  }
}

TEST(CliHelp, EveryOptionWithADefaultShowsIt) {
  cli::Program program;
  for (CLI::App* v : program.verbs()) {
    const std::string help = v->help();
    for (const CLI::Option* option : v->get_options()) {
      if (option->get_group().empty() || option->get_lnames().empty() || option->get_type_size() == 0) continue;
      const std::string name = "--" + option->get_lnames().front();
      const std::string entry = entry_of(help, name);
      ASSERT_FALSE(entry.empty()) << v->get_name() << " --help has no entry for " << name << ":\n" << help;
      EXPECT_THAT(entry, HasSubstr(option->get_default_str())) << v->get_name() << " " << name;
    }
  }
  // The rule's point: the values a user gets without the flag are on the page.
  const std::string train = verb(program, "train").help();
  EXPECT_THAT(entry_of(train, "--epochs"), HasSubstr("10"));
  EXPECT_THAT(entry_of(train, "--lr"), HasSubstr("0.001"));
}

TEST(CliHelp, TrainHelpSaysItsDefaultsAreTheBuiltInOnes) {
  cli::Program program;
  EXPECT_THAT(verb(program, "train").help(), HasSubstr("built-in"));
  EXPECT_THAT(verb(program, "prepare").help(), HasSubstr("built-in"));
}

TEST(CliHelp, HelpWithAConfigShowsThatConfigsValuesAsTheDefaults) {
  testing::ScratchDir dir("cli-help-config");
  const std::string config = (dir / "c.json").string();
  testing::write_text(config, R"({"train": {"epochs": 15}, "optim": {"lr": 0.003}})");
  cli::Program program({"train", "--help", "--config", config});
  const std::string help = verb(program, "train").help();
  EXPECT_THAT(entry_of(help, "--epochs"), HasSubstr("15"));
  EXPECT_THAT(entry_of(help, "--lr"), HasSubstr("0.003"));
  EXPECT_THAT(entry_of(help, "--precision"), HasSubstr("fp32"));  // a key the file leaves: the built-in value
  EXPECT_THAT(help, HasSubstr(config));
  // Only the verb being helped, and only for that command line: a later program is back to the built-in ones.
  EXPECT_THAT(entry_of(verb(program, "find-batch").help(), "--precision"), HasSubstr("fp32"));
  cli::Program later;
  EXPECT_THAT(entry_of(verb(later, "train").help(), "--epochs"), HasSubstr("10"));
}

std::string unexpected_arguments(cli::Program& program, std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("shoplens")};
  for (auto& a : args) argv.push_back(a.data());
  try {
    program.app().parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ExtrasError&) {
    return cli::unexpected_arguments_message(program.parsed_verb(), program.unexpected_arguments());
  }
  return "(parsed)";
}

TEST(CliGrammar, AMistypedFlagGetsTheNearestFlagOfItsVerb) {
  cli::Program program;
  const std::string message = unexpected_arguments(program, {"train", "--epoch", "1"});
  EXPECT_THAT(message, HasSubstr("unknown option '--epoch'"));
  EXPECT_THAT(message, HasSubstr("did you mean '--epochs'"));
  EXPECT_THAT(message, HasSubstr("shoplens train --help"));
}

TEST(CliGrammar, AFarOffFlagGetsNoGuessAndAValueIsNoFlag) {
  cli::Program program;
  const std::string message = unexpected_arguments(program, {"serve", "--zzzzzzzz=3"});
  EXPECT_THAT(message, HasSubstr("unknown option '--zzzzzzzz'"));
  EXPECT_THAT(message, Not(HasSubstr("did you mean")));
  CLI::App& serve = verb(program, "serve");
  EXPECT_THAT(cli::unexpected_arguments_message(serve, {"-1"}), HasSubstr("unexpected arguments: -1"));
}

TEST(CliGrammar, OldSpellingsAreHiddenFromHelpAndFromHints) {
  cli::Program program;
  EXPECT_THAT(verb(program, "predict").help(), Not(HasSubstr("--arch")));
  EXPECT_THAT(verb(program, "find-batch").help(), Not(HasSubstr("--json")));
  EXPECT_THAT(verb(program, "bench-train").help(), Not(HasSubstr("--warmup ")));
  EXPECT_THAT(cli::unexpected_arguments_message(verb(program, "predict"), {"--arc"}), Not(HasSubstr("'--arch'")));
}

TEST(CliGrammar, ModelIsAPathOnlyWhenItIsNoModelNameAndLooksLikeWeights) {
  testing::ScratchDir dir("cli-old-model");
  EXPECT_FALSE(cli::is_old_model_path("resnet18"));
  EXPECT_FALSE(cli::is_old_model_path("no_such_thing"));
  EXPECT_FALSE(cli::is_old_model_path(""));
  EXPECT_TRUE(cli::is_old_model_path(dir.path().string()));
  EXPECT_TRUE(cli::is_old_model_path("absent/w.safetensors"));
  EXPECT_TRUE(cli::is_old_model_path("absent/w.PTH"));
  EXPECT_TRUE(cli::is_old_model_path("absent/last.ckpt"));
}

TEST(CliGrammar, TheWeightsAreGivenOnce) {
  testing::ScratchDir dir("cli-weights");
  std::string model = "resnet18";
  EXPECT_EQ(cli::weights_path("predict", "w.pth", model), "w.pth");
  EXPECT_EQ(model, "resnet18");
  model = dir.path().string();
  EXPECT_EQ(cli::weights_path("predict", "", model), dir.path());
  EXPECT_TRUE(model.empty()) << "a path names no architecture";
  model = dir.path().string();
  EXPECT_THAT([&] { cli::weights_path("predict", "w.pth", model); },
              ThrowsMessage<UsageError>(HasSubstr("give the weights once")));
  model.clear();
  EXPECT_THAT([&] { cli::weights_path("predict", "", model); }, ThrowsMessage<UsageError>(HasSubstr("--weights")));
  EXPECT_THAT([] { cli::exported_model_folder("serve", "m", "resnet18"); },
              ThrowsMessage<UsageError>(HasSubstr("--weights DIR")));
}

}  // namespace
}  // namespace shoplens
