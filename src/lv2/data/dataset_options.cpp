#include "dataset_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/train/downloader.h"
#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"

namespace d5::data {

DatasetOptions::DatasetOptions(const DatasetSpec& spec, std::string format, std::vector<std::string> known)
    : spec_(spec), format_(std::move(format)), known_(known.begin(), known.end()) {}

const std::string* DatasetOptions::find(const std::string& key) const {
  D5_CHECK(known_.count(key), Internal, "format '{}' reads option '{}' it does not declare", format_, key);
  auto it = spec_.options.find(key);
  return it == spec_.options.end() ? nullptr : &it->second;
}

bool DatasetOptions::has(const std::string& key) const { return find(key) != nullptr; }

std::string DatasetOptions::get_string(const std::string& key, const std::string& fallback) const {
  const std::string* v = find(key);
  return v ? *v : fallback;
}

int64_t DatasetOptions::get_int(const std::string& key, int64_t fallback, int64_t min_value,
                                int64_t max_value) const {
  const std::string* v = find(key);
  if (!v) return fallback;
  const std::optional<int64_t> parsed = parse_int(*v);
  D5_CHECK_ARG(parsed.has_value(), "dataset '{}': option {}='{}' is not an integer", format_, key, *v);
  const int64_t out = *parsed;
  D5_CHECK_ARG(out >= min_value, "dataset '{}': option {}={} must be at least {}", format_, key, out, min_value);
  D5_CHECK_ARG(out <= max_value, "dataset '{}': option {}={} must be at most {}", format_, key, out, max_value);
  return out;
}

namespace {
double option_double(const std::string& text, const std::string& format, const std::string& key) {
  const std::optional<double> v = parse_double(text);
  D5_CHECK_ARG(v.has_value(), "dataset '{}': option {} has '{}', which is not a number", format, key, text);
  return *v;
}
}  // namespace

double DatasetOptions::get_double(const std::string& key, double fallback) const {
  const std::string* v = find(key);
  return v ? option_double(*v, format_, key) : fallback;
}

std::vector<double> DatasetOptions::get_doubles(const std::string& key, std::vector<double> fallback) const {
  const std::string* v = find(key);
  if (!v) return fallback;
  std::vector<double> out;
  size_t start = 0;
  while (true) {
    const size_t comma = v->find(',', start);
    out.push_back(option_double(v->substr(start, comma - start), format_, key));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void DatasetOptions::check_all_known() const {
  for (const auto& [key, value] : spec_.options)
    D5_CHECK_ARG(known_.count(key), "dataset '{}' has no option '{}' (known: {})", format_, key,
                 known_.empty() ? std::string("none") : fmt::format("{}", fmt::join(known_, ", ")));
}

std::string data_dir_for(const DatasetSpec& spec) {
  return spec.data_dir.empty() ? default_data_dir(spec.name) : spec.data_dir;
}

}  // namespace d5::data
