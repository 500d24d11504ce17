#pragma once
// Level 2: dataset downloads (docs/data.md). A catalog of the public sets with their canonical
// URLs and published checksums; downloads go to a cache directory, resume from a partial file, and
// are verified before they are used. A file that fails verification is deleted.
#include <cstdint>
#include <string>
#include <vector>

namespace d5 {

struct DownloadableFile {
  std::string name;   // file name, appended to the base URL
  std::string split;  // "train", "test", or "all" (an archive holding both)
  // The publisher's checksum: SHA-256 where one is published, otherwise the MD5 the publisher
  // (or torchvision) lists. Exactly one is set.
  std::string sha256;
  std::string md5;
};

struct DownloadableDataset {
  std::string name;         // as given to `d5 data download` and `--dataset`
  std::string description;
  std::vector<std::string> base_urls;  // tried in order; each ends with '/'
  std::vector<DownloadableFile> files;
};

const std::vector<DownloadableDataset>& download_catalog();
// InvalidArgument listing the catalog for an unknown name.
const DownloadableDataset& find_downloadable(const std::string& name);

// Where `name`'s files live when no directory is given: $D5_DATA_DIR/<name>, else
// $HOME/.cache/deep500/<name>.
std::string default_data_dir(const std::string& name);

struct DownloadOptions {
  std::string dir;     // empty: default_data_dir(name)
  std::string mirror;  // base URL replacing the catalog's (file name appended); empty: $D5_DATA_MIRROR, else the catalog
  std::string split = "all";  // "train", "test" or "all": which files
  bool progress = false;      // a progress bar on stderr (callers pass isatty(stderr))
};

struct DownloadedFile {
  std::string name;
  std::string path;
  std::string url;       // where it came from; empty when it was already present
  bool fetched = false;  // false: already present and verified, nothing transferred
  bool resumed = false;  // continued a partial download (FILE.part)
  int64_t bytes_transferred = 0;
  int64_t size = 0;
  std::string checksum_kind;  // "sha256" or "md5"
  std::string checksum;       // the verified digest
  double seconds = 0;
};

// True when this build can download (libcurl was found at configure time).
bool download_supported();

// Downloads and verifies the files of `name` for `options.split`. A file already present is
// verified and kept (no transfer) when it matches, fetched again when it does not. A partial
// download FILE.part is resumed. Errors: Unimplemented without libcurl (naming the package to
// install); IoError when no URL could be fetched (naming each URL and the reason); FormatError when
// a downloaded file does not match its checksum (naming expected and actual; the file is deleted).
std::vector<DownloadedFile> download_dataset(const std::string& name, const DownloadOptions& options);

// Verifies `path` against the catalog entry's checksum; returns the actual digest.
std::string file_checksum(const std::string& path, const DownloadableFile& file);

}  // namespace d5
