// Downloads with libcurl into FILE.part (appending, so an interrupted transfer resumes with
// CURLOPT_RESUME_FROM_LARGE, which works for http(s) and file:// alike), then verification, then an
// atomic rename to FILE. Only verified files ever carry the final name.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#ifdef D5_HAVE_CURL
#include <curl/curl.h>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/digest.h"
#include "deep500/train/downloader.h"
#include "deep500/core/error.h"

namespace d5 {

namespace fs = std::filesystem;

bool download_supported() {
#ifdef D5_HAVE_CURL
  return true;
#else
  return false;
#endif
}

std::string file_checksum(const std::string& path, const DownloadableFile& file) {
  return file_hex_digest(path, file.sha256.empty() ? DigestKind::md5 : DigestKind::sha256);
}

namespace {

#ifdef D5_HAVE_CURL

const std::string& expected_checksum(const DownloadableFile& f) { return f.sha256.empty() ? f.md5 : f.sha256; }
std::string checksum_kind(const DownloadableFile& f) { return f.sha256.empty() ? "md5" : "sha256"; }

bool verifies(const std::string& path, const DownloadableFile& f) { return file_checksum(path, f) == expected_checksum(f); }

struct Transfer {
  std::FILE* out = nullptr;
  std::string label;
  int64_t offset = 0;  // bytes already in the .part file
  bool progress = false;
  int last_shown = -1;
};

size_t write_chunk(char* data, size_t size, size_t count, void* user) {
  return std::fwrite(data, size, count, static_cast<Transfer*>(user)->out) * size;
}

int show_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->progress || total <= 0) return 0;
  const double done = static_cast<double>(t->offset + now), all = static_cast<double>(t->offset + total);
  const int permille = static_cast<int>(1000 * done / all);
  if (permille == t->last_shown) return 0;
  t->last_shown = permille;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::fprintf(stderr, "\r%-28s [%s%s] %5.1f%%  %.1f / %.1f MB", t->label.c_str(), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), permille / 10.0, done / 1e6, all / 1e6);
  std::fflush(stderr);
  return 0;
}

struct CurlResult {
  CURLcode code = CURLE_OK;
  long http_status = 0;
  int64_t bytes = 0;
  std::string error;
};

CurlResult curl_fetch(const std::string& url, Transfer& t) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  D5_CHECK(curl, Internal, "curl_easy_init failed");
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_chunk);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "deep500");
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled connection (under 1 byte/s for a minute) fails instead of hanging for ever.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  if (t.offset > 0) curl_easy_setopt(curl, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(t.offset));
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, t.progress ? 0L : 1L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, show_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  CurlResult r;
  r.code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.http_status);
  curl_off_t got = 0;
  curl_easy_getinfo(curl, CURLINFO_SIZE_DOWNLOAD_T, &got);
  r.bytes = got;
  r.error = error[0] ? error : curl_easy_strerror(r.code);
  curl_easy_cleanup(curl);
  if (t.progress && t.last_shown >= 0) std::fprintf(stderr, "\n");
  return r;
}

// Fetches `url` into `part`, continuing what is there. Returns the bytes transferred; IoError with
// curl's reason on failure. A server that cannot resume gets one fresh attempt from byte 0.
int64_t fetch_into(const std::string& url, const std::string& part, const std::string& label, bool progress,
                   bool& resumed) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    Transfer t;
    t.label = label;
    t.progress = progress;
    t.offset = fs::exists(part) ? static_cast<int64_t>(fs::file_size(part)) : 0;
    t.out = std::fopen(part.c_str(), "ab");
    D5_CHECK(t.out, IoError, "cannot write '{}': {}", part, std::strerror(errno));
    const CurlResult r = curl_fetch(url, t);
    const bool closed = std::fclose(t.out) == 0;
    D5_CHECK(closed || r.code != CURLE_OK, IoError, "cannot write '{}': {}", part, std::strerror(errno));
    if (r.code == CURLE_OK) {
      resumed = t.offset > 0;
      return r.bytes;
    }
    const bool cannot_resume =
        t.offset > 0 && (r.code == CURLE_RANGE_ERROR || r.code == CURLE_BAD_DOWNLOAD_RESUME || r.http_status == 416);
    if (!cannot_resume) D5_THROW(IoError, "{}", r.error);
    fs::remove(part);  // the partial file does not fit what the server has: start again
  }
  D5_THROW(IoError, "the server did not accept a download from the first byte");
}

#endif

}  // namespace

std::vector<DownloadedFile> download_dataset(const std::string& name, const DownloadOptions& options) {
  const DownloadableDataset& set = find_downloadable(name);
  D5_CHECK_ARG(options.split == "train" || options.split == "test" || options.split == "all",
               "split '{}' is not train, test or all", options.split);
#ifndef D5_HAVE_CURL
  (void)set;
  D5_THROW(NotBuilt,
           "this d5 was built without libcurl, so it cannot download '{}'; install libcurl4-openssl-dev (Debian) and "
           "configure again, or copy the files into '{}' yourself",
           name, options.dir.empty() ? default_data_dir(name) : options.dir);
#else
  const std::string dir = options.dir.empty() ? default_data_dir(name) : options.dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  D5_CHECK(!ec, IoError, "cannot create the download directory '{}': {}", dir, ec.message());

  std::string mirror = options.mirror;
  if (mirror.empty())
    if (const char* env = std::getenv("D5_DATA_MIRROR"); env) mirror = env;
  std::vector<std::string> bases = set.base_urls;
  if (!mirror.empty()) bases = {mirror.back() == '/' ? mirror : mirror + "/"};

  std::vector<DownloadedFile> out;
  for (const DownloadableFile& file : set.files) {
    if (options.split != "all" && file.split != "all" && file.split != options.split) continue;
    const auto start = std::chrono::steady_clock::now();
    DownloadedFile d;
    d.name = file.name;
    d.path = (fs::path(dir) / file.name).string();
    d.checksum_kind = checksum_kind(file);
    const std::string part = d.path + ".part";
    // A verified file is kept; one that does not verify (stale, edited) is deleted and fetched
    // again, so that a failed download never leaves it behind for a dataset to read.
    if (fs::exists(d.path)) {
      if (verifies(d.path, file)) {
        d.checksum = expected_checksum(file);
        d.size = static_cast<int64_t>(fs::file_size(d.path));
        out.push_back(d);
        continue;
      }
      fs::remove(d.path);
    }
    // A .part that is already complete (interrupted between transfer and rename) needs no transfer.
    const bool part_complete = fs::exists(part) && verifies(part, file);
    d.resumed = part_complete;
    if (!part_complete) {
      std::vector<std::string> failures;
      for (const std::string& base : bases) {
        const std::string url = base + file.name;
        try {
          d.bytes_transferred = fetch_into(url, part, name + "/" + file.name, options.progress, d.resumed);
          d.url = url;
          break;
        } catch (const IoError& e) {
          failures.push_back(fmt::format("{}: {}", url, e.what()));
        }
      }
      D5_CHECK(!d.url.empty(), IoError, "cannot download {} of '{}': {}{}", file.name, name, fmt::join(failures, "; "),
               mirror.empty() ? " (a local copy can be given with --mirror file:///DIR/ or $D5_DATA_MIRROR)" : "");
    }
    d.fetched = true;
    const std::string actual = file_checksum(part, file);
    if (actual != expected_checksum(file)) {
      fs::remove(part);
      D5_THROW(FormatError, "{} from {} does not match its published {}: expected {}, got {}; the file was deleted{}",
               file.name, d.url, d.checksum_kind, expected_checksum(file), actual,
               d.resumed ? " (it continued an earlier partial download, which may have been corrupt: try again)" : "");
    }
    fs::rename(part, d.path, ec);
    D5_CHECK(!ec, IoError, "cannot rename '{}' to '{}': {}", part, d.path, ec.message());
    d.checksum = actual;
    d.size = static_cast<int64_t>(fs::file_size(d.path));
    d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.push_back(d);
  }
  return out;
#endif
}

}  // namespace d5
