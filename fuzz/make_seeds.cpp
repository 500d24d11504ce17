// d5_fuzz_seeds DIR: writes the binary seed corpora of the harnesses into DIR/<target>/ (fuzz/corpus
// holds its output; the results and recipe seeds are trimmed real files, copied by hand). Seeds
// are small valid files written by deep500's own writers, each prefixed with the selector byte its
// harness reads first (fuzz_common.h), so every mode of every harness starts from valid input.
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "deep500/onnx/onnx_io.h"
#include "deep500/train/checkpoint.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/train/image_datasets.h"
#include "lv2/images/jpeg.h"
#include "lv2/images/tar_archive.h"
#include "lv2/images/tfrecord.h"

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

fs::path g_out;

Bytes read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void seed(const std::string& target, const std::string& name, uint8_t selector, const Bytes& bytes,
          bool with_selector = true) {
  fs::create_directories(g_out / target);
  std::ofstream out(g_out / target / name, std::ios::binary);
  if (with_selector) out.put(static_cast<char>(selector));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Bytes gzip(const Bytes& in) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&z, static_cast<uLong>(in.size())) + 32);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

Bytes small_jpeg(int w, int h) {
  d5::RgbImage img{w, h, {}};
  for (int i = 0; i < w * h * 3; ++i) img.pixels.push_back(static_cast<uint8_t>(i * 37));
  return d5::encode_jpeg(img, 50);
}

void idx_seeds() {
  Bytes images = {0, 0, 8, 3};
  for (uint32_t d : {2u, 3u, 3u}) put_be32(images, d);
  for (int i = 0; i < 18; ++i) images.push_back(static_cast<uint8_t>(i * 14));
  Bytes labels = {0, 0, 8, 1};
  put_be32(labels, 3);
  labels.insert(labels.end(), {7, 0, 9});
  seed("idx", "images", 0, images, false);
  seed("idx", "labels", 0, labels, false);
  seed("idx", "images.gz", 0, gzip(images), false);
  seed("idx", "labels.gz", 0, gzip(labels), false);
}

void npy_seeds(const fs::path& tmp) {
  const d5::Tensor x = d5::Tensor::from_values<float>(d5::Shape{2, 3}, {0.f, 1.f, 2.f, 3.f, 4.f, 5.f});
  const d5::Tensor y = d5::Tensor::from_values<int64_t>(d5::Shape{2}, {1, 0});
  const d5::Tensor u = d5::Tensor::from_values<uint8_t>(d5::Shape{2, 1}, {3, 4});
  d5::write_npy_file((tmp / "x.npy").string(), x);
  d5::write_npy_file((tmp / "y.npy").string(), y);
  d5::write_npy_file((tmp / "u.npy").string(), u);
  const Bytes xs = read_all(tmp / "x.npy"), ys = read_all(tmp / "y.npy"), us = read_all(tmp / "u.npy");
  seed("npy", "header-f4", 0, xs);
  seed("npy", "header-i8", 0, ys);
  for (const auto& [name, labels] : {std::pair{"dataset-f4-i8", ys}, std::pair{"dataset-f4-u1", us}}) {
    Bytes b = {static_cast<uint8_t>(xs.size() & 0xff), static_cast<uint8_t>(xs.size() >> 8)};
    b.insert(b.end(), xs.begin(), xs.end());
    b.insert(b.end(), labels.begin(), labels.end());
    seed("npy", name, 1, b);
  }
}

Bytes cifar_records(int label_bytes, int n) {
  Bytes b;
  for (int r = 0; r < n; ++r) {
    for (int l = 0; l < label_bytes; ++l) b.push_back(static_cast<uint8_t>(r + l));
    for (int i = 0; i < 3072; ++i) b.push_back(static_cast<uint8_t>(i + r));
  }
  return b;
}

Bytes tar_of(const fs::path& path, const std::vector<std::pair<std::string, Bytes>>& files, bool gz,
             d5::TarWriter::LongNames names = d5::TarWriter::LongNames::Gnu) {
  {
    d5::TarWriter w(path.string(), gz, names);
    for (const auto& [name, data] : files) w.add_file(name, data, 1700000000);
    w.finish();
  }
  return read_all(path);
}

void cifar_seeds(const fs::path& tmp) {
  seed("cifar", "cifar10.bin", 0, cifar_records(1, 2));
  seed("cifar", "cifar100.bin", 1, cifar_records(2, 2));
  seed("cifar", "cifar100-coarse.bin", 5, cifar_records(2, 1));
  seed("cifar", "cifar10.tar.gz", 2,
       tar_of(tmp / "c10.tar.gz", {{"cifar-10-batches-bin/test_batch.bin", cifar_records(1, 1)}}, true));
  seed("cifar", "cifar100.tar.gz", 3,
       tar_of(tmp / "c100.tar.gz", {{"cifar-100-binary/test.bin", cifar_records(2, 1)}}, true));
}

void tar_seeds(const fs::path& tmp) {
  const Bytes jpeg = small_jpeg(4, 4);
  const std::vector<std::pair<std::string, Bytes>> files = {{"n01/a.JPEG", jpeg}, {"n02/b.jpg", jpeg},
                                                            {"readme.txt", {'h', 'i'}}};
  const Bytes plain = tar_of(tmp / "a.tar", files, false);
  seed("tar", "plain.tar", 0, plain);
  seed("tar", "plain-index.tar", 1, plain);
  seed("tar", "plain.tar.gz", 0, tar_of(tmp / "a.tar.gz", files, true));
  const std::string long_dir(120, 'd');
  seed("tar", "gnu-long.tar", 0, tar_of(tmp / "l.tar", {{long_dir + "/x.jpg", jpeg}}, false));
  seed("tar", "pax-long.tar", 1,
       tar_of(tmp / "p.tar", {{long_dir + "/x.jpg", jpeg}}, false, d5::TarWriter::LongNames::Pax));
  const Bytes inner = tar_of(tmp / "n01.tar", {{"a.JPEG", jpeg}}, false);
  seed("tar", "nested-index.tar", 1, tar_of(tmp / "outer.tar", {{"n01.tar", inner}}, false));

  const d5::ImageTarIndex index = d5::build_image_tar_index((tmp / "a.tar").string());
  const std::string text = d5::serialize_image_tar_index(index);
  seed("tar_index", "index", 0, Bytes(text.begin(), text.end()));
  seed("tar_index", "index-crc-fixed", 1, Bytes(text.begin(), text.end()));
}

Bytes example_bytes(const Bytes& jpeg, int64_t label) {
  d5::TfExample ex;
  ex["image/encoded"].kind = d5::TfFeature::Kind::Bytes;
  ex["image/encoded"].bytes = {std::string(jpeg.begin(), jpeg.end())};
  ex["image/class/label"].kind = d5::TfFeature::Kind::Int64;
  ex["image/class/label"].ints = {label};
  ex["image/scale"].kind = d5::TfFeature::Kind::Float;
  ex["image/scale"].floats = {0.5f, 2.f};
  return d5::serialize_tf_example(ex);
}

void tfrecord_seeds(const fs::path& tmp) {
  const Bytes jpeg = small_jpeg(5, 3);
  const Bytes ex = example_bytes(jpeg, 2);
  {
    d5::TfRecordWriter w((tmp / "a.tfrecord").string());
    w.write(ex);
    w.write(example_bytes(jpeg, 0));
    w.close();
  }
  seed("tfrecord", "file", 0, read_all(tmp / "a.tfrecord"));
  seed("tfrecord", "record", 1, ex);
  seed("tfrecord", "example", 2, ex);
  seed("tfrecord", "dataset", 3, ex);
  seed("tfrecord", "dataset-offset1", 3 | 8, example_bytes(jpeg, 1));
}

void checkpoint_seeds(const fs::path& tmp) {
  std::map<std::string, d5::Tensor> tensors;
  tensors.emplace("w", d5::Tensor::from_values<float>(d5::Shape{2, 2}, {1.f, -2.f, 3.5f, 0.f}));
  tensors.emplace("step", d5::Tensor::from_values<int64_t>(d5::Shape{}, {7}));
  d5::save_checkpoint((tmp / "c.d5ckpt").string(), tensors, {{"epoch", 3}, {"optimizer", "sgd"}});
  const Bytes c = read_all(tmp / "c.d5ckpt");
  seed("checkpoint", "two-tensors", 0, c);
  seed("checkpoint", "two-tensors-crc-fixed", 1, c);
}

void jpeg_seeds() {
  seed("jpeg", "4x4", 0x24, small_jpeg(4, 4));
  seed("jpeg", "17x9", 0x37, small_jpeg(17, 9));
  seed("jpeg", "1x1", 0x00, small_jpeg(1, 1));
}

Bytes serialized(const google::protobuf::MessageLite& m) {
  const std::string s = m.SerializeAsString();
  return Bytes(s.begin(), s.end());
}

onnx::ValueInfoProto value_info(const std::string& name, std::vector<int64_t> dims, bool symbolic_batch) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = t->mutable_shape()->add_dim();
    if (i == 0 && symbolic_batch) {
      d->set_dim_param("N");
    } else {
      d->set_dim_value(dims[i]);
    }
  }
  return v;
}

onnx::ModelProto gemm_model(bool external) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("d5_fuzz_seeds");
  auto* opset = m.add_opset_import();
  opset->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("gemm_relu");
  *g->add_input() = value_info("x", {1, 4}, true);
  *g->add_output() = value_info("y", {1, 2}, true);
  const std::vector<float> w = {1, 0, 0, 1, 1, 1, 0, -1};
  auto* wt = g->add_initializer();
  wt->set_name("w");
  wt->add_dims(4);
  wt->add_dims(2);
  wt->set_data_type(onnx::TensorProto::FLOAT);
  if (external) {
    wt->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = wt->add_external_data();
    loc->set_key("location");
    loc->set_value("weights.bin");
    auto* off = wt->add_external_data();
    off->set_key("offset");
    off->set_value("64");
    auto* len = wt->add_external_data();
    len->set_key("length");
    len->set_value("32");
  } else {
    wt->set_raw_data(std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float)));
  }
  auto* bt = g->add_initializer();
  bt->set_name("b");
  bt->add_dims(2);
  bt->set_data_type(onnx::TensorProto::FLOAT);
  bt->add_float_data(0.5f);
  bt->add_float_data(-0.5f);
  auto* gemm = g->add_node();
  gemm->set_op_type("Gemm");
  gemm->set_name("gemm");
  gemm->add_input("x");
  gemm->add_input("w");
  gemm->add_input("b");
  gemm->add_output("h");
  auto* alpha = gemm->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(1.f);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("h");
  relu->add_output("y");
  return m;
}

onnx::ModelProto conv_model() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(11);
  auto* g = m.mutable_graph();
  g->set_name("conv");
  *g->add_input() = value_info("x", {1, 1, 4, 4}, false);
  *g->add_output() = value_info("y", {1, 2}, false);
  auto* k = g->add_initializer();
  *k = d5::onnx_io::tensor_to_proto(d5::Tensor::from_values<float>(d5::Shape{2, 1, 2, 2}, {1, 0, 0, 1, 0, 1, 1, 0}), "k");
  auto* shape = g->add_initializer();
  *shape = d5::onnx_io::tensor_to_proto(d5::Tensor::from_values<int64_t>(d5::Shape{2}, {1, -1}), "shape",
                                        d5::onnx_io::ProtoEncoding::Typed);
  auto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->add_input("x");
  conv->add_input("k");
  conv->add_output("c");
  auto* pads = conv->add_attribute();
  pads->set_name("strides");
  pads->set_type(onnx::AttributeProto::INTS);
  pads->add_ints(2);
  pads->add_ints(2);
  auto* pool = g->add_node();
  pool->set_op_type("GlobalAveragePool");
  pool->add_input("c");
  pool->add_output("p");
  auto* reshape = g->add_node();
  reshape->set_op_type("Reshape");
  reshape->add_input("p");
  reshape->add_input("shape");
  reshape->add_output("y");
  return m;
}

void onnx_seeds() {
  seed("onnx", "gemm-relu.onnx", 0, serialized(gemm_model(false)));
  seed("onnx", "gemm-relu-external.onnx", 0, serialized(gemm_model(true)));
  seed("onnx", "conv-pool-reshape.onnx", 0, serialized(conv_model()));
  seed("onnx", "tensor-raw.pb", 1,
       serialized(d5::onnx_io::tensor_to_proto(d5::Tensor::from_values<float>(d5::Shape{3}, {1.f, 2.f, 3.f}), "t")));
  seed("onnx", "tensor-typed.pb", 1,
       serialized(d5::onnx_io::tensor_to_proto(d5::Tensor::from_values<int32_t>(d5::Shape{2, 2}, {1, -2, 3, 4}), "t",
                                               d5::onnx_io::ProtoEncoding::Typed)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: d5_fuzz_seeds DIR (fuzz/corpus)\n");
    return 2;
  }
  g_out = argv[1];
  const fs::path tmp = fs::temp_directory_path() / ("d5_fuzz_seeds." + std::to_string(::getpid()));
  fs::create_directories(tmp);
  idx_seeds();
  npy_seeds(tmp);
  cifar_seeds(tmp);
  tar_seeds(tmp);
  tfrecord_seeds(tmp);
  checkpoint_seeds(tmp);
  jpeg_seeds();
  onnx_seeds();
  fs::remove_all(tmp);
  return 0;
}
