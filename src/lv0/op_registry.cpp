#include "deep500/op/op_registry.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/backend.h"
#include "deep500/core/error.h"
#include "deep500/core/registry.h"

namespace d5 {

OpRegistry& OpRegistry::global() {
  static OpRegistry r;
  return r;
}

namespace {
// Implementations are unique by (op type, backend, name).
std::string key_of(const OpImplementation& i) { return i.op_type + "/" + i.backend + "/" + i.name; }
}  // namespace

void OpRegistry::add(OpImplementation impl) {
  D5_CHECK(static_cast<bool>(impl.create), Internal, "operator implementation {}/{} has no factory",
           impl.op_type, impl.name);
  D5_CHECK(!impls_.contains(key_of(impl)), Internal, "operator implementation {} of {} on {} is registered twice",
           impl.name, impl.op_type, impl.backend);
  std::string key = key_of(impl), notes = impl.notes;
  impls_.add(std::move(key), std::move(notes), std::move(impl));
}

void OpRegistry::add_or_replace(OpImplementation impl) {
  D5_CHECK(static_cast<bool>(impl.create), Internal, "operator implementation {}/{} has no factory",
           impl.op_type, impl.name);
  std::string key = key_of(impl), notes = impl.notes;
  impls_.add(std::move(key), std::move(notes), std::move(impl));
}

std::vector<std::shared_ptr<const OpImplementation>> OpRegistry::implementations(const std::string& op_type,
                                                                                 const std::string& backend) const {
  std::vector<std::shared_ptr<const OpImplementation>> out;
  for (auto& e : impls_.values())
    if (e->op_type == op_type && e->backend == backend) out.push_back(std::move(e));
  return out;
}

std::vector<std::string> OpRegistry::op_types() const {
  std::set<std::string> s;
  for (const auto& e : impls_.values()) s.insert(e->op_type);
  return {s.begin(), s.end()};
}

std::vector<std::string> OpRegistry::backends_of(const std::string& op_type) const {
  std::vector<std::string> out;
  for (const auto& e : impls_.values())
    if (e->op_type == op_type && std::find(out.begin(), out.end(), e->backend) == out.end())
      out.push_back(e->backend);
  return out;
}

namespace {
std::unique_ptr<Operator> try_create(const std::vector<std::shared_ptr<const OpImplementation>>& impls, const OpSpec& spec,
                                     std::vector<Refusal>& refusals) {
  for (const auto& impl : impls) {
    OpSpec s = spec;
    s.attrs.context = spec.label();
    auto r = impl->create(s);
    if (auto* op = std::get_if<std::unique_ptr<Operator>>(&r)) return std::move(*op);
    refusals.push_back({impl->name, std::get<std::string>(r)});
  }
  return nullptr;
}

std::string describe(const std::vector<Refusal>& refusals) {
  std::string s;
  for (const auto& r : refusals) s += fmt::format("{}{}: {}", s.empty() ? "" : "; ", r.implementation, r.reason);
  return s;
}
}  // namespace

std::unique_ptr<Operator> OpRegistry::create(const OpSpec& spec, const std::string& backend) const {
  return create_with_fallback(spec, {backend});
}

std::unique_ptr<Operator> OpRegistry::create_with_fallback(const OpSpec& spec,
                                                           const std::vector<std::string>& backends,
                                                           std::vector<Refusal>* refusals_out) const {
  std::vector<Refusal> refusals;
  for (const auto& backend : backends) {
    const auto impls = implementations(spec.type, backend);
    if (impls.empty()) {
      refusals.push_back({backend, fmt::format("no implementation of {}", spec.type)});
      continue;
    }
    if (auto op = try_create(impls, spec, refusals)) {
      if (refusals_out) *refusals_out = refusals;
      return op;
    }
  }
  if (op_types().empty() || backends_of(spec.type).empty())
    D5_THROW(Unimplemented, "{}: operator type '{}' is not implemented by any backend (opset {})", spec.label(),
             spec.type, spec.opset);
  D5_THROW(Unimplemented, "{}: no implementation on {} accepts this case: {}", spec.label(),
           fmt::format("{}", fmt::join(backends, ", ")), describe(refusals));
}

std::vector<Refusal> OpRegistry::explain(const OpSpec& spec, const std::string& backend) const {
  std::vector<Refusal> out;
  for (const auto& impl : implementations(spec.type, backend)) {
    OpSpec s = spec;
    s.attrs.context = spec.label();
    try {
      auto r = impl->create(s);
      if (std::holds_alternative<std::string>(r)) out.push_back({impl->name, std::get<std::string>(r)});
      else out.push_back({impl->name, "accepts"});
    } catch (const Error& e) {
      out.push_back({impl->name, std::string("invalid: ") + e.what()});
    }
  }
  return out;
}

namespace {
Registry<CustomOpAdapter>& adapters() {
  static Registry<CustomOpAdapter> a("custom-operator adapter");
  return a;
}
}  // namespace

void register_custom_op_adapter(const std::string& backend, CustomOpAdapter adapter) {
  adapters().add(backend, "", std::move(adapter));
}

void register_custom_op(const std::string& op_type, OpFactory factory, bool backward, const std::string& notes) {
  std::vector<std::string> names{"reference"};
  for (const auto& b : backends())
    if (b.name != "reference") names.push_back(b.name);
  for (const auto& backend : names) {
    // The adapter is looked up when an operator is created, so one registered later still applies.
    auto create = [factory, backend](const OpSpec& spec) -> OpCreateResult {
      OpCreateResult r = factory(spec);
      auto* op = std::get_if<std::unique_ptr<Operator>>(&r);
      const auto adapter = adapters().find(backend);
      if (op && adapter) return (*adapter)(std::move(*op));
      return r;
    };
    OpRegistry::global().add_or_replace({op_type, backend, "custom", backward, create, notes});
  }
}

}  // namespace d5
