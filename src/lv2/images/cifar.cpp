// CIFAR-10 / CIFAR-100 binary version (https://www.cs.toronto.edu/~kriz/cifar.html): fixed-size
// records of label byte(s) + 3072 bytes (1024 red, 1024 green, 1024 blue, rows of 32), read from
// the official .tar.gz (decompressed once into memory) or from the extracted .bin files.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "lv2/images/tar_archive.h"
#include "image_common.h"
#include "register_images.h"

namespace d5::images {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kPixels = 3 * 32 * 32;

struct CifarLayout {
  std::string name;
  std::string archive;                 // official archive name
  std::string folder;                  // its top-level directory
  std::vector<std::string> train, test;  // .bin files per split
  int64_t label_bytes = 1;
};

CifarLayout layout(bool cifar100) {
  if (cifar100) return {"cifar100", "cifar-100-binary.tar.gz", "cifar-100-binary", {"train.bin"}, {"test.bin"}, 2};
  return {"cifar10",
          "cifar-10-binary.tar.gz",
          "cifar-10-batches-bin",
          {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
          {"test_batch.bin"},
          1};
}

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) D5_THROW(IoError, "cannot open '{}'", p.string());
  in.seekg(0, std::ios::end);
  std::vector<uint8_t> data(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!in) D5_THROW(IoError, "reading '{}' failed", p.string());
  return data;
}

class CifarDataset final : public Dataset {
 public:
  CifarDataset(const DatasetSpec& spec, bool cifar100) : cifar100_(cifar100) {
    const data::DatasetOptions options(spec, spec.name, {"label"});
    options.check_all_known();
    check_split(spec);
    const CifarLayout l = layout(cifar100);
    name_ = l.name;
    record_ = l.label_bytes + kPixels;
    const std::string label = options.get_string("label", "fine");
    D5_CHECK_ARG(label == "fine" || label == "coarse", "dataset '{}': label must be 'fine' or 'coarse', got '{}'",
                 spec.name, label);
    D5_CHECK_ARG(cifar100 || label == "fine", "dataset 'cifar10' has one label per image; option label is for cifar100");
    label_byte_ = cifar100 && label == "fine" ? 1 : 0;
    classes_ = !cifar100 ? 10 : (label == "fine" ? 100 : 20);
    // Without --data-dir: where `d5 data download cifar10|cifar100` puts the archive.
    load(fs::path(data::data_dir_for(spec)), l, spec.split == "train" ? l.train : l.test);
  }

  std::string name() const override { return name_; }
  int64_t size() const override { return count_; }
  int64_t classes() const override { return classes_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{3, 32, 32}, Layout::any}},
            {kDataLabels, TensorDesc{DType::i64, Shape{}, Layout::any}}};
  }

  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Tensor input = Tensor::uninitialized(TensorDesc{DType::f32, Shape{n, 3, 32, 32}, Layout::any});
    Tensor labels = Tensor::uninitialized(TensorDesc{DType::i64, Shape{n}, Layout::any});
    float* x = input.data_as<float>();
    int64_t* y = labels.data_as<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* r = record(indices[static_cast<size_t>(i)]);
      y[i] = r[label_byte_];
      const uint8_t* px = r + (record_ - kPixels);
      for (int64_t k = 0; k < kPixels; ++k) x[i * kPixels + k] = static_cast<float>(px[k]) * (1.0f / 255.0f);
    }
    return {{kDataInput, std::move(input)}, {kDataLabels, std::move(labels)}};
  }

  int64_t label(int64_t index) const override { return record(index)[label_byte_]; }

 private:
  const uint8_t* record(int64_t index) const {
    D5_CHECK_ARG(index >= 0 && index < count_, "dataset '{}': index {} outside [0, {})", name_, index, count_);
    return data_.data() + static_cast<size_t>(index * record_);
  }

  // Looks for the .bin files in data_dir, data_dir/<folder>, then inside data_dir/<archive>.
  void load(const fs::path& dir, const CifarLayout& l, const std::vector<std::string>& files) {
    std::vector<fs::path> found;
    for (const auto& f : files) {
      for (const fs::path& p : {dir / f, dir / l.folder / f}) {
        if (fs::is_regular_file(p)) {
          found.push_back(p);
          break;
        }
      }
    }
    if (found.size() == files.size()) {
      for (const auto& p : found) append(read_file(p), p.string());
    } else {
      const fs::path archive = fs::is_regular_file(dir) ? dir : dir / l.archive;
      D5_CHECK(fs::is_regular_file(archive), IoError,
               "dataset '{}': neither {} nor the extracted {} found in '{}' (run 'd5 data download {}', or pass "
               "--data-dir with the directory holding them)",
               l.name, l.archive, fmt::join(files, ", "), dir.string(), l.name);
      std::map<std::string, std::vector<uint8_t>> members;
      TarReader reader(archive.string());
      TarMember m;
      while (reader.next(m)) {
        if (!m.regular_file()) continue;
        const std::string base = fs::path(m.path).filename().string();
        if (std::find(files.begin(), files.end(), base) != files.end()) members[base] = reader.read_data();
      }
      for (const auto& f : files) {
        auto it = members.find(f);
        D5_CHECK(it != members.end(), FormatError, "dataset '{}': archive '{}' has no member {}", l.name,
                 archive.string(), f);
        append(it->second, archive.string() + ":" + f);
      }
    }
  }

  void append(const std::vector<uint8_t>& bytes, const std::string& where) {
    const auto whole = static_cast<int64_t>(bytes.size()) / record_;
    D5_CHECK(static_cast<int64_t>(bytes.size()) % record_ == 0 && whole > 0, FormatError,
             "dataset '{}': '{}' is {} bytes, not a whole number of {}-byte records (truncated at offset {})", name_,
             where, bytes.size(), record_, whole * record_);
    for (int64_t r = 0; r < whole; ++r) {
      for (int64_t b = 0; b < record_ - kPixels; ++b) {
        const uint8_t v = bytes[static_cast<size_t>(r * record_ + b)];
        const int64_t limit = !cifar100_ ? 10 : (b == 0 ? 20 : 100);
        D5_CHECK(v < limit, FormatError, "dataset '{}': '{}' has label {} at offset {} (expected < {})", name_, where,
                 v, r * record_ + b, limit);
      }
    }
    data_.insert(data_.end(), bytes.begin(), bytes.end());
    count_ += whole;
  }

  bool cifar100_;
  std::string name_;
  int64_t record_ = 0, label_byte_ = 0, classes_ = 0, count_ = 0;
  std::vector<uint8_t> data_;
};

}  // namespace

void register_cifar() {
  register_dataset("cifar10", "CIFAR-10 binary version (cifar-10-binary.tar.gz or its .bin files); input f32 [3,32,32]",
                   [](const DatasetSpec& s) { return std::make_unique<CifarDataset>(s, false); });
  register_dataset("cifar100",
                   "CIFAR-100 binary version (cifar-100-binary.tar.gz or train.bin/test.bin); fine labels, "
                   "label=coarse for the 20 superclasses",
                   [](const DatasetSpec& s) { return std::make_unique<CifarDataset>(s, true); });
}

}  // namespace d5::images
