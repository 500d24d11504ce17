#pragma once
// What the `d5 data` subcommands share: the options naming a dataset, and `d5 data bench`'s
// registration (cmd_data_bench.cpp).
#include <string>
#include <vector>

#include "cli_common.h"
#include "deep500/train/dataset.h"

namespace d5::cli {

struct DatasetArgs {
  std::string dataset, data_dir, split = "train";
  std::vector<std::string> set;  // KEY=VALUE format options
};
// --dataset (required), --data-dir, --split, --set.
void add_dataset_options(CLI::App& cmd, DatasetArgs& a);
// The spec the options name, with the global seed; InvalidArgument for a --set without "=".
DatasetSpec dataset_spec(const DatasetArgs& a, const GlobalOptions& g);

// `d5 data bench` under `data`; its Command joins `subcommands`.
void register_data_bench(CLI::App& data, const GlobalOptions& g, std::vector<Command>& subcommands);

}  // namespace d5::cli
