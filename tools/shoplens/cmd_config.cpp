// `shoplens config`: the resolved config, or the schema of every key with its default.
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.h"

namespace shoplens::cli {
namespace {

class ConfigCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    app.add_flag("--schema", schema_, "list every config key with its type, default and meaning");
  }

  int run() override {
    if (schema_) {
      for (const auto& f : config_fields())
        std::cout << f.path << " (" << f.type << ", default " << f.default_json << "): " << f.help << "\n";
      return 0;
    }
    Config config = options_.resolve();
    std::cout << config_to_json(config).dump(2) << std::endl;
    return 0;
  }

 private:
  ConfigOptions options_;
  bool schema_ = false;
};

}  // namespace

std::unique_ptr<Command> make_config_command() { return std::make_unique<ConfigCommand>(); }

}  // namespace shoplens::cli
