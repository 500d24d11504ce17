#pragma once
// ONNX I/O (library d5_onnx, built when ONNX is found): TensorProto files to and from d5::Tensor,
// ModelProto loading, node attributes to d5::Attributes. Errors name the file, tensor or
// attribute: FormatError for malformed data, Unimplemented for valid ONNX that d5 cannot
// represent (string tensors, external data, subgraph attributes).
#include <cstdint>
#include <string>

#include <onnx/onnx_pb.h>

#include "deep500/op/attributes.h"
#include "deep500/core/tensor.h"

namespace d5::onnx_io {

// ONNX TensorProto.DataType values d5 understands (the numbers are ONNX's).
enum OnnxDataType : int32_t {
  kFloat = 1, kUint8 = 2, kInt8 = 3, kInt16 = 5, kInt32 = 6, kInt64 = 7, kBool = 9, kFloat16 = 10,
  kDouble = 11, kBfloat16 = 16,
};

// "FLOAT", "STRING", ...; "DataType(42)" for values ONNX does not define.
std::string onnx_type_name(int32_t data_type);
bool has_d5_dtype(int32_t data_type);
// Unimplemented naming the type (and `what`, e.g. a tensor name) when d5 has no such dtype.
DType dtype_from_onnx(int32_t data_type, const std::string& what = "");
int32_t onnx_type_of(DType t);

// `what` names the tensor in messages (a file name, "initializer 'w'"); the proto's own name is
// used when it is empty. FormatError when the data does not match dims and data_type;
// Unimplemented for segments and types d5 has no dtype for.
//
// External data (data_location EXTERNAL): the bytes are read from the file `location` relative to
// `base_dir` (the model's directory), starting at `offset`, `length` bytes (to the end of the
// file when absent), little-endian as raw_data. FormatError naming the tensor for a location that
// is absolute or leaves base_dir, a range beyond the end of the file, or a byte count that does not
// match dims; IoError when the file cannot be read; Unimplemented when base_dir is empty (the
// caller does not know where the model lives).
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& what = "",
                         const std::string& base_dir = "");

// Raw: little-endian bytes in raw_data (what onnx.numpy_helper writes). Typed: float_data,
// double_data, int32_data (also int8/int16/uint8/bool and the 16-bit float bit patterns) or
// int64_data.
enum class ProtoEncoding { Raw, Typed };
onnx::TensorProto tensor_to_proto(const Tensor& t, const std::string& name = "",
                                  ProtoEncoding encoding = ProtoEncoding::Raw);

// A serialized TensorProto (input_0.pb, ...). IoError when it cannot be read, FormatError naming
// the file when it is not a TensorProto.
Tensor read_tensor_file(const std::string& path);
void write_tensor_file(const std::string& path, const Tensor& t, const std::string& name = "",
                       ProtoEncoding encoding = ProtoEncoding::Raw);

// IoError when the file cannot be read; FormatError naming the file when it is not an ONNX model
// (unparsable protobuf, or no graph).
onnx::ModelProto load_model(const std::string& path);

// "" and "ai.onnx" are both the default operator set.
bool is_default_domain(const std::string& domain);
// The opset version imported for the default domain; FormatError when the model imports none.
int64_t default_opset(const onnx::ModelProto& model);

// The kind an attribute holds: its `type`, or, when an old writer left that unset, the kind of
// the field that holds its value (UNDEFINED when none does).
onnx::AttributeProto::AttributeType attribute_type(const onnx::AttributeProto& a);

// INT, FLOAT, STRING, INTS, FLOATS, STRINGS and TENSOR attributes; Unimplemented naming the
// node and attribute for GRAPH(S), SPARSE_TENSOR(S) and TYPE_PROTO(S). base_dir: where TENSOR
// attributes with external data live (see tensor_from_proto).
Attributes attributes_from_node(const onnx::NodeProto& node, const std::string& base_dir = "");

}  // namespace d5::onnx_io
