// Backends as plugins (spi/backend_plugin.h): the generated list and what each registers.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/net/graph_executor.h"
#include "deep500/op/op_registry.h"

namespace d5 {
namespace {

std::set<std::string> backend_names() {
  std::set<std::string> out;
  for (const auto& b : backends()) out.insert(b.name);
  return out;
}

TEST(BackendPlugins, EveryBuiltBackendRegistersItsInfoOperatorsAndExecutor) {
  register_builtin_operators();
  const auto& plugins = builtin_plugins();
  ASSERT_FALSE(plugins.empty());
  std::set<std::string> names;
  for (const BackendPlugin* p : plugins) {
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(names.insert(p->name).second) << "plugin " << p->name << " listed twice";
  }
  EXPECT_TRUE(names.count("reference"));
  const auto registered = backend_names();
  const auto executors = executor_backends();
  for (const BackendPlugin* p : plugins) {
    SCOPED_TRACE(p->name);
    // A plugin that registers operators is a backend: it has its info and operators of its own.
    if (p->register_operators) {
      EXPECT_TRUE(registered.count(p->name));
      bool has_ops = false;
      for (const auto& type : OpRegistry::global().op_types())
        has_ops = has_ops || !OpRegistry::global().implementations(type, p->name).empty();
      EXPECT_TRUE(has_ops);
    }
    // Its executor is listed exactly where the backend can run (cuda: with a usable GPU).
    if (p->register_executors) {
      const auto info = find_backend(p->name);
      const bool listed = std::find(executors.begin(), executors.end(), p->name) != executors.end();
      EXPECT_EQ(listed, !info || info->available);
    }
  }
  // Nothing is registered that no plugin declared.
  for (const auto& b : registered) EXPECT_TRUE(names.count(b)) << b;
  for (const auto& e : executors) EXPECT_TRUE(names.count(e)) << e;
}

TEST(BackendPlugins, RegistrationIsIdempotent) {
  register_builtin_operators();
  const auto before = OpRegistry::global().op_types().size();
  const auto backends_before = backends().size();
  register_builtin_operators();
  register_builtin_backends();
  EXPECT_EQ(OpRegistry::global().op_types().size(), before);
  EXPECT_EQ(backends().size(), backends_before);
}

}  // namespace
}  // namespace d5
