// The one registry shape (core/registry.h).
#include <gtest/gtest.h>

#include <string>

#include "deep500/core/error.h"
#include "deep500/core/registry.h"

namespace d5 {
namespace {

TEST(Registry, AddsFindsAndReplacesInPlace) {
  Registry<int> r("widget");
  r.add("b", "second letter", 2);
  r.add("a", "first letter", 1);
  EXPECT_EQ(*r.get("a"), 1);
  EXPECT_TRUE(r.contains("b"));
  EXPECT_EQ(r.find("c"), nullptr);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"b", "a"}));  // registration order
  EXPECT_EQ(r.names(Registry<int>::Order::name), (std::vector<std::string>{"a", "b"}));
  // A replacement keeps its place (operator preference lists depend on it).
  const auto old = r.find("b");
  r.add("b", "replaced", 20);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(*r.get("b"), 20);
  EXPECT_EQ(*old, 2);  // a value handed out stays alive after its entry is replaced
  EXPECT_EQ(r.descriptions().front(), (std::pair<std::string, std::string>{"b", "replaced"}));
}

TEST(Registry, AnUnknownNameListsTheKnownOnesInTheRegistrysOrder) {
  Registry<int> by_registration("widget");
  by_registration.add("zeta", "", 1);
  by_registration.add("alpha", "", 2);
  try {
    by_registration.get("omega");
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown widget 'omega' (known: zeta, alpha)"), std::string::npos) << e.what();
  }
  Registry<int> by_name("gadget", Registry<int>::Order::name);
  by_name.add("zeta", "", 1);
  by_name.add("alpha", "", 2);
  EXPECT_EQ(by_name.known(), "alpha, zeta");
  EXPECT_EQ(Registry<int>("thing").known(), "none registered");
}

}  // namespace
}  // namespace d5
