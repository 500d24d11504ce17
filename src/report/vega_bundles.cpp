// The Vega, Vega-Lite and vega-embed bundles the page inlines, installed from the npm registry
// by scripts/install-vega.sh at the versions third_party/vega/package-lock.json pins.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "deep500/core/data_paths.h"
#include "deep500/core/error.h"
#include "deep500/report/report.h"

namespace d5 {

namespace fs = std::filesystem;

namespace {

constexpr const char* kInstallStep =
    "install them with 'bash scripts/install-vega.sh' (part of 'make deps' / scripts/install-deps.sh), or point "
    "D5_VEGA_DIR at a node_modules directory holding vega, vega-lite and vega-embed";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Bundle {
  std::string code, version;
};

Bundle read_bundle(const fs::path& dir, const std::string& package, const std::string& file) {
  const fs::path path = dir / package / "build" / file;
  D5_CHECK(fs::is_regular_file(path), Unimplemented, "d5 report needs the {} bundle '{}', which is not installed: {}",
           package, path.string(), kInstallStep);
  Bundle b{read_text(path), "?"};
  D5_CHECK(!b.code.empty(), Unimplemented, "the {} bundle '{}' is empty: {}", package, path.string(), kInstallStep);
  // An inlined script ends at the first "</script"; the pinned bundles contain none, and a
  // future one that did would break the page, so refuse it rather than write such a page.
  static const std::regex closing("</script|<!--", std::regex::icase);
  D5_CHECK(!std::regex_search(b.code, closing), FormatError,
           "the {} bundle '{}' contains '</script' or '<!--' and cannot be inlined into an HTML page", package,
           path.string());
  const std::string manifest = read_text(dir / package / "package.json");
  std::smatch m;
  static const std::regex version("\"version\"\\s*:\\s*\"([^\"]+)\"");
  if (std::regex_search(manifest, m, version)) b.version = m[1];
  return b;
}

}  // namespace

std::string default_vega_dir() {
  return locate_data("D5_VEGA_DIR", D5_VEGA_DIR_DEFAULT, "share/deep500/vega");
}

VegaBundles load_vega_bundles(const std::string& node_modules_dir) {
  const fs::path dir(node_modules_dir);
  D5_CHECK(fs::is_directory(dir), Unimplemented,
           "d5 report needs the Vega bundles, and '{}' does not exist: {}", node_modules_dir, kInstallStep);
  const Bundle vega = read_bundle(dir, "vega", "vega.min.js");
  const Bundle lite = read_bundle(dir, "vega-lite", "vega-lite.min.js");
  const Bundle embed = read_bundle(dir, "vega-embed", "vega-embed.min.js");
  return {vega.code, lite.code, embed.code,
          fmt::format("vega {}, vega-lite {}, vega-embed {}", vega.version, lite.version, embed.version)};
}

}  // namespace d5
