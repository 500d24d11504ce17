#pragma once
// Level 2: datasets (docs/datasets.md).
//
// A Dataset is an indexable collection of samples. fetch(indices) assembles a batch: one tensor
// per name, each shaped [indices.size(), ...per-sample shape]. Names follow the model zoo
// ("input" for the samples, "labels" for int64 class labels), so a batch feeds a zoo network with
// a loss directly. Datasets are immutable once opened: fetch and label are const and must be safe
// to call from several threads at once (loaders decode in parallel and prefetch).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deep500/core/tensor.h"

namespace d5 {

using Batch = std::map<std::string, Tensor>;

inline constexpr const char* kDataInput = "input";
inline constexpr const char* kDataLabels = "labels";
// A sequence-to-sequence set's decoder input: the target shifted right behind a start token
// (teacher forcing); greedy decoding overwrites it with the model's own predictions.
inline constexpr const char* kDataDecoderInput = "decoder_input";

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  virtual int64_t size() const = 0;
  // Per-sample descriptors (no batch dimension) of every tensor fetch produces.
  virtual std::map<std::string, TensorDesc> sample_descs() const = 0;
  // Number of classes of a classification set; 0 when the set has no class labels.
  virtual int64_t classes() const = 0;
  // InvalidArgument for an index outside [0, size()); FormatError naming the file and offset
  // when the underlying data turns out to be corrupt.
  virtual Batch fetch(std::span<const int64_t> indices) const = 0;
  // The class label of one sample without decoding it (samplers and DatasetBias use it). The
  // default fetches the sample; formats that keep labels apart override it.
  virtual int64_t label(int64_t index) const;
  // Length of a variable-length sample (tokens, frames) for bucketing; 0 for fixed-size samples.
  virtual int64_t sample_length(int64_t /*index*/) const { return 0; }
  // Token ids of a text set's input lie in [0, vocabulary()); 0 for sets whose input is not ids.
  virtual int64_t vocabulary() const { return 0; }
  // Per class, for a set whose classes are a text vocabulary's pieces (a language model's
  // targets): whether the piece begins a word. Empty for every other set. Per-word perplexity
  // counts words by it (quality.h).
  virtual std::vector<bool> word_starts() const { return {}; }
  // The id that ends a target sequence in the labels of a sequence-to-sequence set (a decoder
  // stops there); -1 for every other set.
  virtual int64_t end_token() const { return -1; }
};

// A per-batch transformation a loader applies after fetch (augmentation, normalization). Random
// choices must be a pure function of (the transform's seed, epoch, sample index), never of
// thread timing or batch composition, so runs are reproducible and resumable. apply may be
// called from several threads at once on different batches.
class BatchTransform {
 public:
  virtual ~BatchTransform() = default;
  virtual std::string describe() const = 0;
  virtual void apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const = 0;
};

// What `--dataset NAME --data-dir DIR` opens. options carries format-specific settings as
// strings ("image_size" = "224", "classes" = "10", "samples" = "1000", ...); an option the format
// does not know is an InvalidArgument listing the ones it does.
struct DatasetSpec {
  std::string name;      // a registered format: "mnist", "cifar10", "npy", "synthetic", ...
  std::string data_dir;  // empty: the cache directory (downloader.h)
  std::string split = "train";  // "train" or "test"
  uint64_t seed = 0;            // for synthetic and sampled data
  std::map<std::string, std::string> options;
};

using DatasetFactory = std::function<std::unique_ptr<Dataset>(const DatasetSpec&)>;

// Formats register by name (register_builtin_datasets() adds the shipped ones);
// open_dataset throws InvalidArgument listing the known names for an unknown one.
void register_dataset(const std::string& name, const std::string& description, DatasetFactory factory);
std::unique_ptr<Dataset> open_dataset(const DatasetSpec& spec);
std::vector<std::pair<std::string, std::string>> dataset_formats();  // name, description
void register_builtin_datasets();

}  // namespace d5
