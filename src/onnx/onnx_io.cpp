#include "deep500/onnx/onnx_io.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "deep500/core/error.h"

namespace d5::onnx_io {

// raw_data is little-endian by definition; copying it verbatim is only right on such hosts.
static_assert(std::endian::native == std::endian::little, "ONNX raw_data decoding assumes a little-endian host");

namespace {

using onnx::TensorProto;

struct TypeInfo {
  int32_t onnx;
  DType d5;
};
constexpr TypeInfo kTypes[] = {
    {kFloat, DType::f32}, {kUint8, DType::u8},  {kInt8, DType::i8},       {kInt16, DType::i16},
    {kInt32, DType::i32}, {kInt64, DType::i64}, {kBool, DType::boolean}, {kFloat16, DType::f16},
    {kDouble, DType::f64}, {kBfloat16, DType::bf16},
};

std::string describe(const TensorProto& p, const std::string& what) {
  if (!what.empty()) return what;
  return p.name().empty() ? std::string("tensor") : fmt::format("tensor '{}'", p.name());
}

// Element count of dims, or FormatError for negative or overflowing dims.
int64_t checked_numel(const TensorProto& p, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    D5_CHECK(d >= 0, FormatError, "{}: negative dimension {}", what, d);
    D5_CHECK(!__builtin_mul_overflow(n, d, &n), FormatError, "{}: the element count of its dims overflows", what);
  }
  return n;
}

void check_count(int64_t have, int64_t numel, const char* field, const std::string& what) {
  D5_CHECK(have == numel, FormatError, "{}: {} holds {} values but dims give {} elements", what, field, have,
           numel);
}

// Values from int32_data for the narrow types ONNX stores there, range-checked so that a
// corrupt file cannot wrap silently.
void fill_from_int32(const TensorProto& p, Tensor& t, const std::string& what) {
  const auto& v = p.int32_data();
  auto narrow = [&]<typename T>(T* dst, int64_t lo, int64_t hi) {
    for (int i = 0; i < v.size(); ++i) {
      D5_CHECK(v[i] >= lo && v[i] <= hi, FormatError, "{}: int32_data[{}] = {} is out of range for {}", what, i,
               v[i], onnx_type_name(p.data_type()));
      dst[i] = static_cast<T>(v[i]);
    }
  };
  switch (t.dtype()) {
    case DType::i32: std::copy(v.begin(), v.end(), t.data_as<int32_t>()); break;
    case DType::i16: narrow(t.data_as<int16_t>(), INT16_MIN, INT16_MAX); break;
    case DType::i8: narrow(t.data_as<int8_t>(), INT8_MIN, INT8_MAX); break;
    case DType::u8: narrow(t.data_as<uint8_t>(), 0, UINT8_MAX); break;
    case DType::f16:
    case DType::bf16: narrow(static_cast<uint16_t*>(t.data()), 0, UINT16_MAX); break;  // bit patterns
    case DType::boolean:
      for (int i = 0; i < v.size(); ++i) t.data_as<bool>()[i] = v[i] != 0;
      break;
    default: D5_THROW(Internal, "{}: int32_data used for {}", what, to_string(t.dtype()));
  }
}

}  // namespace

std::string onnx_type_name(int32_t data_type) {
  if (onnx::TensorProto_DataType_IsValid(data_type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(data_type));
  return fmt::format("DataType({})", data_type);
}

bool has_d5_dtype(int32_t data_type) {
  for (const auto& t : kTypes)
    if (t.onnx == data_type) return true;
  return false;
}

DType dtype_from_onnx(int32_t data_type, const std::string& what) {
  for (const auto& t : kTypes)
    if (t.onnx == data_type) return t.d5;
  D5_THROW(Unimplemented, "{}{}element type {} is not supported by d5 (supported: FLOAT, DOUBLE, FLOAT16, "
           "BFLOAT16, INT8, INT16, INT32, INT64, UINT8, BOOL)",
           what, what.empty() ? "" : ": ", onnx_type_name(data_type));
}

int32_t onnx_type_of(DType d) {
  for (const auto& t : kTypes)
    if (t.d5 == d) return t.onnx;
  D5_THROW(Internal, "dtype {} has no ONNX equivalent", to_string(d));
}

namespace {

// A non-negative integer from an external_data value ("offset", "length").
int64_t external_int(const std::string& value, const std::string& key, const std::string& what) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  D5_CHECK(used == value.size() && !value.empty() && v >= 0, FormatError,
           "{}: external data '{}' is '{}', not a non-negative integer", what, key, value);
  return v;
}

// The bytes of an external-data tensor (ONNX's external data: location, offset, length).
std::string read_external_data(const TensorProto& p, const std::string& what, const std::string& base_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : p.external_data()) {
    if (e.key() == "location") location = e.value();
    else if (e.key() == "offset") offset = external_int(e.value(), "offset", what);
    else if (e.key() == "length") length = external_int(e.value(), "length", what);
  }
  D5_CHECK(!location.empty(), FormatError, "{}: data_location is EXTERNAL but external_data has no 'location'", what);
  D5_CHECK(!base_dir.empty(), Unimplemented,
           "{}: external data (stored in '{}') needs the model's directory; load the model from its file", what,
           location);
  const std::filesystem::path rel(location);
  // ONNX requires locations relative to the model; refusing ".." keeps a model from reading
  // arbitrary files.
  bool escapes = rel.is_absolute() || rel.has_root_name();
  for (const auto& part : rel) escapes = escapes || part == "..";
  D5_CHECK(!escapes, FormatError,
           "{}: external data location '{}' must be a relative path inside the model's directory", what, location);
  const std::string path = (std::filesystem::path(base_dir) / rel).string();
  std::ifstream in(path, std::ios::binary);
  D5_CHECK(in.good(), IoError, "{}: cannot open its external data file '{}'", what, path);
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  D5_CHECK(offset <= size, FormatError, "{}: external data offset {} is beyond the end of '{}' ({} bytes)", what,
           offset, path, size);
  if (length < 0) length = size - offset;
  D5_CHECK(length <= size - offset, FormatError,
           "{}: external data [{}, {}) is beyond the end of '{}' ({} bytes)", what, offset, offset + length, path,
           size);
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  D5_CHECK(in.good() || length == 0, IoError, "{}: error reading external data from '{}'", what, path);
  return bytes;
}

// Raw little-endian bytes (raw_data or external data) into a tensor of dims and data_type.
Tensor tensor_from_bytes(const TensorProto& p, const std::string& raw, DType dtype, const Shape& shape,
                         int64_t numel, const char* source, const std::string& what) {
  const size_t elem = dtype_size(dtype);
  D5_CHECK(raw.size() % elem == 0 && raw.size() / elem == static_cast<uint64_t>(numel), FormatError,
           "{}: {} holds {} bytes, but dims {} give {} elements of {} ({} bytes each)", what, source, raw.size(),
           shape.to_string(), numel, onnx_type_name(p.data_type()), elem);
  Tensor t(dtype, shape);
  if (dtype == DType::boolean) {  // any non-zero byte is true; a bool must hold exactly 0 or 1
    for (int64_t i = 0; i < numel; ++i) t.data_as<bool>()[i] = raw[static_cast<size_t>(i)] != 0;
  } else if (numel > 0) {
    std::memcpy(t.data(), raw.data(), raw.size());
  }
  return t;
}

}  // namespace

Tensor tensor_from_proto(const TensorProto& p, const std::string& what_in, const std::string& base_dir) {
  const std::string what = describe(p, what_in);
  D5_CHECK(!p.has_segment(), Unimplemented, "{}: segmented tensors are not supported", what);
  D5_CHECK(p.data_type() != TensorProto::UNDEFINED, FormatError, "{}: data_type is missing (UNDEFINED)", what);
  const DType dtype = dtype_from_onnx(p.data_type(), what);
  const int64_t numel = checked_numel(p, what);
  const Shape shape(std::vector<int64_t>(p.dims().begin(), p.dims().end()));

  if (p.data_location() == TensorProto::EXTERNAL)
    return tensor_from_bytes(p, read_external_data(p, what, base_dir), dtype, shape, numel, "external data", what);
  if (p.has_raw_data()) return tensor_from_bytes(p, p.raw_data(), dtype, shape, numel, "raw_data", what);

  switch (dtype) {
    case DType::f32: {
      check_count(p.float_data_size(), numel, "float_data", what);
      Tensor t(dtype, shape);
      std::copy(p.float_data().begin(), p.float_data().end(), t.data_as<float>());
      return t;
    }
    case DType::f64: {
      check_count(p.double_data_size(), numel, "double_data", what);
      Tensor t(dtype, shape);
      std::copy(p.double_data().begin(), p.double_data().end(), t.data_as<double>());
      return t;
    }
    case DType::i64: {
      check_count(p.int64_data_size(), numel, "int64_data", what);
      Tensor t(dtype, shape);
      std::copy(p.int64_data().begin(), p.int64_data().end(), t.data_as<int64_t>());
      return t;
    }
    default: {
      check_count(p.int32_data_size(), numel, "int32_data", what);
      Tensor t(dtype, shape);
      fill_from_int32(p, t, what);
      return t;
    }
  }
}

TensorProto tensor_to_proto(const Tensor& t, const std::string& name, ProtoEncoding encoding) {
  D5_CHECK_ARG(t.defined(), "tensor_to_proto: tensor '{}' is undefined", name);
  D5_CHECK_ARG(t.device() == Device::cpu(), "tensor_to_proto: tensor '{}' is on {}; copy it to the host first",
               name, t.device().to_string());
  TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx_type_of(t.dtype()));
  for (int64_t d : t.shape().dims()) p.add_dims(d);
  const int64_t n = t.numel();
  if (encoding == ProtoEncoding::Raw) {
    if (t.dtype() == DType::boolean) {
      std::string raw(static_cast<size_t>(n), '\0');
      for (int64_t i = 0; i < n; ++i) raw[static_cast<size_t>(i)] = t.data_as<bool>()[i] ? 1 : 0;
      p.set_raw_data(std::move(raw));
    } else {
      p.set_raw_data(std::string(static_cast<const char*>(t.data()), t.bytes()));
    }
    return p;
  }
  switch (t.dtype()) {
    case DType::f32:
      for (float v : t.span<float>()) p.add_float_data(v);
      break;
    case DType::f64:
      for (double v : t.span<double>()) p.add_double_data(v);
      break;
    case DType::i64:
      for (int64_t v : t.span<int64_t>()) p.add_int64_data(v);
      break;
    case DType::f16:
    case DType::bf16: {
      const auto* bits = static_cast<const uint16_t*>(t.data());
      for (int64_t i = 0; i < n; ++i) p.add_int32_data(bits[i]);
      break;
    }
    default:  // i8, i16, i32, u8, bool: exact through double
      for (int64_t i = 0; i < n; ++i) p.add_int32_data(static_cast<int32_t>(t.get(i)));
  }
  return p;
}

namespace {
// One read into a buffer of the file's size: models are 100 MB and more, and growing a stream
// buffer would copy them several times.
std::string read_binary(const std::string& path) {
  std::error_code ec;
  D5_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec), IoError,
           "'{}' is not a regular file", path);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  D5_CHECK(in.good(), IoError, "cannot open '{}'", path);
  const std::streamoff size = in.tellg();
  D5_CHECK(size >= 0, IoError, "cannot read the size of '{}'", path);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  D5_CHECK(in.gcount() == size, IoError, "error reading '{}'", path);
  return bytes;
}
}  // namespace

Tensor read_tensor_file(const std::string& path) {
  const std::string bytes = read_binary(path);
  TensorProto p;
  D5_CHECK(p.ParseFromString(bytes), FormatError,
           "{}: not a serialized ONNX TensorProto (protobuf parsing failed: truncated or another format)", path);
  return tensor_from_proto(p, path);
}

void write_tensor_file(const std::string& path, const Tensor& t, const std::string& name, ProtoEncoding encoding) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  D5_CHECK(out.good(), IoError, "cannot create '{}'", path);
  D5_CHECK(tensor_to_proto(t, name, encoding).SerializeToOstream(&out) && out.flush(), IoError,
           "error writing '{}'", path);
}

onnx::ModelProto load_model(const std::string& path) {
  const std::string bytes = read_binary(path);
  onnx::ModelProto m;
  D5_CHECK(m.ParseFromString(bytes), FormatError,
           "{}: not an ONNX model (protobuf parsing failed: truncated or another format)", path);
  // Protobuf accepts many byte strings (unknown fields are kept), so a parse alone proves little.
  D5_CHECK(m.has_graph(), FormatError, "{}: not an ONNX model (it has no graph)", path);
  return m;
}

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (is_default_domain(o.domain())) return o.version();
  // IR versions before 3 had no opset_import; their operators are opset 1.
  D5_CHECK(model.ir_version() < 3 && model.opset_import_size() == 0, FormatError,
           "the model imports no opset for the default ONNX domain");
  return 1;
}

using onnx::AttributeProto;

AttributeProto::AttributeType attribute_type(const AttributeProto& a) {
  if (a.type() != AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return AttributeProto::FLOAT;
  if (a.has_i()) return AttributeProto::INT;
  if (a.has_s()) return AttributeProto::STRING;
  if (a.has_t()) return AttributeProto::TENSOR;
  if (a.has_g()) return AttributeProto::GRAPH;
  if (a.floats_size()) return AttributeProto::FLOATS;
  if (a.ints_size()) return AttributeProto::INTS;
  if (a.strings_size()) return AttributeProto::STRINGS;
  if (a.graphs_size()) return AttributeProto::GRAPHS;
  return AttributeProto::UNDEFINED;
}

Attributes attributes_from_node(const onnx::NodeProto& node, const std::string& base_dir) {
  const std::string label = node.name().empty() ? node.op_type() : fmt::format("{} '{}'", node.op_type(), node.name());
  Attributes attrs;
  attrs.context = label;
  for (const auto& a : node.attribute()) {
    D5_CHECK(a.ref_attr_name().empty(), Unimplemented,
             "{}: attribute '{}' refers to a function attribute ('{}'); function bodies are not supported", label,
             a.name(), a.ref_attr_name());
    const auto type = attribute_type(a);
    switch (type) {
      case AttributeProto::INT: attrs.set(a.name(), int64_t{a.i()}); break;
      case AttributeProto::FLOAT: attrs.set(a.name(), static_cast<double>(a.f())); break;
      case AttributeProto::STRING: attrs.set(a.name(), a.s()); break;
      case AttributeProto::INTS: attrs.set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end())); break;
      case AttributeProto::FLOATS:
        attrs.set(a.name(), std::vector<double>(a.floats().begin(), a.floats().end()));
        break;
      case AttributeProto::STRINGS:
        attrs.set(a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end()));
        break;
      case AttributeProto::TENSOR:
        attrs.set(a.name(),
                  tensor_from_proto(a.t(), fmt::format("{}: attribute '{}'", label, a.name()), base_dir));
        break;
      case AttributeProto::UNDEFINED:
        D5_THROW(FormatError, "{}: attribute '{}' has no type and no value", label, a.name());
      default:
        D5_THROW(Unimplemented, "{}: attribute '{}' is of type {}, which d5 does not support (subgraphs, sparse "
                 "tensors and type protos)",
                 label, a.name(), AttributeProto::AttributeType_Name(type));
    }
  }
  return attrs;
}

}  // namespace d5::onnx_io
