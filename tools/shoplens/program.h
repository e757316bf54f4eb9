// The whole `shoplens` command line: the table of verbs, each verb's options, the parse and the
// hand-over to the chosen verb. main() only adds the process set-up and the one catch of errors;
// the unit tests build a Program to read every verb's --help and to parse mistyped flags.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.h"

namespace shoplens::cli {

class Program {
 public:
  // Every verb of the table with its options declared and its --help tidied (tidy_help). `args`
  // (the command line after the program's name) is read only for `VERB --help --config FILE`,
  // whose help then shows FILE's values as the defaults (ConfigDefaultsForHelp).
  explicit Program(const std::vector<std::string>& args = {});
  CLI::App& app() { return app_; }
  // The verbs' subcommands, in the table's order.
  std::vector<CLI::App*> verbs() const;
  // Parses and runs the chosen verb; returns the exit code. Usage errors are reported here
  // (exit 2); errors a verb throws go up to main's catch.
  int run(int argc, char** argv);
  // After a parse: the verb on the command line (the program's own app when none), and the
  // arguments the parse left over (the ones an ExtrasError complains of).
  const CLI::App& parsed_verb() const;
  std::vector<std::string> unexpected_arguments() const;

 private:
  int report_parse_error(const CLI::ParseError& error);

  CLI::App app_;
  bool show_version_ = false;
  std::vector<std::pair<CLI::App*, std::unique_ptr<Command>>> commands_;
};

// The verb names of the table, for the unknown-verb hint.
std::vector<std::string> command_names();

// Help shows what a user types and the defaults: no validator descriptions (CLI11 appends them
// to the type, "INT:a finite number > 0", "TEXT:FILE"), no "=[]" for an empty list. Applied to
// every option of `app` and its subcommands.
void tidy_help(CLI::App& app);

// The message for arguments the parse of `verb` did not take: each unknown option with the
// nearest option name of that verb ("unknown option '--epoch' (did you mean '--epochs'?)").
std::string unexpected_arguments_message(const CLI::App& verb, const std::vector<std::string>& extras);

}  // namespace shoplens::cli
