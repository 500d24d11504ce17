// The "npy" format: NPY headers of every version, dtype conversion, and refusals.
#include <gtest/gtest.h>

#include <cstring>

#include "data_test_util.h"
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"

namespace d5::test {

namespace {

std::unique_ptr<Dataset> open_npy(const std::string& dir, std::map<std::string, std::string> options = {}) {
  register_builtin_datasets();
  DatasetSpec spec;
  spec.name = "npy";
  spec.data_dir = dir;
  spec.options = std::move(options);
  return open_dataset(spec);
}

// An NPY file with a hand-written header: version `major`, header dict `dict`, then `data`.
void write_npy_raw(const std::string& path, int major, const std::string& dict, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  std::string header = dict;
  const size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + header.size() + 1) % 16 != 0) header += ' ';
  header += '\n';
  const size_t n = header.size();
  out.push_back(static_cast<uint8_t>(n));
  out.push_back(static_cast<uint8_t>(n >> 8));
  if (major > 1) {
    out.push_back(static_cast<uint8_t>(n >> 16));
    out.push_back(static_cast<uint8_t>(n >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  write_bytes(path, out);
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST(Npy, RoundTripsF32InputsAndI64Labels) {
  TempDir dir;
  Tensor inputs(DType::f32, Shape{4, 2, 3});
  for (int64_t i = 0; i < inputs.numel(); ++i) inputs.set(i, 0.25 * static_cast<double>(i) - 1);
  write_npy_file(dir.file("inputs.npy"), inputs);
  write_npy_file(dir.file("labels.npy"), Tensor::from_values<int64_t>(Shape{4}, {3, 0, 2, 0}));
  const NpyHeader h = read_npy_header(dir.file("inputs.npy"));
  EXPECT_EQ(h.descr, "<f4");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(h.data_offset % 64, 0);  // numpy's alignment

  const auto ds = open_npy(dir.path.string());
  EXPECT_EQ(ds->size(), 4);
  EXPECT_EQ(ds->classes(), 4);  // max label + 1
  EXPECT_EQ(ds->sample_descs().at(kDataInput).shape, (Shape{2, 3}));
  const int64_t idx[] = {2, 0};
  const Batch b = ds->fetch(idx);
  for (int64_t e = 0; e < 6; ++e) {
    EXPECT_EQ(b.at(kDataInput).get(e), inputs.get(12 + e));
    EXPECT_EQ(b.at(kDataInput).get(6 + e), inputs.get(e));
  }
  EXPECT_EQ(b.at(kDataLabels).get(0), 2);
  EXPECT_EQ(b.at(kDataLabels).get(1), 3);
  EXPECT_EQ(ds->label(3), 0);
  EXPECT_EQ(open_npy(dir.path.string(), {{"classes", "10"}})->classes(), 10);
  expect_error<FormatError>([&] { open_npy(dir.path.string(), {{"classes", "3"}}); }, {"label 3", "classes=3"});
}

TEST(Npy, ConvertsEveryInputDtypeAndReadsVersions2And3) {
  TempDir dir;
  write_npy_raw(dir.file("labels.npy"), 3, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1), }", {1, 0});
  struct Case {
    std::string descr;
    std::vector<uint8_t> data;
  };
  const std::vector<Case> cases = {
      {"<f8", as_bytes(std::vector<double>{1.5, -2, 3, 4})},
      {"|u1", {1, 2, 200, 4}},
      {"|i1", {1, 2, static_cast<uint8_t>(-3), 4}},
      {"<i2", as_bytes(std::vector<int16_t>{1, 2, -300, 4})},
      {"<u2", as_bytes(std::vector<uint16_t>{1, 2, 60000, 4})},
      {"<i4", as_bytes(std::vector<int32_t>{1, 2, -70000, 4})},
      {"<i8", as_bytes(std::vector<int64_t>{1, 2, -5, 4})},
  };
  const std::vector<double> third = {3, 200, -3, -300, 60000, -70000, -5};
  for (size_t c = 0; c < cases.size(); ++c) {
    write_npy_raw(dir.file("inputs.npy"), 2,
                  "{'descr': '" + cases[c].descr + "', 'fortran_order': False, 'shape': (2, 2), }", cases[c].data);
    const auto ds = open_npy(dir.path.string());
    const int64_t idx[] = {1};
    const Batch b = ds->fetch(idx);
    EXPECT_EQ(b.at(kDataInput).dtype(), DType::f32);
    EXPECT_EQ(b.at(kDataInput).get(0), third[c]) << cases[c].descr;
    EXPECT_EQ(b.at(kDataLabels).get(0), 0) << cases[c].descr;
  }
}

// Found by fuzz_npy (fuzz/regressions/npy): the element count times the item size overflowed int64
// (undefined behaviour) before the size check, and extents after a zero were never checked.
TEST(Npy, ShapesOfMoreThan2To63BytesAreFormatErrors) {
  TempDir dir;
  const std::string path = dir.file("x.npy");
  for (const char* shape : {"(2551111111111111266,)", "(82, 311111111111111113)", "(0, 1099511627776, 1099511627776)"}) {
    write_npy_raw(path, 1, fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", shape), {});
    expect_error<FormatError>([&] { read_npy_header(path); }, {path, "more than 2^63 bytes"});
  }
  write_npy_raw(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776), }", {});
  EXPECT_EQ(read_npy_header(path).shape, (std::vector<int64_t>{0, int64_t{1} << 40}));  // empty, and fits
}

TEST(Npy, RefusesWhatItCannotRead) {
  TempDir dir;
  const std::string inputs = dir.file("inputs.npy"), labels = dir.file("labels.npy");
  write_npy_file(labels, Tensor::from_values<int64_t>(Shape{2}, {0, 1}));
  const auto floats = as_bytes(std::vector<float>{1, 2, 3, 4});

  write_npy_raw(inputs, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", floats);
  expect_error<Unimplemented>([&] { open_npy(dir.path.string()); }, {inputs, "Fortran", "ascontiguousarray"});
  write_npy_raw(inputs, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", floats);
  expect_error<Unimplemented>([&] { open_npy(dir.path.string()); }, {inputs, "big-endian"});
  write_npy_raw(inputs, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 2), }", floats);
  expect_error<Unimplemented>([&] { open_npy(dir.path.string()); }, {inputs, "<c8", "astype"});

  write_npy_raw(inputs, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                std::vector<uint8_t>(floats.begin(), floats.end() - 3));
  const size_t header_end = read_bytes(inputs).size() - (floats.size() - 3);
  expect_error<FormatError>([&] { open_npy(dir.path.string()); },
                            {inputs, "truncated", "byte offset " + std::to_string(header_end),
                             std::to_string(header_end + floats.size() - 3)});

  write_bytes(inputs, {'n', 'o', 't', ' ', 'n', 'p', 'y', '!', '!', '!', '!', '!'});
  expect_error<FormatError>([&] { open_npy(dir.path.string()); }, {inputs, "magic"});
  write_bytes(inputs, {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0});
  expect_error<FormatError>([&] { open_npy(dir.path.string()); }, {inputs, "truncated"});

  write_npy_raw(inputs, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                as_bytes(std::vector<float>{1, 2, 3}));
  expect_error<FormatError>([&] { open_npy(dir.path.string()); }, {"3 samples", "2 labels"});

  write_npy_file(inputs, Tensor(DType::f32, Shape{2, 2}));
  write_npy_file(labels, Tensor::from_values<float>(Shape{2}, {0, 1}));
  expect_error<FormatError>([&] { open_npy(dir.path.string()); }, {labels, "integers"});
  write_npy_file(labels, Tensor::from_values<int32_t>(Shape{2}, {0, -1}));
  expect_error<FormatError>([&] { open_npy(dir.path.string()); }, {labels, "negative", "sample 1"});

  TempDir empty;
  expect_error<IoError>([&] { open_npy(empty.path.string()); }, {"inputs.npy", "--data-dir"});
}

}  // namespace d5::test
