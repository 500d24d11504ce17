#include "onnx_newer_schemas.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "deep500/core/error.h"
#include "deep500/onnx/onnx_io.h"

namespace d5::onnx_schemas {

namespace {

using A = onnx::AttributeProto;

// A single formal parameter may not be given the empty name (an absent value); `given` names.
template <typename Names>
void check_params(const Names& given, std::string_view formal, const char* what, const NewerSchema& s,
                  const std::string& label) {
  for (int i = 0; i < given.size(); ++i) {
    const size_t k = std::min(static_cast<size_t>(i), formal.empty() ? 0 : formal.size() - 1);
    if (static_cast<size_t>(i) >= formal.size() && (formal.empty() || formal.back() != 'V'))
      D5_THROW(FormatError, "{}: not valid {}-{}: it has {} {}s, at most {}", label, s.op_type, s.since, given.size(),
               what, formal.size());
    D5_CHECK(!given.Get(i).empty() || formal[k] != 'S', FormatError,
             "{}: not valid {}-{}: {} {} is required, but its name is empty", label, s.op_type, s.since, what, i);
  }
}

}  // namespace

const std::vector<NewerSchema>& newer_schemas() {
  static const std::vector<NewerSchema> table = {
#include "onnx_newer_schemas_table.inc"
  };
  return table;
}

const NewerSchema* newer_schema(std::string_view op_type, int opset) {
  const NewerSchema* best = nullptr;
  for (const auto& s : newer_schemas())
    if (s.op_type == op_type && s.since <= opset && (!best || s.since > best->since)) best = &s;
  return best;
}

void verify_newer_schema(const NewerSchema& s, const onnx::NodeProto& node, const std::string& label) {
  D5_CHECK(node.input_size() >= s.min_inputs && node.input_size() <= s.max_inputs, FormatError,
           "{}: not valid {}-{}: it takes {} to {} inputs, the node has {}", label, s.op_type, s.since, s.min_inputs,
           s.max_inputs, node.input_size());
  D5_CHECK(node.output_size() >= s.min_outputs && node.output_size() <= s.max_outputs, FormatError,
           "{}: not valid {}-{}: it has {} to {} outputs, the node has {}", label, s.op_type, s.since, s.min_outputs,
           s.max_outputs, node.output_size());
  check_params(node.input(), s.inputs, "input", s, label);
  check_params(node.output(), s.outputs, "output", s, label);
  std::set<std::string_view> seen;
  for (const auto& a : node.attribute()) {
    const std::string& name = a.name();
    if (name.size() >= 2 && name[0] == '_' && name[1] == '_') continue;  // ONNX's internal symbols
    auto it = std::find_if(s.attributes.begin(), s.attributes.end(),
                           [&](const NewerAttribute& x) { return x.name == name; });
    D5_CHECK(it != s.attributes.end(), FormatError, "{}: not valid {}-{}: unrecognized attribute '{}'", label,
             s.op_type, s.since, name);
    const auto kind = onnx_io::attribute_type(a);
    D5_CHECK(kind == it->type, FormatError, "{}: not valid {}-{}: attribute '{}' must be {}, got {}", label,
             s.op_type, s.since, name, A::AttributeType_Name(it->type), A::AttributeType_Name(kind));
    seen.insert(it->name);
  }
  for (const auto& x : s.attributes)
    D5_CHECK(!x.required || seen.count(x.name), FormatError, "{}: not valid {}-{}: required attribute '{}' is missing",
             label, s.op_type, s.since, x.name);
}

}  // namespace d5::onnx_schemas
