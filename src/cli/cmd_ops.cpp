// d5 ops: Level 0 operators. `d5 ops list` prints the coverage table (op x backend x
// forward/backward) of the implementations built into this binary; `d5 ops bench` is in
// cmd_ops_bench.cpp.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/op_traits.h"

namespace d5::cli {

namespace {
using nlohmann::json;

struct Cell {
  bool forward = false, backward = false;
  std::vector<std::string> implementations, notes;
};

std::string cell_text(const Cell& c) {
  if (!c.forward) return "-";
  return c.backward ? "fwd+bwd" : "fwd";
}

json coverage(const std::vector<std::string>& backends, std::map<std::string, std::map<std::string, Cell>>& table) {
  const auto& reg = OpRegistry::global();
  json ops = json::array();
  for (const auto& op : reg.op_types()) {
    json entry = {{"op", op}, {"backends", json::object()}};
    // What the type is, whatever implements it (op_traits.h); null for a type nobody described.
    if (const auto t = op_traits(op)) entry["traits"] = {{"onnx_since", t->onnx_since}, {"numerics", to_string(t->numerics)}};
    else entry["traits"] = nullptr;
    for (const auto& b : backends) {
      Cell c;
      for (const auto& impl : reg.implementations(op, b)) {
        c.forward = true;
        c.backward |= impl->backward;
        c.implementations.push_back(impl->name);
        if (!impl->notes.empty()) c.notes.push_back(impl->name + ": " + impl->notes);
      }
      if (!c.forward) continue;
      table[op][b] = c;
      entry["backends"][b] = {{"forward", c.forward}, {"backward", c.backward},
                              {"implementations", c.implementations}, {"notes", c.notes}};
    }
    if (!entry["backends"].empty()) ops.push_back(entry);
  }
  return ops;
}
}  // namespace

Command register_ops(CLI::App& app, const GlobalOptions& g) {
  auto* ops = app.add_subcommand("ops", "Level 0: operators (list, bench, overhead)");
  ops->require_subcommand(1);
  auto more = std::make_shared<std::vector<Command>>();
  register_ops_bench(*ops, g, *more);
  register_ops_overhead(*ops, g, *more);
  auto* list = ops->add_subcommand("list", "Coverage table: operator x backend x forward/backward");
  struct Opts {
    OutputOptions out;
    std::string backend;
    bool why = false;
  };
  auto o = std::make_shared<Opts>();
  list->add_option("--backend", o->backend, "Only this backend");
  list->add_flag("--why", o->why, "Show each implementation's limits and refusal conditions");
  list->add_option("--format", o->out.format, "Output format")
      ->check(CLI::IsMember({"console", "json", "markdown"}))
      ->default_val("console");
  list->add_option("-o,--output", o->out.output, "Write to FILE (atomically) instead of stdout");

  return {ops, [o, more]() -> int {
            for (const auto& c : *more)
              if (c.app->parsed()) return c.run();
            register_builtin_operators();
            std::vector<std::string> names;
            for (const auto& b : backends()) names.push_back(b.name);
            if (!o->backend.empty()) {
              D5_CHECK_ARG(std::find(names.begin(), names.end(), o->backend) != names.end(),
                           "unknown backend '{}' (this binary has: {})", o->backend, fmt::join(names, ", "));
              names = {o->backend};
            }
            std::map<std::string, std::map<std::string, Cell>> table;
            const json j = {{"backends", names}, {"ops", coverage(names, table)}};

            std::string text;
            const bool md = o->out.format == "markdown";
            if (md) {
              text += "| op |";
              for (const auto& b : names) text += " " + b + " |";
              text += "\n|---|";
              for (size_t i = 0; i < names.size(); ++i) text += "---|";
              text += "\n";
            } else {
              text += fmt::format("{:<28}", "op");
              for (const auto& b : names) text += fmt::format("{:<11}", b);
              text += "\n";
            }
            std::map<std::string, int> fwd, bwd;
            for (const auto& [op, cells] : table) {
              text += md ? "| " + op + " |" : fmt::format("{:<28}", op);
              for (const auto& b : names) {
                auto it = cells.find(b);
                const Cell c = it == cells.end() ? Cell{} : it->second;
                fwd[b] += c.forward;
                bwd[b] += c.backward;
                text += md ? " " + cell_text(c) + " |" : fmt::format("{:<11}", cell_text(c));
              }
              text += "\n";
              if (o->why && !md)
                for (const auto& [b, c] : cells)
                  for (const auto& n : c.notes) text += fmt::format("    {}/{}\n", b, n);
            }
            if (!md) {
              text += fmt::format("{:<28}", fmt::format("{} operators", table.size()));
              for (const auto& b : names) text += fmt::format("{:<11}", fmt::format("{}/{}", fwd[b], bwd[b]));
              text += "\n";
            }
            emit_text(text, j, o->out);
            return kExitOk;
          }};
}

}  // namespace d5::cli
