#pragma once
// Typed access to DatasetSpec::options for one format: every lookup names the option it reads, so
// that check_all_known() can refuse a misspelt one and list the ones the format accepts.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "deep500/train/dataset.h"

namespace d5::data {

class DatasetOptions {
 public:
  DatasetOptions(const DatasetSpec& spec, std::string format, std::vector<std::string> known);

  bool has(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value,
                  int64_t max_value = INT64_MAX) const;
  double get_double(const std::string& key, double fallback) const;
  // "a,b,c" -> {a, b, c}; fallback when absent.
  std::vector<double> get_doubles(const std::string& key, std::vector<double> fallback) const;
  // InvalidArgument for an option not in `known`, listing the known ones.
  void check_all_known() const;

 private:
  const std::string* find(const std::string& key) const;

  const DatasetSpec& spec_;
  std::string format_;
  std::set<std::string> known_;
};

// The directory a file-based format reads: spec.data_dir, else the download cache of `name`.
std::string data_dir_for(const DatasetSpec& spec);

}  // namespace d5::data
