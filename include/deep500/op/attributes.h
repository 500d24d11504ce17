#pragma once
// Typed operator attributes with ONNX semantics (INT, FLOAT, STRING, INTS, FLOATS, STRINGS,
// TENSOR). Getters name the operator and attribute when something is missing or mistyped.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "deep500/core/tensor.h"

namespace d5 {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, Tensor>;

class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  void set(const std::string& name, AttrValue v) { values_[name] = std::move(v); }
  void erase(const std::string& name) { values_.erase(name); }
  const std::map<std::string, AttrValue>& all() const { return values_; }

  // With a default: returns it when absent. Without: InvalidArgument when absent.
  int64_t get_int(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t def) const;
  double get_float(const std::string& name) const;  // accepts an INT value too
  double get_float(const std::string& name, double def) const;
  std::string get_string(const std::string& name) const;
  std::string get_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> get_ints(const std::string& name) const;
  std::vector<int64_t> get_ints(const std::string& name, const std::vector<int64_t>& def) const;
  std::vector<double> get_floats(const std::string& name) const;
  std::vector<double> get_floats(const std::string& name, const std::vector<double>& def) const;
  std::vector<std::string> get_strings(const std::string& name,
                                       const std::vector<std::string>& def = {}) const;
  Tensor get_tensor(const std::string& name) const;

  // "alpha=0.1, kernel_shape=[3, 3]" for messages and result params.
  std::string to_string() const;

  // Set by OpSpec so messages name the operator ("Conv 'conv1': attribute 'group' ...").
  std::string context;

 private:
  template <typename T> const T* find(const std::string& name, const char* type_name) const;
  std::map<std::string, AttrValue> values_;
};

}  // namespace d5
