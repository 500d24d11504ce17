#pragma once
// The operating system's page cache for a dataset's files (docs/data-bench.md): dropping a file's
// pages makes its next read come from the storage device ("cold"); the fraction still resident
// says whether the drop worked (it cannot on tmpfs, whose pages are the storage itself).
#include <cstdint>
#include <string>
#include <vector>

namespace d5 {

// The regular files a dataset path stands for: the path itself when it is a file, else every
// regular file below it (recursively), sorted. IoError when the path does not exist.
std::vector<std::string> dataset_files(const std::string& path);

// Flushes the file's dirty pages, then asks the kernel to drop its clean ones
// (posix_fadvise(POSIX_FADV_DONTNEED): no privileges needed). IoError when it cannot.
void drop_from_page_cache(const std::string& file);

// Pages of the files in the page cache, and in all (from mincore); empty files count 0 of 0.
struct PageCacheResidency {
  uint64_t resident_pages = 0;
  uint64_t pages = 0;
  double fraction() const { return pages == 0 ? 0.0 : static_cast<double>(resident_pages) / static_cast<double>(pages); }
};
PageCacheResidency page_cache_residency(const std::vector<std::string>& files);

}  // namespace d5
