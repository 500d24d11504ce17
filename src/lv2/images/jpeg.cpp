// TurboJPEG 2.x API (tjDecompress2 / tjCompress2: Debian's libturbojpeg0-dev ships 2.1, which has
// no tj3* functions). Handles are per thread: a tjhandle must not be shared between threads.
#include "lv2/images/jpeg.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "deep500/core/error.h"

#ifdef D5_HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif

namespace d5 {

#ifdef D5_HAVE_TURBOJPEG

namespace {

// A handle that failed on damaged data can report garbage (a 0x0 header) for the next, valid
// image: after any failure the handle is replaced.
struct Handle {
  bool compress;
  tjhandle h = nullptr;
  explicit Handle(bool c) : compress(c) { make(); }
  ~Handle() { tjDestroy(h); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  void make() {
    h = compress ? tjInitCompress() : tjInitDecompress();
    if (!h) D5_THROW(Internal, "TurboJPEG: cannot create a handle: {}", tjGetErrorStr2(nullptr));
  }
  // The error message of the last call, then a fresh handle.
  std::string fail() {
    std::string msg = tjGetErrorStr2(h);
    tjDestroy(h);
    h = nullptr;
    make();
    return msg;
  }
};

Handle& decompressor() {
  thread_local Handle handle(false);
  return handle;
}
Handle& compressor() {
  thread_local Handle handle(true);
  return handle;
}

}  // namespace

bool jpeg_available() { return true; }

RgbImage decode_jpeg(std::span<const uint8_t> jpeg, const std::string& what) {
  Handle& handle = decompressor();
  tjhandle h = handle.h;
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  if (jpeg.empty()) D5_THROW(FormatError, "'{}' is not a valid JPEG: it is empty", what);
  if (tjDecompressHeader3(h, jpeg.data(), static_cast<unsigned long>(jpeg.size()), &w, &ht, &subsamp, &colorspace) !=
      0) {
    D5_THROW(FormatError, "'{}' is not a valid JPEG ({} bytes): {}", what, jpeg.size(), handle.fail());
  }
  if (w <= 0 || ht <= 0 || int64_t{w} * ht > (int64_t{1} << 28)) {
    handle.fail();
    D5_THROW(FormatError, "JPEG '{}' declares an implausible size {}x{}", what, w, ht);
  }
  // A Huffman-coded scan spends at least one bit on every 8x8 block of the first component (its DC
  // coefficient): at most 512 pixels per byte. A header that declares far more describes data that
  // is not there (a forged or cut file), and decoding it would still allocate and fill the whole
  // image: 54 bytes declaring 13825x14335 took seconds. The limit leaves a factor of 2 (rare
  // arithmetic-coded JPEGs can be denser; above it they are refused too).
  constexpr int64_t kMaxPixelsPerByte = 1024;
  if (int64_t{w} * ht > kMaxPixelsPerByte * static_cast<int64_t>(jpeg.size())) {
    handle.fail();
    D5_THROW(FormatError, "JPEG '{}' declares {}x{} pixels but holds only {} bytes (truncated or corrupt)", what, w,
             ht, jpeg.size());
  }
  RgbImage img;
  img.width = w;
  img.height = ht;
  img.pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(ht) * 3);
  // TurboJPEG cannot convert CMYK/YCCK to RGB itself: decode to CMYK and convert here.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<uint8_t> cmyk_pixels(cmyk ? static_cast<size_t>(w) * static_cast<size_t>(ht) * 4 : 0);
  // A damaged scan is a warning to libjpeg (it pads the image with gray); TurboJPEG 2.x reports
  // warnings as failures too, which is what we want: a corrupt sample must not pass silently.
  const int rc = tjDecompress2(h, jpeg.data(), static_cast<unsigned long>(jpeg.size()),
                               cmyk ? cmyk_pixels.data() : img.pixels.data(), w, 0, ht, cmyk ? TJPF_CMYK : TJPF_RGB,
                               TJFLAG_ACCURATEDCT);
  if (rc != 0) D5_THROW(FormatError, "JPEG '{}' is corrupt: {}", what, handle.fail());
  if (cmyk) {
    // Adobe CMYK JPEGs (the common kind) store inverted ink values, so R = C' * K' / 255.
    for (size_t i = 0, n = static_cast<size_t>(w) * static_cast<size_t>(ht); i < n; ++i) {
      const unsigned k = cmyk_pixels[4 * i + 3];
      for (int c = 0; c < 3; ++c) {
        img.pixels[3 * i + static_cast<size_t>(c)] = static_cast<uint8_t>((cmyk_pixels[4 * i + static_cast<size_t>(c)] * k + 127) / 255);
      }
    }
  }
  return img;
}

std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality) {
  D5_CHECK_ARG(quality >= 1 && quality <= 100, "JPEG quality must be in [1, 100], got {}", quality);
  D5_CHECK_ARG(image.width > 0 && image.height > 0 &&
                   image.pixels.size() == static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * 3,
               "encode_jpeg needs width * height * 3 RGB bytes ({}x{}, {} bytes given)", image.width, image.height,
               image.pixels.size());
  Handle& handle = compressor();
  tjhandle h = handle.h;
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(h, image.pixels.data(), image.width, 0, image.height, TJPF_RGB, &buf, &size, TJSAMP_420, quality,
                  TJFLAG_ACCURATEDCT) != 0) {
    tjFree(buf);
    D5_THROW(Internal, "TurboJPEG compression failed: {}", handle.fail());
  }
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  return out;
}

#else

bool jpeg_available() { return false; }

RgbImage decode_jpeg(std::span<const uint8_t>, const std::string& what) {
  D5_THROW(NotBuilt, "cannot decode JPEG '{}': deep500 was built without TurboJPEG (install libturbojpeg0-dev "
           "and reconfigure)", what);
}

std::vector<uint8_t> encode_jpeg(const RgbImage&, int) {
  D5_THROW(NotBuilt, "cannot encode JPEG: deep500 was built without TurboJPEG (install libturbojpeg0-dev and "
           "reconfigure)");
}

#endif

namespace {

// Source sample positions of the output pixels along one axis: index pair and weight of the second.
struct Taps {
  std::vector<int> i0, i1;
  std::vector<float> w1;
};

Taps taps(int src, int resized, int offset, int count) {
  Taps t;
  t.i0.resize(static_cast<size_t>(count));
  t.i1.resize(static_cast<size_t>(count));
  t.w1.resize(static_cast<size_t>(count));
  const double scale = static_cast<double>(src) / resized;
  for (int o = 0; o < count; ++o) {
    const double s = std::clamp((o + offset + 0.5) * scale - 0.5, 0.0, static_cast<double>(src - 1));
    const int i0 = static_cast<int>(s);
    const auto k = static_cast<size_t>(o);
    t.i0[k] = i0;
    t.i1[k] = std::min(i0 + 1, src - 1);
    t.w1[k] = static_cast<float>(s - i0);
  }
  return t;
}

}  // namespace

void preprocess_image(const RgbImage& img, const ImagePreprocess& p, float* out) {
  D5_CHECK_ARG(p.crop > 0 && p.resize >= p.crop, "image preprocessing needs 0 < crop <= resize (crop {}, resize {})",
               p.crop, p.resize);
  D5_CHECK_ARG(img.width > 0 && img.height > 0, "preprocess_image: empty image");
  // Shorter side -> resize; the longer one keeps the aspect ratio (rounded).
  int rw = 0, rh = 0;
  if (img.width <= img.height) {
    rw = p.resize;
    rh = std::max(p.crop, static_cast<int>(std::lround(static_cast<double>(img.height) * p.resize / img.width)));
  } else {
    rh = p.resize;
    rw = std::max(p.crop, static_cast<int>(std::lround(static_cast<double>(img.width) * p.resize / img.height)));
  }
  const Taps tx = taps(img.width, rw, (rw - p.crop) / 2, p.crop);
  const Taps ty = taps(img.height, rh, (rh - p.crop) / 2, p.crop);
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  static constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = p.imagenet_normalize ? 1.0f / (255.0f * kStd[c]) : 1.0f / 255.0f;
    shift[c] = p.imagenet_normalize ? -kMean[c] / kStd[c] : 0.0f;
  }
  // Separable: source rows are interpolated horizontally (into planar float rows, each computed
  // once and kept while consecutive output rows use it), then blended vertically, which vectorizes.
  const auto crop = static_cast<size_t>(p.crop);
  const size_t row_bytes = static_cast<size_t>(img.width) * 3;
  std::vector<size_t> ax(crop), bx(crop);
  for (size_t x = 0; x < crop; ++x) {
    ax[x] = static_cast<size_t>(tx.i0[x]) * 3;
    bx[x] = static_cast<size_t>(tx.i1[x]) * 3;
  }
  std::vector<float> slots[2] = {std::vector<float>(3 * crop), std::vector<float>(3 * crop)};
  int slot_row[2] = {-1, -1};
  const auto horizontal = [&](int sy, int keep) -> const float* {
    for (int s = 0; s < 2; ++s) {
      if (slot_row[s] == sy) return slots[s].data();
    }
    const int s = slot_row[0] == keep ? 1 : 0;
    slot_row[s] = sy;
    float* h = slots[s].data();
    const uint8_t* r = img.pixels.data() + static_cast<size_t>(sy) * row_bytes;
    for (size_t x = 0; x < crop; ++x) {
      const float w = tx.w1[x];
      for (size_t c = 0; c < 3; ++c) {
        const float l = r[ax[x] + c], rr = r[bx[x] + c];
        h[c * crop + x] = l + w * (rr - l);
      }
    }
    return h;
  };
  const size_t plane = crop * crop;
  for (size_t y = 0; y < crop; ++y) {
    const float* top = horizontal(ty.i0[y], ty.i1[y]);
    const float* bottom = horizontal(ty.i1[y], ty.i0[y]);  // keeps top's slot
    const float wy = ty.w1[y];
    for (size_t c = 0; c < 3; ++c) {
      const float* t = top + c * crop;
      const float* bt = bottom + c * crop;
      float* o = out + c * plane + y * crop;
      const float sc = scale[c], sh = shift[c];
      for (size_t x = 0; x < crop; ++x) o[x] = (t[x] + wy * (bt[x] - t[x])) * sc + sh;
    }
  }
}

void decode_jpeg_into(std::span<const uint8_t> jpeg, const std::string& what, const ImagePreprocess& p, float* out) {
  preprocess_image(decode_jpeg(jpeg, what), p, out);
}

}  // namespace d5
