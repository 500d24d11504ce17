// The downloadable sets. Checksums are the publishers': SHA-256 where one is known for the exact
// file, otherwise the MD5 listed by the publisher (CIFAR, on its download page) or by torchvision's
// dataset definitions (MNIST, Fashion-MNIST), which are the checksums the community verifies against.
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/train/downloader.h"
#include "deep500/core/error.h"

namespace d5 {

const std::vector<DownloadableDataset>& download_catalog() {
  static const std::vector<DownloadableDataset> catalog = {
      {"mnist",
       "MNIST handwritten digits (LeCun, Cortes, Burges): 60,000 train + 10,000 test, IDX gzip",
       {"https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"},
       {{"train-images-idx3-ubyte.gz", "train", "", "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
        {"train-labels-idx1-ubyte.gz", "train", "", "d53e105ee54ea40749a09fcbcd1e9432"},
        {"t10k-images-idx3-ubyte.gz", "test", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", ""},
        {"t10k-labels-idx1-ubyte.gz", "test", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", ""}}},
      {"fashion-mnist",
       "Fashion-MNIST (Zalando Research): 60,000 train + 10,000 test clothing images, IDX gzip",
       {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"},
       {{"train-images-idx3-ubyte.gz", "train", "", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"},
        {"train-labels-idx1-ubyte.gz", "train", "", "25c81989df183df01b3e8a0aad5dffbe"},
        {"t10k-images-idx3-ubyte.gz", "test", "", "bef4ecab320f06d8554ea6380940ec79"},
        {"t10k-labels-idx1-ubyte.gz", "test", "", "bb300cfdad3c16e7a12a480ee83cd310"}}},
      {"cifar10",
       "CIFAR-10 (Krizhevsky): 50,000 train + 10,000 test 32x32 colour images, binary version, one tar.gz",
       {"https://www.cs.toronto.edu/~kriz/"},
       {{"cifar-10-binary.tar.gz", "all", "", "c32a1d4ab5d03f1284b67883e8d87530"}}},
      {"cifar100",
       "CIFAR-100 (Krizhevsky): 50,000 train + 10,000 test 32x32 colour images, binary version, one tar.gz",
       {"https://www.cs.toronto.edu/~kriz/"},
       {{"cifar-100-binary.tar.gz", "all", "", "03b5dce01913d631647c71ecec9e9cb8"}}},
  };
  return catalog;
}

const DownloadableDataset& find_downloadable(const std::string& name) {
  std::vector<std::string> known;
  for (const auto& d : download_catalog()) {
    if (d.name == name) return d;
    known.push_back(d.name);
  }
  D5_THROW(InvalidArgument, "'{}' is not a downloadable dataset (known: {})", name, fmt::join(known, ", "));
}

std::string default_data_dir(const std::string& name) {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("D5_DATA_DIR"); dir && *dir) return (fs::path(dir) / name).string();
  const char* home = std::getenv("HOME");
  D5_CHECK_ARG(home && *home, "neither $D5_DATA_DIR nor $HOME is set; pass --data-dir (or --dir) explicitly");
  return (fs::path(home) / ".cache" / "deep500" / name).string();
}

}  // namespace d5
