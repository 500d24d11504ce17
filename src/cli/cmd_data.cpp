// d5 data: the dataset formats and downloadable sets (list), downloads with verification
// (download), and what a dataset holds (info).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "data_cli.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/train/downloader.h"
#include "deep500/core/error.h"

namespace d5::cli {

namespace {
using nlohmann::json;

int run_list(const OutputOptions& out) {
  register_builtin_datasets();
  json formats = json::array(), sets = json::array();
  std::string text = "Formats (--dataset NAME):\n";
  for (const auto& [name, description] : dataset_formats()) {
    text += fmt::format("  {:<22}{}\n", name, description);
    formats.push_back({{"name", name}, {"description", description}});
  }
  text += fmt::format("\nDownloadable (d5 data download NAME{}):\n",
                      download_supported() ? "" : "; this build has no libcurl, so downloads are refused");
  for (const auto& d : download_catalog()) {
    json files = json::array();
    std::vector<std::string> splits;
    for (const auto& f : d.files) {
      files.push_back({{"name", f.name},
                       {"split", f.split},
                       {"checksum_kind", f.sha256.empty() ? "md5" : "sha256"},
                       {"checksum", f.sha256.empty() ? f.md5 : f.sha256}});
      if (std::find(splits.begin(), splits.end(), f.split) == splits.end()) splits.push_back(f.split);
    }
    text += fmt::format("  {:<22}{}\n  {:<22}from {}\n", d.name, d.description, "", fmt::join(d.base_urls, " or "));
    sets.push_back({{"name", d.name}, {"description", d.description}, {"base_urls", d.base_urls}, {"files", files}});
  }
  emit_text(text, json{{"formats", formats}, {"downloadable", sets}, {"download_supported", download_supported()}},
            out);
  return kExitOk;
}

struct DownloadArgs {
  std::string name, dir, mirror, split = "all";
  OutputOptions out;
};

int run_download(const DownloadArgs& a) {
  DownloadOptions o;
  o.dir = a.dir.empty() ? default_data_dir(a.name) : a.dir;
  o.mirror = a.mirror;
  o.split = a.split;
  o.progress = isatty(STDERR_FILENO) != 0;
  const std::vector<DownloadedFile> files = download_dataset(a.name, o);
  json list = json::array();
  std::string text;
  for (const auto& f : files) {
    list.push_back({{"name", f.name},
                    {"path", f.path},
                    {"url", f.url},
                    {"fetched", f.fetched},
                    {"resumed", f.resumed},
                    {"bytes_transferred", f.bytes_transferred},
                    {"size", f.size},
                    {"checksum_kind", f.checksum_kind},
                    {"checksum", f.checksum},
                    {"seconds", f.seconds}});
    const std::string how = !f.fetched ? "already present" : f.resumed ? "resumed" : "downloaded";
    text += fmt::format("{:<28} {:>12} bytes  {:<16} {} {} verified\n", f.name, f.size, how, f.checksum_kind,
                        f.checksum);
  }
  text += fmt::format("{} file(s) in {}\n", files.size(), o.dir);
  emit_text(text, json{{"dataset", a.name}, {"dir", o.dir}, {"split", a.split}, {"files", list}}, a.out);
  return kExitOk;
}

struct InfoArgs {
  DatasetArgs ds;
  OutputOptions out;
};

int run_info(const InfoArgs& a, const GlobalOptions& g) {
  const DatasetSpec spec = dataset_spec(a.ds, g);
  const auto ds = open_dataset(spec);
  json samples = json::object();
  std::string text = fmt::format("dataset   {} (split {})\nsamples   {}\nclasses   {}\n", ds->name(), spec.split,
                                 ds->size(), ds->classes());
  for (const auto& [name, desc] : ds->sample_descs()) {
    samples[name] = {{"dtype", std::string(to_string(desc.dtype))}, {"shape", desc.shape.dims()}};
    text += fmt::format("{:<{}}{} per sample\n", name, std::max<size_t>(10, name.size() + 2), desc.to_string());
  }
  json j{{"dataset", ds->name()},
         {"format", spec.name},
         {"split", spec.split},
         {"data_dir", spec.data_dir},
         {"options", spec.options},
         {"size", ds->size()},
         {"classes", ds->classes()},
         {"samples", samples}};
  if (ds->classes() > 0) {
    std::vector<int64_t> histogram(static_cast<size_t>(ds->classes()));
    for (int64_t i = 0; i < ds->size(); ++i) {
      const int64_t y = ds->label(i);
      D5_CHECK(y >= 0 && y < ds->classes(), FormatError, "{}: sample {} has label {}, outside its {} classes",
               ds->name(), i, y, ds->classes());
      ++histogram[static_cast<size_t>(y)];
    }
    j["label_histogram"] = histogram;
    text += "histogram class: count\n";
    // A text set's classes are its vocabulary while its label() is a stratum (a digit count, a
    // lexicographer file): the console leaves the empty rows of a long histogram out, JSON keeps all.
    const bool long_histogram = histogram.size() > 20;
    for (size_t c = 0; c < histogram.size(); ++c)
      if (!long_histogram || histogram[c] > 0) text += fmt::format("{:>14}: {}\n", c, histogram[c]);
    if (long_histogram) text += "(classes without a sample left out)\n";
  }
  emit_text(text, j, a.out);
  return kExitOk;
}

// Every sample of the split as the npy format reads it back: DIR/inputs.npy [N, ...] and
// DIR/labels.npy [N, ...], in the dataset's own dtypes (a text set's ids stay i64), and any
// further tensor of the set as DIR/NAME.npy.
int run_export(const InfoArgs& a, const std::string& dir, const GlobalOptions& g) {
  const DatasetSpec spec = dataset_spec(a.ds, g);
  const auto ds = open_dataset(spec);
  const auto descs = ds->sample_descs();
  const int64_t n = ds->size();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  D5_CHECK(!ec, IoError, "cannot create '{}': {}", dir, ec.message());
  json files = json::object();
  std::string text = fmt::format("{} (split {}): {} samples\n", ds->name(), spec.split, n);
  // inputs.npy and labels.npy first (what --dataset npy reads back), then any other tensor the set
  // produces as NAME.npy (a translation set's decoder_input.npy).
  std::vector<std::pair<std::string, std::string>> tensors = {{kDataInput, "inputs.npy"}, {kDataLabels, "labels.npy"}};
  for (const auto& [name, desc] : descs)
    if (name != kDataInput && name != kDataLabels) tensors.emplace_back(name, name + ".npy");
  for (const auto& [name, file] : tensors) {
    const auto d = descs.find(name);
    D5_CHECK_ARG(d != descs.end(), "dataset '{}' produces no '{}' tensor to export", ds->name(), name);
    std::vector<int64_t> dims = {n};
    for (int64_t e : d->second.shape.dims()) dims.push_back(e);
    Tensor all(d->second.dtype, Shape(dims));
    const int64_t row_bytes = static_cast<int64_t>(all.bytes()) / std::max<int64_t>(n, 1);
    constexpr int64_t kChunk = 1024;
    for (int64_t begin = 0; begin < n; begin += kChunk) {
      std::vector<int64_t> indices;
      for (int64_t i = begin; i < std::min(n, begin + kChunk); ++i) indices.push_back(i);
      const Batch b = ds->fetch(indices);
      const Tensor& t = b.at(name);
      D5_CHECK(t.dtype() == all.dtype() && static_cast<int64_t>(t.bytes()) == row_bytes * static_cast<int64_t>(indices.size()),
               Internal, "{}: fetch gave '{}' as {} for {} samples", ds->name(), name, t.desc().to_string(),
               indices.size());
      std::memcpy(static_cast<char*>(all.data()) + begin * row_bytes, t.data(), t.bytes());
    }
    const std::string path = (std::filesystem::path(dir) / file).string();
    write_npy_file(path, all);
    files[name] = {{"path", path}, {"dtype", std::string(to_string(all.dtype()))}, {"shape", dims}};
    text += fmt::format("  {:<13} -> {} {}\n", name, path, all.desc().to_string());
  }
  emit_text(text, json{{"dataset", ds->name()}, {"split", spec.split}, {"size", n}, {"classes", ds->classes()},
                       {"vocabulary", ds->vocabulary()}, {"end_token", ds->end_token()}, {"files", files}},
            a.out);
  return kExitOk;
}

}  // namespace

void add_dataset_options(CLI::App& cmd, DatasetArgs& a) {
  cmd.add_option("--dataset", a.dataset, "Dataset format (see 'd5 data list')")->required();
  cmd.add_option("--data-dir", a.data_dir, "Directory or file of the data (default: the download cache)");
  cmd.add_option("--split", a.split, "train or test")->default_val("train");
  cmd.add_option("--set", a.set, "Format option KEY=VALUE (repeatable), e.g. --set range=0:8000")
      ->allow_extra_args(false);
}

DatasetSpec dataset_spec(const DatasetArgs& a, const GlobalOptions& g) {
  register_builtin_datasets();
  DatasetSpec spec;
  spec.name = a.dataset;
  spec.data_dir = a.data_dir;
  spec.split = a.split;
  spec.seed = g.seed;
  for (const auto& kv : a.set) {
    const auto [key, value] = split_key_value(kv, "--set");
    spec.options[key] = value;
  }
  return spec;
}

Command register_data(CLI::App& app, const GlobalOptions& g) {
  auto* data = app.add_subcommand("data", "Level 2: datasets (list formats and sets, download, info, export, bench)");
  data->require_subcommand(1);
  auto more = std::make_shared<std::vector<Command>>();
  register_data_bench(*data, g, *more);

  auto* list = data->add_subcommand("list", "Dataset formats, and the sets 'd5 data download' fetches");
  auto list_out = std::make_shared<OutputOptions>();
  add_output_options(*list, *list_out);

  auto* download = data->add_subcommand("download", "Download a dataset into the cache and verify its checksums");
  auto d = std::make_shared<DownloadArgs>();
  download->add_option("name", d->name, "mnist, fashion-mnist, cifar10 or cifar100 (see 'd5 data list')")->required();
  download->add_option("--dir", d->dir, "Directory for the files (default: $D5_DATA_DIR/NAME, else ~/.cache/deep500/NAME)");
  download->add_option("--mirror", d->mirror,
                       "Base URL to fetch from instead of the canonical one (file name appended; default: "
                       "$D5_DATA_MIRROR); file:// works");
  download->add_option("--split", d->split, "Which files: train, test or all")
      ->check(CLI::IsMember({"train", "test", "all"}))
      ->default_val("all");
  add_output_options(*download, d->out);

  auto* info = data->add_subcommand("info", "Size, per-sample shapes, classes and label histogram of a dataset");
  auto i = std::make_shared<InfoArgs>();
  add_dataset_options(*info, i->ds);
  add_output_options(*info, i->out);

  auto* exp = data->add_subcommand(
      "export", "Write a dataset split as inputs.npy and labels.npy (what --dataset npy reads back)");
  auto e = std::make_shared<InfoArgs>();
  auto export_dir = std::make_shared<std::string>();
  add_dataset_options(*exp, e->ds);
  exp->add_option("--to", *export_dir, "Directory to write inputs.npy and labels.npy into")->required();
  add_output_options(*exp, e->out);

  return {data, [more, list, download, info, exp, list_out, d, i, e, export_dir, &g]() -> int {
            for (const auto& c : *more)
              if (c.app->parsed()) return c.run();
            if (list->parsed()) return run_list(*list_out);
            if (download->parsed()) return run_download(*d);
            if (info->parsed()) return run_info(*i, g);
            if (exp->parsed()) return run_export(*e, *export_dir, g);
            return kExitUsage;
          }};
}

}  // namespace d5::cli
