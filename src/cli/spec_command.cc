// `dataecho spec`: every source, stage, map function and filter with its declared options
// (spec/schema.h), as JSON; scripts/gen_spec.py turns it into docs/spec.md.
#include <iostream>

#include "commands.h"
#include "dataecho/spec/registry.h"

namespace dataecho::cli {

void add_spec_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "spec",
      "print the spec format's declarations as JSON: every source, stage, map function "
      "and filter with its options, types, defaults and bounds (docs/spec.md)");
  auto op = std::make_shared<std::string>();
  cmd->add_option("name", *op, "only this source kind, op, map function or filter");
  cmd->callback([op] {
    nlohmann::json all = registry_schema();
    if (op->empty()) {
      std::cout << all.dump(2) << "\n";
      return;
    }
    nlohmann::json found = nlohmann::json::array();
    for (const char* group : {"sources", "stages", "map_functions", "filters"})
      for (const auto& s : all[group])
        if (s["name"] == *op) found.push_back({{"group", group}, {"schema", s}});
    if (found.empty())
      throw Error(ErrorCode::kInvalidArgument, "spec", "nothing is named \"" + *op + "\"");
    std::cout << (found.size() == 1 ? found[0] : found).dump(2) << "\n";
  });
}

}  // namespace dataecho::cli
