#include "deep500/op/attributes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"

namespace d5 {

namespace {
const char* type_name(const AttrValue& v) {
  static constexpr const char* names[] = {"INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "TENSOR"};
  return names[v.index()];
}
}  // namespace

template <typename T>
const T* Attributes::find(const std::string& name, const char* wanted) const {
  auto it = values_.find(name);
  if (it == values_.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  D5_CHECK_ARG(v != nullptr, "{}: attribute '{}' must be {}, got {}", context.empty() ? "operator" : context,
               name, wanted, type_name(it->second));
  return v;
}

#define D5_ATTR_GETTERS(RET, FN, T, TNAME)                                                          \
  RET Attributes::FN(const std::string& name) const {                                               \
    const T* v = find<T>(name, TNAME);                                                              \
    D5_CHECK_ARG(v != nullptr, "{}: required attribute '{}' ({}) is missing",                       \
                 context.empty() ? "operator" : context, name, TNAME);                              \
    return *v;                                                                                      \
  }                                                                                                 \
  RET Attributes::FN(const std::string& name, const RET& def) const {                               \
    const T* v = find<T>(name, TNAME);                                                              \
    return v ? RET(*v) : def;                                                                       \
  }

D5_ATTR_GETTERS(std::string, get_string, std::string, "STRING")
D5_ATTR_GETTERS(std::vector<int64_t>, get_ints, std::vector<int64_t>, "INTS")
#undef D5_ATTR_GETTERS

int64_t Attributes::get_int(const std::string& name) const {
  const int64_t* v = find<int64_t>(name, "INT");
  D5_CHECK_ARG(v != nullptr, "{}: required attribute '{}' (INT) is missing", context.empty() ? "operator" : context,
               name);
  return *v;
}
int64_t Attributes::get_int(const std::string& name, int64_t def) const {
  const int64_t* v = find<int64_t>(name, "INT");
  return v ? *v : def;
}

// FLOAT attributes written as integers (alpha=1) are common in hand-written models.
double Attributes::get_float(const std::string& name) const {
  auto it = values_.find(name);
  D5_CHECK_ARG(it != values_.end(), "{}: required attribute '{}' (FLOAT) is missing",
               context.empty() ? "operator" : context, name);
  return get_float(name, 0.0);
}
double Attributes::get_float(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return *find<double>(name, "FLOAT");
}

std::vector<double> Attributes::get_floats(const std::string& name) const {
  const auto* v = find<std::vector<double>>(name, "FLOATS");
  D5_CHECK_ARG(v != nullptr, "{}: required attribute '{}' (FLOATS) is missing",
               context.empty() ? "operator" : context, name);
  return *v;
}
std::vector<double> Attributes::get_floats(const std::string& name, const std::vector<double>& def) const {
  const auto* v = find<std::vector<double>>(name, "FLOATS");
  return v ? *v : def;
}

std::vector<std::string> Attributes::get_strings(const std::string& name,
                                                 const std::vector<std::string>& def) const {
  const auto* v = find<std::vector<std::string>>(name, "STRINGS");
  return v ? *v : def;
}

Tensor Attributes::get_tensor(const std::string& name) const {
  const Tensor* v = find<Tensor>(name, "TENSOR");
  D5_CHECK_ARG(v != nullptr, "{}: required attribute '{}' (TENSOR) is missing",
               context.empty() ? "operator" : context, name);
  return *v;
}

std::string Attributes::to_string() const {
  std::vector<std::string> parts;
  for (const auto& [k, v] : values_) {
    std::string s = std::visit(
        [](const auto& x) -> std::string {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, Tensor>) return x.desc().to_string();
          else if constexpr (std::is_same_v<T, std::string>) return "'" + x + "'";
          else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>> ||
                             std::is_same_v<T, std::vector<std::string>>)
            return fmt::format("[{}]", fmt::join(x, ", "));
          else return fmt::format("{}", x);
        },
        v);
    parts.push_back(k + "=" + s);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace d5
