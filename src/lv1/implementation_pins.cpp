#include "deep500/net/implementation_pins.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"

namespace d5 {

namespace {

std::vector<std::string> implementation_names(const std::string& op_type) {
  const OpRegistry& r = OpRegistry::global();
  std::vector<std::string> names;
  for (const auto& backend : r.backends_of(op_type))
    for (const auto& impl : r.implementations(op_type, backend)) names.push_back(impl->name);
  return names;
}

}  // namespace

ImplementationPins parse_implementation_pins(const std::vector<std::string>& items) {
  ImplementationPins pins;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    D5_CHECK_ARG(eq != std::string::npos && eq > 0 && eq + 1 < item.size(),
                 "pin '{}' is not OP=IMPLEMENTATION (e.g. Conv=reference:batched-im2col)", item);
    const std::string op = item.substr(0, eq), impl = item.substr(eq + 1);
    const auto names = implementation_names(op);
    D5_CHECK_ARG(!names.empty(), "pin '{}': no backend implements operator type '{}'", item, op);
    D5_CHECK_ARG(std::find(names.begin(), names.end(), impl) != names.end(),
                 "pin '{}': '{}' is not an implementation of {} (implementations: {})", item, impl, op,
                 fmt::join(names, ", "));
    D5_CHECK_ARG(pins.emplace(op, impl).second, "pin '{}': {} is already pinned to {}", item, op, pins.at(op));
  }
  return pins;
}

CreatedOperator create_operator(const OpSpec& spec, const std::vector<std::string>& backends,
                                const ImplementationPins& pins) {
  const OpRegistry& registry = OpRegistry::global();
  CreatedOperator c;
  const auto pin = pins.find(spec.type);
  if (pin == pins.end()) {
    c.op = registry.create_with_fallback(spec, backends, &c.refusals);
    // create_with_fallback records one refusal per implementation it tried (one for a backend
    // without any), in order; the backend whose refusals run out created the operator.
    size_t consumed = 0;
    for (c.backend = 0; c.backend + 1 < backends.size(); ++c.backend) {
      const size_t tried = std::max<size_t>(1, registry.implementations(spec.type, backends[c.backend]).size());
      if (consumed + tried > c.refusals.size()) break;
      consumed += tried;
    }
    return c;
  }
  for (c.backend = 0; c.backend < backends.size(); ++c.backend) {
    for (const auto& impl : registry.implementations(spec.type, backends[c.backend])) {
      if (impl->name != pin->second) continue;
      OpSpec s = spec;
      s.attrs.context = spec.label();
      auto r = impl->create(s);
      auto* op = std::get_if<std::unique_ptr<Operator>>(&r);
      if (!op)
        D5_THROW(Unimplemented, "{}: pinned implementation {} refuses: {}", spec.label(), impl->name,
                 std::get<std::string>(r));
      c.op = std::move(*op);
      return c;
    }
    c.refusals.push_back({backends[c.backend], fmt::format("{} is pinned to {}", spec.type, pin->second)});
  }
  D5_THROW(Unimplemented, "{}: pinned implementation {} is not on the executor's backends ({})", spec.label(),
           pin->second, fmt::join(backends, ", "));
}

}  // namespace d5
