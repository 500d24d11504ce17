#include "core/sysfs_parse.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <iterator>
#include <limits>

namespace d5::detail {

namespace {

constexpr std::string_view kSpace = " \t\r\n";

// Calls f(line) for every line of text, without the newline.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

bool bit(uint32_t word, int n) { return (word >> n) & 1u; }

}  // namespace

std::optional<std::string> read_text_file(const std::string& path, std::string* error) {
  // sysfs and procfs files report size 0, so read until EOF rather than by size.
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = std::generic_category().message(errno);
    return std::nullopt;
  }
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) {
    if (error) *error = std::generic_category().message(errno);
    return std::nullopt;
  }
  return text;
}

std::vector<std::string> list_directory(const std::string& path, std::string* error) {
  // error_code overloads throughout: a directory vanishing mid-listing (CPU hot-unplug) is an
  // unavailable fact, not an exception.
  std::error_code ec;
  std::vector<std::string> names;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) {
    if (error) *error = ec.message();
    return {};
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<int64_t> read_int_file(const std::string& path) {
  const auto text = read_text_file(path);
  return text ? parse_int(*text) : std::nullopt;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> words;
  size_t i = 0;
  while ((i = s.find_first_not_of(kSpace, i)) != std::string_view::npos) {
    const size_t end = std::min(s.find_first_of(kSpace, i), s.size());
    words.emplace_back(s.substr(i, end - i));
    i = end;
  }
  return words;
}

std::optional<uint64_t> parse_uint64(std::string_view s) {
  s = trim(s);
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_int(std::string_view s) {
  const auto v = parse_uint64(s);
  if (!v || *v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(*v);
}

std::optional<std::string> cpuinfo_field(std::string_view text, std::string_view key) {
  std::optional<std::string> found;
  for_each_line(text, [&](std::string_view line) {
    if (found) return;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || trim(line.substr(0, colon)) != key) return;
    found = std::string(trim(line.substr(colon + 1)));
  });
  return found;
}

std::optional<std::string> os_release_field(std::string_view text, std::string_view key) {
  std::optional<std::string> found;
  for_each_line(text, [&](std::string_view line) {
    line = trim(line);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || line.substr(0, eq) != key) return;
    std::string_view raw = line.substr(eq + 1);
    std::string value;
    const char quote = raw.empty() ? '\0' : raw.front();
    if ((quote == '"' || quote == '\'') && raw.size() >= 2 && raw.back() == quote) {
      raw = raw.substr(1, raw.size() - 2);
    }
    // os-release follows shell rules: inside double quotes a backslash escapes " \ $ `.
    for (size_t i = 0; i < raw.size(); ++i) {
      if (quote == '"' && raw[i] == '\\' && i + 1 < raw.size() &&
          std::string_view("\"\\$`").find(raw[i + 1]) != std::string_view::npos) {
        ++i;
      }
      value += raw[i];
    }
    found = std::move(value);  // the last assignment wins, as when the file is sourced
  });
  return found;
}

std::optional<int64_t> status_field_bytes(std::string_view text, std::string_view key) {
  std::optional<int64_t> found;
  for_each_line(text, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (found || colon == std::string_view::npos || line.substr(0, colon) != key) return;
    const auto words = split_words(line.substr(colon + 1));
    if (words.size() != 2 || words[1] != "kB") return;
    if (const auto kb = parse_int(words[0])) found = *kb * 1024;
  });
  return found;
}

std::optional<int64_t> statm_resident_pages(std::string_view text) {
  const auto words = split_words(text);
  if (words.size() < 2) return std::nullopt;
  return parse_int(words[1]);
}

std::optional<CacheInfo> decode_cpuid_cache(uint32_t eax, uint32_t ebx, uint32_t ecx) {
  static constexpr const char* kTypes[] = {nullptr, "Data", "Instruction", "Unified"};
  const uint32_t type = eax & 0x1f;
  if (type == 0 || type > 3) return std::nullopt;
  const auto field = [](uint32_t word, int lo, int bits) { return (word >> lo) & ((1u << bits) - 1); };
  CacheInfo c;
  c.type = kTypes[type];
  c.level = static_cast<int>(field(eax, 5, 3));
  c.line_bytes = static_cast<int>(field(ebx, 0, 12) + 1);
  const int64_t partitions = field(ebx, 12, 10) + 1, ways = field(ebx, 22, 10) + 1;
  const int64_t sets = static_cast<int64_t>(ecx) + 1;
  c.size_bytes = ways * partitions * c.line_bytes * sets;
  return c;
}

std::vector<CacheInfo> decode_amd_legacy_caches(uint32_t ecx5, uint32_t edx5, uint32_t ecx6, uint32_t edx6) {
  std::vector<CacheInfo> caches;
  const auto add = [&](int level, const char* type, int64_t bytes, uint32_t word) {
    if (bytes > 0) caches.push_back({level, type, bytes, static_cast<int>(word & 0xff), 0});
  };
  add(1, "Data", int64_t{ecx5 >> 24} << 10, ecx5);
  add(1, "Instruction", int64_t{edx5 >> 24} << 10, edx5);
  add(2, "Unified", int64_t{ecx6 >> 16} << 10, ecx6);
  add(3, "Unified", int64_t{edx6 >> 18} << 19, edx6);
  return caches;
}

std::vector<std::string> x86_usable_isa(const X86CpuidWords& w, uint64_t xcr0) {
  // XCR0 state components: 1 SSE, 2 AVX (upper YMM), 5-7 AVX-512 (opmask, ZMM_Hi256,
  // Hi16_ZMM), 17-18 AMX (XTILECFG, XTILEDATA). An instruction set whose registers the OS does
  // not save would corrupt state across context switches, so the CPU refuses it (#UD).
  const bool ymm = (xcr0 & 0x6) == 0x6;
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;
  const bool tiles = (xcr0 & 0x60000) == 0x60000;
  // Linux additionally wants arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) before a
  // process first touches AMX tiles. That is a per-process opt-in done by whoever runs AMX code,
  // not a property of the host, so XCR0 + CPUID answer "can this host run AMX" for reporting.

  struct Feature {
    const char* name;
    bool usable;
  };
  const uint32_t b = w.leaf7_ebx, c = w.leaf7_ecx, d = w.leaf7_edx, e = w.leaf7_1_eax;
  const bool l7 = w.has_leaf7;
  const Feature features[] = {
      {"sse4_2", bit(w.leaf1_ecx, 20)},
      {"avx", ymm && bit(w.leaf1_ecx, 28)},
      {"avx2", ymm && l7 && bit(b, 5)},
      {"fma", ymm && bit(w.leaf1_ecx, 12)},
      {"f16c", ymm && bit(w.leaf1_ecx, 29)},
      {"avx512f", zmm && l7 && bit(b, 16)},
      {"avx512dq", zmm && l7 && bit(b, 17)},
      {"avx512cd", zmm && l7 && bit(b, 28)},
      {"avx512bw", zmm && l7 && bit(b, 30)},
      {"avx512vl", zmm && l7 && bit(b, 31)},
      {"avx512_vnni", zmm && l7 && bit(c, 11)},
      {"avx512_bf16", zmm && l7 && bit(e, 5)},
      {"avx512_fp16", zmm && l7 && bit(d, 23)},
      {"avx_vnni", ymm && l7 && bit(e, 4)},
      {"amx_tile", tiles && l7 && bit(d, 24)},
      {"amx_int8", tiles && l7 && bit(d, 25)},
      {"amx_bf16", tiles && l7 && bit(d, 22)},
  };
  std::vector<std::string> isa;
  for (const auto& f : features)
    if (f.usable) isa.emplace_back(f.name);
  return isa;
}

}  // namespace d5::detail
