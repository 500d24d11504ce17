#pragma once
// The one registry shape for everything deep500 looks up by name: backends, graph executors,
// optimizers, dataset formats, samplers, zoo models, distributed schemes, CLI commands. An entry
// has a name, a one-line description and a value (usually a factory); adding a name again
// replaces it (a framework's native optimizer replaces the placeholder that refuses without it).
// Lookups of unknown names throw InvalidArgument listing the known ones, so every "unknown X"
// message reads the same. Thread-safe; references stay valid until the entry is replaced.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"

namespace d5 {

template <typename Value>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    Value value;
  };
  enum class Order { registration, name };

  // `what` names an entry in messages: "optimizer", "dataset format", "distributed scheme".
  // `order` is how listings and messages order the entries unless told otherwise.
  explicit Registry(std::string what, Order order = Order::registration)
      : what_(std::move(what)), order_(order) {}

  void add(std::string name, std::string description, Value value) {
    auto e = std::make_shared<const Entry>(Entry{std::move(name), std::move(description), std::move(value)});
    std::lock_guard lock(mutex_);
    for (auto& existing : entries_) {
      if (existing->name == e->name) {
        existing = std::move(e);
        return;
      }
    }
    entries_.push_back(std::move(e));
  }

  // The entry, or nullptr. The shared_ptr keeps it alive even if it is replaced meanwhile.
  std::shared_ptr<const Entry> find_entry(const std::string& name) const {
    std::lock_guard lock(mutex_);
    for (const auto& e : entries_)
      if (e->name == name) return e;
    return nullptr;
  }
  // The value, or nullptr; kept alive like find_entry's.
  std::shared_ptr<const Value> find(const std::string& name) const {
    auto e = find_entry(name);
    return e ? std::shared_ptr<const Value>(e, &e->value) : nullptr;
  }
  bool contains(const std::string& name) const { return find_entry(name) != nullptr; }

  // The value; InvalidArgument "unknown WHAT 'NAME' (known: a, b, c)" otherwise.
  std::shared_ptr<const Value> get(const std::string& name) const {
    if (auto v = find(name)) return v;
    D5_THROW(InvalidArgument, "unknown {} '{}' (known: {})", what_, name, known());
  }
  // "a, b, c" in the registry's order, or "none registered": for messages.
  std::string known() const {
    const auto n = names();
    return n.empty() ? std::string("none registered") : fmt::format("{}", fmt::join(n, ", "));
  }

  std::vector<std::shared_ptr<const Entry>> entries() const { return entries(order_); }
  std::vector<std::shared_ptr<const Entry>> entries(Order order) const {
    std::vector<std::shared_ptr<const Entry>> out;
    {
      std::lock_guard lock(mutex_);
      out = entries_;
    }
    if (order == Order::name)
      std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
    return out;
  }
  // Every value, in registration order (kept alive like find's).
  std::vector<std::shared_ptr<const Value>> values() const {
    std::vector<std::shared_ptr<const Value>> out;
    for (const auto& e : entries(Order::registration)) out.emplace_back(e, &e->value);
    return out;
  }
  std::vector<std::string> names() const { return names(order_); }
  std::vector<std::string> names(Order order) const {
    std::vector<std::string> out;
    for (const auto& e : entries(order)) out.push_back(e->name);
    return out;
  }
  // (name, description) pairs, as `d5 ... list` commands print them.
  std::vector<std::pair<std::string, std::string>> descriptions() const { return descriptions(order_); }
  std::vector<std::pair<std::string, std::string>> descriptions(Order order) const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : entries(order)) out.emplace_back(e->name, e->description);
    return out;
  }
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  Order order_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const Entry>> entries_;
};

}  // namespace d5
