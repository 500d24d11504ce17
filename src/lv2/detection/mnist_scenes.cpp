// "mnist-scenes": object detection on real handwriting. A scene is a square grey canvas holding
// 1-5 MNIST digits, each resampled to a drawn size and pasted at a drawn place, with the tight box
// of its ink and its class (docs/detection-datasets.md). The train split pastes only MNIST's
// training digits, the test split only its test digits; with digits=test-halves both come from
// MNIST's test files, the train split from their first half and the test split from the second,
// for machines that have only those files.
//
// Scene i of a split draws from the Philox stream "mnist-scenes/<split>/<i>" of spec.seed alone,
// so scenes are generated in parallel and scene i is the same whatever `samples` is. The split is
// cached in the data directory as three NPY files (images u8, boxes f32, labels i64) beside a
// manifest recording the options, the SHA-256 of the MNIST files and of each NPY file.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../data/dataset_options.h"
#include "../images/image_common.h"
#include "core/digest.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/metrics/atomic_file.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/train/detection_metrics.h"
#include "deep500/train/downloader.h"
#include "deep500/train/quality.h"
#include "detection_datasets.h"

namespace d5::detection {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSet = "mnist-scenes";
// Part of the cache key: change it whenever the same options would draw other scenes.
constexpr const char* kGenerator = "mnist-scenes/1";
constexpr int64_t kClasses = 10;
constexpr int64_t kDigitSide = 28;
// A pixel is ink above 0.1, i.e. from byte 26 up (0.1 * 255 = 25.5).
constexpr int kInkAbove = 25;
// Positions tried for one digit before it is left out of the scene.
constexpr int kPlacementTries = 20;

// Which MNIST digits the scenes paste (the option `digits`).
enum class DigitSource { mnist, test_halves };

struct SceneOptions {
  int64_t samples = 0, size = 0, min_objects = 0, max_objects = 0, min_scale = 0, max_scale = 0;
  double max_overlap = 0, noise = 0;
  DigitSource digits = DigitSource::mnist;

  nlohmann::json to_json() const {
    nlohmann::json j = {{"samples", samples},         {"size", size},           {"min_objects", min_objects},
                        {"max_objects", max_objects}, {"min_scale", min_scale}, {"max_scale", max_scale},
                        {"max_overlap", max_overlap}, {"noise", noise}};
    // Recorded only when not the default, so that the cache keys of the default scenes are those
    // from before the option existed and their cached entries stay valid.
    if (digits == DigitSource::test_halves) j["digits"] = "test-halves";
    return j;
  }
};

DigitSource read_digit_source(const data::DatasetOptions& opts) {
  const std::string digits = opts.get_string("digits", "mnist");
  if (digits == "mnist") return DigitSource::mnist;
  if (digits == "test-halves") return DigitSource::test_halves;
  D5_THROW(InvalidArgument, "{}: digits must be 'mnist' or 'test-halves', got '{}'", kSet, digits);
}

SceneOptions read_options(const data::DatasetOptions& opts, const std::string& split) {
  SceneOptions o;
  o.samples = opts.get_int("samples", split == "train" ? 10000 : 2000, 1, int64_t{1} << 24);
  o.size = opts.get_int("size", 64, 1, 4096);
  o.min_objects = opts.get_int("min-objects", 1, 1, 100);
  o.max_objects = opts.get_int("max-objects", 5, 1, 100);
  D5_CHECK_ARG(o.min_objects <= o.max_objects, "{}: min-objects={} exceeds max-objects={}", kSet, o.min_objects,
               o.max_objects);
  o.min_scale = opts.get_int("min-scale", 14, 1, 4096);
  o.max_scale = opts.get_int("max-scale", 28, 1, 4096);
  D5_CHECK_ARG(o.min_scale <= o.max_scale, "{}: min-scale={} exceeds max-scale={}", kSet, o.min_scale, o.max_scale);
  D5_CHECK_ARG(o.max_scale <= o.size,
               "{}: a digit of max-scale={} pixels does not fit on a canvas of size={}; lower max-scale or raise size",
               kSet, o.max_scale, o.size);
  o.max_overlap = opts.get_double("max-overlap", 0.1);
  D5_CHECK_ARG(o.max_overlap >= 0 && o.max_overlap <= 1, "{}: max-overlap is an IoU and must lie in [0, 1], got {}",
               kSet, o.max_overlap);
  o.noise = opts.get_double("noise", 0.0);
  D5_CHECK_ARG(std::isfinite(o.noise) && o.noise >= 0, "{}: noise is a standard deviation, >= 0, got {}", kSet,
               o.noise);
  o.digits = read_digit_source(opts);
  return o;
}

// ---- The source digits ----

struct SourceFile {
  std::string path;
  std::string sha256;
};

// MNIST's file `stem` in `dir`, gzip'd or raw (the gzip'd one wins, as for the mnist set). `advice`
// tells the user, when it is missing, why it is needed and how to get it.
SourceFile source_file(const std::string& dir, const std::string& stem, const std::string& advice) {
  for (const std::string& name : {stem + ".gz", stem}) {
    const fs::path path = fs::path(dir) / name;
    if (fs::exists(path)) return {path.string(), file_hex_digest(path.string(), DigestKind::sha256)};
  }
  D5_THROW(IoError, "{}: no {}[.gz] in '{}': {}", kSet, stem, dir, advice);
}

struct Sources {
  SourceFile images, labels;
  nlohmann::json to_json() const {
    return {{"images", {{"file", fs::path(images.path).filename().string()}, {"sha256", images.sha256}}},
            {"labels", {{"file", fs::path(labels.path).filename().string()}, {"sha256", labels.sha256}}}};
  }
};

// The two MNIST files a split's scenes paste from.
Sources find_sources(const std::string& dir, const std::string& split, DigitSource digits) {
  const bool halves = digits == DigitSource::test_halves;
  const std::string mnist_split = halves ? "test" : split;
  std::string advice =
      halves ? fmt::format("with digits=test-halves the {} scenes paste the {} half of MNIST's test digits", split,
                           split == "train" ? "first" : "second")
             : fmt::format("the {} scenes paste MNIST's {} digits", split, split);
  advice += fmt::format(
      "; run 'd5 data download mnist --split {}', or point the option mnist-dir (--set mnist-dir=DIR) at the "
      "directory holding MNIST's IDX files",
      mnist_split);
  // The way out on a machine that has only MNIST's test files, as CI runners do.
  if (!halves && split == "train")
    advice += "; with MNIST's test files alone, --set digits=test-halves makes both splits from halves of them";
  const std::string prefix = mnist_split == "train" ? "train" : "t10k";
  return {source_file(dir, prefix + "-images-idx3-ubyte", advice),
          source_file(dir, prefix + "-labels-idx1-ubyte", advice)};
}

struct Digits {
  int64_t count = 0;
  std::vector<uint8_t> pixels;  // [count, 28, 28]
  std::vector<uint8_t> labels;
};

// The split's half of `all` (MNIST's test digits): with digits=test-halves the train scenes draw from
// the first half and the test scenes from the second, so that no digit is in both splits.
Digits half_of(Digits all, const std::string& split, const std::string& file) {
  D5_CHECK(all.count >= 2, FormatError, "{}: digits=test-halves needs 2 digits or more to halve, '{}' holds {}", kSet,
           file, all.count);
  const int64_t half = all.count / 2;
  const int64_t begin = split == "train" ? 0 : half, end = split == "train" ? half : all.count;
  constexpr int64_t pixels = kDigitSide * kDigitSide;
  Digits d;
  d.count = end - begin;
  d.pixels.assign(all.pixels.begin() + begin * pixels, all.pixels.begin() + end * pixels);
  d.labels.assign(all.labels.begin() + begin, all.labels.begin() + end);
  return d;
}

Digits read_digits(const Sources& s) {
  IdxArray images = read_idx_file(s.images.path, kIdxImagesMagic);
  IdxArray labels = read_idx_file(s.labels.path, kIdxLabelsMagic);
  D5_CHECK(images.dims[1] == kDigitSide && images.dims[2] == kDigitSide, FormatError,
           "{}: '{}' holds {}x{} images; MNIST's are 28x28", kSet, s.images.path, images.dims[1], images.dims[2]);
  D5_CHECK(images.dims[0] == labels.dims[0], FormatError, "{}: '{}' holds {} images but '{}' holds {} labels", kSet,
           s.images.path, images.dims[0], s.labels.path, labels.dims[0]);
  for (size_t i = 0; i < labels.data.size(); ++i)
    D5_CHECK(labels.data[i] < kClasses, FormatError, "'{}': label {} at byte offset {} is not a class 0-9",
             s.labels.path, labels.data[i], 8 + i);
  return {images.dims[0], std::move(images.data), std::move(labels.data)};
}

// ---- One scene ----

// A digit resampled to side x side, and the tight box of its ink within the patch.
struct Patch {
  int64_t side = 0;
  std::vector<uint8_t> pixels;
  int64_t x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // x2, y2 exclusive; x1 == x2 when there is no ink
  int64_t label = 0;
};

// The taps of bilinear resampling with half-pixel centres and clamped edges, as
// torch.nn.functional.interpolate(mode="bilinear", align_corners=False): output pixel d samples
// the source at (d + 0.5) * in / out - 0.5. At out == in every weight is 0, so a digit pasted at
// 28 pixels is the MNIST image byte for byte; at out == in / 2 each pixel is a 2x2 mean.
struct Tap {
  int64_t lo = 0, hi = 0;
  double w = 0;
};
std::vector<Tap> bilinear_taps(int64_t in, int64_t out) {
  std::vector<Tap> taps(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t d = 0; d < out; ++d) {
    const double s = std::max((static_cast<double>(d) + 0.5) * scale - 0.5, 0.0);
    const int64_t lo = std::min(static_cast<int64_t>(s), in - 1);
    taps[static_cast<size_t>(d)] = {lo, std::min(lo + 1, in - 1), s - static_cast<double>(lo)};
  }
  return taps;
}

Patch make_patch(const Digits& digits, int64_t digit, int64_t side) {
  Patch p;
  p.side = side;
  p.label = digits.labels[static_cast<size_t>(digit)];
  p.pixels.resize(static_cast<size_t>(side * side));
  const uint8_t* src = digits.pixels.data() + digit * kDigitSide * kDigitSide;
  const std::vector<Tap> taps = bilinear_taps(kDigitSide, side);
  p.x1 = p.y1 = side;
  for (int64_t r = 0; r < side; ++r) {
    const Tap& ty = taps[static_cast<size_t>(r)];
    for (int64_t c = 0; c < side; ++c) {
      const Tap& tx = taps[static_cast<size_t>(c)];
      auto at = [&](int64_t y, int64_t x) { return static_cast<double>(src[y * kDigitSide + x]); };
      const double top = (1 - tx.w) * at(ty.lo, tx.lo) + tx.w * at(ty.lo, tx.hi);
      const double bottom = (1 - tx.w) * at(ty.hi, tx.lo) + tx.w * at(ty.hi, tx.hi);
      const auto v = static_cast<uint8_t>(std::lround((1 - ty.w) * top + ty.w * bottom));
      p.pixels[static_cast<size_t>(r * side + c)] = v;
      if (v > kInkAbove) {
        p.x1 = std::min(p.x1, c), p.y1 = std::min(p.y1, r);
        p.x2 = std::max(p.x2, c + 1), p.y2 = std::max(p.y2, r + 1);
      }
    }
  }
  if (p.x2 == 0) p.x1 = p.y1 = 0;
  return p;
}

struct Placed {
  Patch patch;
  int64_t x = 0, y = 0;  // the patch's top-left corner on the canvas
  Box box{};
};

bool fits(const Box& box, const std::vector<Placed>& placed, double max_overlap) {
  return std::all_of(placed.begin(), placed.end(), [&](const Placed& p) { return box_iou(box, p.box) <= max_overlap; });
}

// Draws the scene's digits and their places: each digit tries kPlacementTries positions, and one
// whose ink box would overlap a placed one by more than max_overlap (IoU) at all of them is left
// out. A digit with no ink at its size (possible only far below MNIST's 28 pixels) is redrawn
// within the same tries.
std::vector<Placed> place_digits(const SceneOptions& o, const Digits& digits, RngStream& rng) {
  const auto wanted = static_cast<int64_t>(static_cast<uint64_t>(o.min_objects) +
                                           rng.below(static_cast<uint64_t>(o.max_objects - o.min_objects + 1)));
  std::vector<Placed> placed;
  for (int64_t k = 0; k < wanted; ++k) {
    Patch patch;
    for (int t = 0; t < kPlacementTries; ++t) {
      if (patch.x2 == 0) {
        const auto digit = static_cast<int64_t>(rng.below(static_cast<uint64_t>(digits.count)));
        const auto side =
            o.min_scale + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.max_scale - o.min_scale + 1)));
        patch = make_patch(digits, digit, side);
        if (patch.x2 == 0) continue;
      }
      const auto room = static_cast<uint64_t>(o.size - patch.side + 1);
      const auto x = static_cast<int64_t>(rng.below(room)), y = static_cast<int64_t>(rng.below(room));
      const Box box{static_cast<double>(x + patch.x1), static_cast<double>(y + patch.y1),
                    static_cast<double>(x + patch.x2), static_cast<double>(y + patch.y2)};
      if (fits(box, placed, o.max_overlap)) {
        placed.push_back({std::move(patch), x, y, box});
        break;
      }
    }
  }
  return placed;
}

// Renders scene `index` into its canvas (size*size bytes) and its rows of boxes and labels.
void render_scene(const SceneOptions& o, const Digits& digits, RngStream rng, uint8_t* canvas, float* boxes,
                  int64_t* labels, int64_t index) {
  std::vector<Placed> placed = place_digits(o, digits, rng);
  D5_CHECK_ARG(!placed.empty(),
               "{}: scene {} has no digit: every drawn digit lost its ink at min-scale={}..max-scale={} pixels; "
               "raise min-scale",
               kSet, index, o.min_scale, o.max_scale);
  const int64_t pixels = o.size * o.size;
  std::fill(canvas, canvas + pixels, uint8_t{0});
  if (o.noise > 0) {
    // A stream of its own, so that the noise level never changes where the digits go.
    RngStream noise = rng.child("noise");
    for (int64_t p = 0; p < pixels; ++p)
      canvas[p] = static_cast<uint8_t>(std::lround(std::clamp(noise.normal(0, o.noise), 0.0, 1.0) * 255));
  }
  for (const Placed& p : placed)
    for (int64_t r = 0; r < p.patch.side; ++r)
      for (int64_t c = 0; c < p.patch.side; ++c) {
        uint8_t& dst = canvas[(p.y + r) * o.size + p.x + c];
        dst = std::max(dst, p.patch.pixels[static_cast<size_t>(r * p.patch.side + c)]);
      }
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return std::tie(a.box[0], a.box[1], a.patch.label) < std::tie(b.box[0], b.box[1], b.patch.label);
  });
  for (int64_t k = 0; k < o.max_objects; ++k) {
    const bool used = k < static_cast<int64_t>(placed.size());
    for (int j = 0; j < 4; ++j)
      boxes[k * 4 + j] = used ? static_cast<float>(placed[static_cast<size_t>(k)].box[static_cast<size_t>(j)]) : 0.0f;
    labels[k] = used ? placed[static_cast<size_t>(k)].patch.label : kDefaultIgnoreIndex;
  }
}

// ---- A split: generated, or read from the cache ----

struct Scenes {
  std::vector<uint8_t> images;  // [samples, size, size]
  std::vector<float> boxes;     // [samples, max_objects, 4]
  std::vector<int64_t> labels;  // [samples, max_objects]

  explicit Scenes(const SceneOptions& o)
      : images(static_cast<size_t>(o.samples * o.size * o.size)),
        boxes(static_cast<size_t>(o.samples * o.max_objects * 4)),
        labels(static_cast<size_t>(o.samples * o.max_objects)) {}
};

Scenes generate(const SceneOptions& o, const Digits& digits, uint64_t seed, const std::string& split) {
  Scenes s(o);
  const int64_t m = o.max_objects;
  images::WorkerPool pool(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 32u)));
  pool.parallel_for(o.samples, [&](int64_t i) {
    render_scene(o, digits, RngStream(seed, fmt::format("{}/{}/{}", kSet, split, i)),
                 s.images.data() + i * o.size * o.size, s.boxes.data() + i * m * 4, s.labels.data() + i * m, i);
  });
  return s;
}

// The three arrays of a split as the cache stores them, one NPY file each.
struct CacheArray {
  const char* name;
  TensorDesc desc;
  void* data;
};

std::vector<CacheArray> cache_arrays(const SceneOptions& o, Scenes& s) {
  return {{"images", TensorDesc{DType::u8, Shape{o.samples, 1, o.size, o.size}}, s.images.data()},
          {"boxes", TensorDesc{DType::f32, Shape{o.samples, o.max_objects, 4}}, s.boxes.data()},
          {"labels", TensorDesc{DType::i64, Shape{o.samples, o.max_objects}}, s.labels.data()}};
}

fs::path array_path(const fs::path& dir, const std::string& stem, const std::string& array) {
  return dir / fmt::format("{}-{}.npy", stem, array);
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Fills `a` from its file when the file's SHA-256 is `sha256` and its header has a's dtype and
// shape; false otherwise.
bool read_cached_array(const fs::path& path, const std::string& sha256, const CacheArray& a) {
  if (!fs::exists(path)) return false;
  const std::string bytes = read_bytes(path);
  if (sha256_hex(bytes) != sha256) return false;
  const NpyHeader h = read_npy_header(path.string());
  const size_t size = a.desc.bytes();
  if (h.shape != a.desc.shape.dims() || h.item_size != static_cast<int64_t>(dtype_size(a.desc.dtype)) ||
      bytes.size() != static_cast<size_t>(h.data_offset) + size)
    return false;
  std::memcpy(a.data, bytes.data() + h.data_offset, size);
  return true;
}

// The cached split when the manifest matches `identity` and every file its SHA-256, else nothing.
std::optional<Scenes> read_cache(const fs::path& dir, const std::string& stem, const nlohmann::json& identity,
                                 const SceneOptions& o) {
  const fs::path manifest_path = dir / (stem + ".json");
  if (!fs::exists(manifest_path)) return std::nullopt;
  nlohmann::json manifest = nlohmann::json::parse(read_bytes(manifest_path), nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || !manifest.contains("files")) return std::nullopt;
  const nlohmann::json files = manifest["files"];
  manifest.erase("files");
  if (manifest != identity || !files.is_object()) return std::nullopt;
  Scenes s(o);
  for (const CacheArray& a : cache_arrays(o, s)) {
    const auto sha = files.find(a.name);
    if (sha == files.end() || !sha->is_string() ||
        !read_cached_array(array_path(dir, stem, a.name), sha->get<std::string>(), a))
      return std::nullopt;
  }
  return s;
}

void write_cache(const fs::path& dir, const std::string& stem, nlohmann::json manifest, const SceneOptions& o,
                 Scenes& s) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  D5_CHECK(!ec, IoError, "cannot create the data directory '{}': {}", dir.string(), ec.message());
  nlohmann::json files = nlohmann::json::object();
  for (const CacheArray& a : cache_arrays(o, s)) {
    const fs::path path = array_path(dir, stem, a.name);
    write_npy_file(path.string(), Tensor::view(a.desc, a.data));
    files[a.name] = file_hex_digest(path.string(), DigestKind::sha256);
  }
  // Written last, so that a manifest only ever vouches for complete files.
  manifest["files"] = std::move(files);
  atomic_write((dir / (stem + ".json")).string(), manifest.dump(1) + "\n");
}

// ---- The dataset ----

class MnistScenes : public Dataset {
 public:
  MnistScenes(const SceneOptions& o, Scenes scenes) : o_(o), scenes_(std::move(scenes)) {}

  std::string name() const override { return kSet; }
  int64_t size() const override { return o_.samples; }
  int64_t classes() const override { return kClasses; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{1, o_.size, o_.size}}},
            {kDataBoxes, TensorDesc{DType::f32, Shape{o_.max_objects, 4}}},
            {kDataLabels, TensorDesc{DType::i64, Shape{o_.max_objects}}}};
  }

  Batch fetch(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    const int64_t pixels = o_.size * o_.size, m = o_.max_objects;
    Batch b{{kDataInput, Tensor::uninitialized(TensorDesc{DType::f32, Shape{n, 1, o_.size, o_.size}})},
            {kDataBoxes, Tensor::uninitialized(TensorDesc{DType::f32, Shape{n, m, 4}})},
            {kDataLabels, Tensor::uninitialized(TensorDesc{DType::i64, Shape{n, m}})}};
    float* x = b.at(kDataInput).data_as<float>();
    float* boxes = b.at(kDataBoxes).data_as<float>();
    int64_t* labels = b.at(kDataLabels).data_as<int64_t>();
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = indices[static_cast<size_t>(k)];
      check_index(i);
      const uint8_t* src = scenes_.images.data() + i * pixels;
      for (int64_t p = 0; p < pixels; ++p) x[k * pixels + p] = static_cast<float>(src[p]) * (1.0f / 255.0f);
      std::copy_n(scenes_.boxes.data() + i * m * 4, m * 4, boxes + k * m * 4);
      std::copy_n(scenes_.labels.data() + i * m, m, labels + k * m);
    }
    return b;
  }

  // The stratum of a scene: its number of digits - 1.
  int64_t label(int64_t index) const override {
    check_index(index);
    const int64_t* row = scenes_.labels.data() + index * o_.max_objects;
    return std::count_if(row, row + o_.max_objects, [](int64_t l) { return l != kDefaultIgnoreIndex; }) - 1;
  }

 private:
  void check_index(int64_t i) const {
    D5_CHECK_ARG(i >= 0 && i < o_.samples, "{}: sample index {} is outside [0, {})", kSet, i, o_.samples);
  }

  SceneOptions o_;
  Scenes scenes_;
};

}  // namespace

std::unique_ptr<Dataset> open_mnist_scenes(const DatasetSpec& spec) {
  data::DatasetOptions opts(spec, kSet,
                            {"mnist-dir", "samples", "size", "min-objects", "max-objects", "min-scale", "max-scale",
                             "max-overlap", "noise", "digits"});
  D5_CHECK_ARG(spec.split == "train" || spec.split == "test", "{}: split must be 'train' or 'test', got '{}'", kSet,
               spec.split);
  const SceneOptions o = read_options(opts, spec.split);
  // Where `d5 data download mnist` puts the files, unless told otherwise.
  const std::string mnist_dir = opts.has("mnist-dir") ? opts.get_string("mnist-dir", "") : default_data_dir("mnist");
  opts.check_all_known();
  const Sources sources = find_sources(mnist_dir, spec.split, o.digits);
  const nlohmann::json identity = {{"set", kSet},
                                   {"generator", kGenerator},
                                   {"split", spec.split},
                                   {"seed", spec.seed},
                                   {"options", o.to_json()},
                                   {"sources", sources.to_json()}};
  const fs::path dir = data::data_dir_for(spec);
  const std::string stem = fmt::format("{}-{}", spec.split, sha256_hex(identity.dump()).substr(0, 16));
  if (std::optional<Scenes> cached = read_cache(dir, stem, identity, o))
    return std::make_unique<MnistScenes>(o, std::move(*cached));
  Digits digits = read_digits(sources);
  if (o.digits == DigitSource::test_halves) digits = half_of(std::move(digits), spec.split, sources.images.path);
  Scenes scenes = generate(o, digits, spec.seed, spec.split);
  write_cache(dir, stem, identity, o, scenes);
  return std::make_unique<MnistScenes>(o, std::move(scenes));
}

}  // namespace d5::detection
