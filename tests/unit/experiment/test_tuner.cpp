// d5 tune's parts without processes: the search space (forms, draws, which options may be
// searched), the successive-halving schedule against a hand-simulated one, budgets, slots, and a
// tuned recipe written back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "deep500/core/error.h"
#include "deep500/experiment/recipe.h"
#include "deep500/experiment/search_space.h"
#include "deep500/experiment/tuner.h"

namespace d5 {
namespace {

const char* kRecipe = R"(
recipe: tiny
division: closed
entries:
  - name: fit
    command: train
    fixed: {model: lenet5, optimizer: adam, dataset: mnist, target-accuracy: 0.9}
    mutable: {lr: 0.001, batch: 64, epochs: 9, momentum: 0.9}
    grid: {backend: [torch, onednn]}
    search:
      lr: log:0.0001:0.01
      batch: [32, 64]
)";

TEST(SearchSpace, ReadsEveryFormAndRefusesMalformedOnes) {
  const auto c = parse_search_dimension("batch", "choice:32,64,abc");
  ASSERT_EQ(c.choices.size(), 3u);
  EXPECT_EQ(c.choices[0], 32);
  EXPECT_EQ(c.choices[2], "abc");
  const auto l = parse_search_dimension("lr", "log:1e-4:1e-2");
  EXPECT_EQ(l.kind, SearchDimension::Kind::log_uniform);
  EXPECT_DOUBLE_EQ(l.low, 1e-4);
  EXPECT_EQ(to_string(l), "log:0.0001:0.01");
  EXPECT_EQ(parse_search_dimension("n", "logint:16:256").kind, SearchDimension::Kind::log_integer);
  for (const char* bad : {"log:0:1", "uniform:2:1", "int:1.5:3", "normal:0:1", "uniform:1", "choice:", "0.1",
                          "uniform:a:b", "log:1:inf"})
    EXPECT_THROW(parse_search_dimension("k", bad), FormatError) << bad;
}

TEST(SearchSpace, DrawsStayInTheirBoundsAndLogDrawsAreUniformInTheLogarithm) {
  SearchSpace space = {parse_search_dimension("lr", "log:0.0001:0.01"),
                       parse_search_dimension("m", "uniform:0.8:0.99"), parse_search_dimension("n", "int:1:3"),
                       parse_search_dimension("b", "logint:16:256"), parse_search_dimension("c", "choice:a,b")};
  std::mt19937_64 rng(7);
  int below_geometric_mean = 0;
  std::map<int64_t, int> ints;
  std::set<std::string> choices;
  const int draws = 4000;
  for (int i = 0; i < draws; ++i) {
    const Params p = sample_configuration(space, rng);
    const double lr = p["lr"].get<double>();
    ASSERT_GE(lr, 0.0001);
    ASSERT_LE(lr, 0.01);
    // Three significant digits: 0.00231, not 0.0023147...
    EXPECT_NEAR(lr, std::round(lr / std::pow(10.0, std::floor(std::log10(lr)) - 2)) *
                        std::pow(10.0, std::floor(std::log10(lr)) - 2), 1e-15);
    below_geometric_mean += lr < 0.001 ? 1 : 0;
    ASSERT_GE(p["m"].get<double>(), 0.8);
    ASSERT_LE(p["m"].get<double>(), 0.99);
    ASSERT_TRUE(p["b"].is_number_integer());
    ASSERT_GE(p["b"].get<int64_t>(), 16);
    ASSERT_LE(p["b"].get<int64_t>(), 256);
    ++ints[p["n"].get<int64_t>()];
    choices.insert(p["c"].get<std::string>());
  }
  // Log-uniform over [1e-4, 1e-2]: half the draws below 1e-3. A uniform draw would put 9% there.
  // Binomial(4000, 0.5) has a standard deviation of 32: 0.5 +- 0.04 is 5 of them.
  EXPECT_NEAR(below_geometric_mean / double(draws), 0.5, 0.04);
  ASSERT_EQ(ints.size(), 3u);  // 1, 2 and 3, each about a third
  for (const auto& [v, n] : ints) EXPECT_NEAR(n / double(draws), 1.0 / 3, 0.04) << v;
  EXPECT_EQ(choices.size(), 2u);
  // The same seed draws the same configurations.
  std::mt19937_64 a(11), b(11);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sample_configuration(space, a), sample_configuration(space, b));
}

TEST(SearchSpace, OnlyMutableOptionsMayBeSearched) {
  const Recipe r = parse_recipe(kRecipe);
  const SearchSpace s = search_space_of(r.entries[0], {"momentum=uniform:0.8:0.99", "batch=choice:128"});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].key, "lr");
  EXPECT_EQ(s[1].key, "batch");  // --space replaced the recipe's
  EXPECT_EQ(s[1].choices, std::vector<nlohmann::json>{128});
  EXPECT_EQ(s[2].key, "momentum");
  EXPECT_THROW(search_space_of(r.entries[0], {"model=choice:lenet5,resnet20"}), InvalidArgument);  // fixed
  EXPECT_THROW(search_space_of(r.entries[0], {"backend=choice:torch"}), InvalidArgument);           // grid
  EXPECT_THROW(search_space_of(r.entries[0], {"weight-decay=log:1e-5:1e-3"}), InvalidArgument);    // unknown
  EXPECT_THROW(search_space_of(r.entries[0], {"lr"}), InvalidArgument);
  // A recipe that searches a fixed option does not load.
  std::string bad = kRecipe;
  bad.replace(bad.find("lr: log"), 2, "optimizer");
  EXPECT_THROW(parse_recipe(bad), InvalidArgument);
}

TEST(Tuner, RungsGrowByEtaUpToTheFullResource) {
  TunerOptions o;
  o.min_resource = 1;
  const auto rungs = [&](double max, double eta = 3) {
    o.max_resource = max;
    o.eta = eta;
    return rung_resources(o);
  };
  EXPECT_EQ(rungs(9), (std::vector<double>{1, 3, 9}));
  EXPECT_EQ(rungs(10), (std::vector<double>{1, 3, 10}));
  EXPECT_EQ(rungs(8), (std::vector<double>{1, 3, 8}));
  EXPECT_EQ(rungs(4), (std::vector<double>{1, 4}));
  EXPECT_EQ(rungs(1), (std::vector<double>{1}));
  EXPECT_EQ(rungs(16, 2), (std::vector<double>{1, 2, 4, 8, 16}));
  o.method = TunerOptions::Method::random;
  EXPECT_EQ(rungs(10), (std::vector<double>{10}));
  o.method = TunerOptions::Method::asha;
  EXPECT_THROW(rungs(10, 1), InvalidArgument);
  o.min_resource = 20;
  EXPECT_THROW(rungs(10), InvalidArgument);
}

// Configuration t's value (lower is better) is kValue[t] on every rung.
const double kValue[] = {0, 5, 3, 8, 1, 9, 2, 7, 4, 6};

SearchSpace one_dimension() { return {parse_search_dimension("lr", "log:0.001:0.1")}; }

TEST(Tuner, SuccessiveHalvingPromotesTheTopThirdOfEachRungAsTheHandSimulationDoes) {
  TunerOptions o;
  o.max_resource = 9;
  o.max_trials = 9;
  std::vector<std::pair<int64_t, size_t>> order;
  const TuningResult t = tune(one_dimension(), o, [&](const Evaluation& e) {
    EXPECT_EQ(e.resource, (std::vector<double>{1, 3, 9})[e.rung]);
    order.emplace_back(e.trial, e.rung);
    EvaluationResult r;
    r.tier = 0;
    r.value = kValue[e.trial];
    return r;
  });
  // Rung 0 promotes its best whenever it is in the top floor(n/3): t2 after three results, t4 after
  // four, t6 after six; rung 1 promotes t4 once it has three results. t7..t9 rank below them.
  const std::vector<std::pair<int64_t, size_t>> expected = {{1, 0}, {2, 0}, {3, 0}, {2, 1}, {4, 0}, {4, 1}, {5, 0},
                                                            {6, 0}, {6, 1}, {4, 2}, {7, 0}, {8, 0}, {9, 0}};
  EXPECT_EQ(order, expected);
  EXPECT_EQ(t.trials_drawn, 9);
  EXPECT_EQ(t.stop_reason, "trials");
  ASSERT_TRUE(t.best.has_value());
  EXPECT_EQ(t.evaluations[*t.best].evaluation.trial, 4);
  EXPECT_EQ(t.evaluations[*t.best].evaluation.rung, 2u);
  EXPECT_FALSE(t.baseline.has_value());
  // The configurations of a trial are the same on every rung.
  EXPECT_EQ(t.evaluations[3].evaluation.config, t.evaluations[1].evaluation.config);
}

TEST(Tuner, AFinalResultIsCompleteOnAnyRungAndNeverPromoted) {
  TunerOptions o;
  o.max_resource = 9;
  o.max_trials = 6;
  o.baseline = Params{{"lr", 0.01}};
  std::vector<std::optional<double>> incumbents;
  std::vector<std::pair<int64_t, size_t>> order;
  const TuningResult t = tune(one_dimension(), o, [&](const Evaluation& e) {
    order.emplace_back(e.trial, e.rung);
    incumbents.push_back(e.incumbent);
    EvaluationResult r;
    if (e.trial == 0) {  // the baseline: first, at the full resource, the recipe's values
      EXPECT_EQ(e.rung, 2u);
      EXPECT_EQ(e.config, (Params{{"lr", 0.01}}));
      r.tier = 0;
      r.value = 10;
      r.final = true;
    } else if (e.trial == 2) {  // reaches the target on the lowest rung: done, not promoted
      r.tier = 0;
      r.value = 4;
      r.final = true;
    } else {  // not there yet: ranked by progress
      r.tier = 1;
      r.value = -static_cast<double>(e.trial);
    }
    return r;
  });
  ASSERT_GE(order.size(), 2u);
  EXPECT_EQ(order[0], (std::pair<int64_t, size_t>{0, 2}));
  EXPECT_FALSE(incumbents[0].has_value());
  EXPECT_EQ(incumbents[1], 10.0);  // the baseline's value, for early stopping
  for (const auto& [trial, rung] : order) EXPECT_FALSE(trial == 2 && rung > 0);
  ASSERT_TRUE(t.best.has_value());
  EXPECT_EQ(t.evaluations[*t.best].evaluation.trial, 2);
  EXPECT_TRUE(t.evaluations[*t.best].complete);
  ASSERT_TRUE(t.baseline.has_value());
  EXPECT_TRUE(t.evaluations[*t.baseline].baseline);
  // After t2 (value 4) finished, later evaluations are told 4.
  EXPECT_EQ(incumbents.back(), 4.0);
  EXPECT_EQ(t.trials_drawn, 6);  // the baseline is extra
}

TEST(Tuner, RandomSearchEvaluatesEveryTrialAtTheFullResource) {
  TunerOptions o;
  o.method = TunerOptions::Method::random;
  o.max_resource = 7;
  o.max_trials = 5;
  const TuningResult t = tune(one_dimension(), o, [&](const Evaluation& e) {
    EXPECT_EQ(e.resource, 7);
    EvaluationResult r;
    r.tier = 0;
    r.value = e.config["lr"].get<double>();
    return r;
  });
  ASSERT_EQ(t.evaluations.size(), 5u);
  double least = 1;
  for (const auto& d : t.evaluations) {
    EXPECT_TRUE(d.complete);
    least = std::min(least, d.evaluation.config["lr"].get<double>());
  }
  EXPECT_EQ(t.evaluations[*t.best].evaluation.config["lr"].get<double>(), least);
}

TEST(Tuner, NoEvaluationStartsAfterTheTimeBudget) {
  TunerOptions o;
  o.time_budget_s = 0.3;
  o.max_resource = 1;
  const TuningResult t = tune(one_dimension(), o, [&](const Evaluation&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EvaluationResult r;
    r.tier = 0;
    return r;
  });
  EXPECT_EQ(t.stop_reason, "time budget");
  // Six 50 ms evaluations fit; a loaded machine oversleeps, so fewer may start, never more than
  // 0.3 s / 50 ms + 1.
  EXPECT_GE(t.evaluations.size(), 2u);
  EXPECT_LE(t.evaluations.size(), 7u);
  for (const auto& d : t.evaluations) EXPECT_LT(d.started_s, 0.3);
}

TEST(Tuner, SlotsRunEvaluationsAtOnceAndAnErrorStopsTheSearch) {
  TunerOptions o;
  o.max_resource = 9;
  o.max_trials = 12;
  o.slots = 3;
  std::atomic<int> running{0}, most{0};
  const TuningResult t = tune(one_dimension(), o, [&](const Evaluation& e) {
    const int now = ++running;
    for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
    }
    // The first three configurations wait for each other (5 s at most), so that three slots are
    // seen running at once however loaded the machine is; one slot would leave `most` at 1.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (e.trial <= 3 && e.rung == 0 && most.load() < 3 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --running;
    EvaluationResult r;
    r.tier = 0;
    r.value = kValue[e.trial % 10];
    return r;
  });
  EXPECT_EQ(most.load(), 3);
  EXPECT_EQ(t.trials_drawn, 12);
  std::set<std::pair<int64_t, size_t>> distinct;
  for (const auto& d : t.evaluations) distinct.insert({d.evaluation.trial, d.evaluation.rung});
  EXPECT_EQ(distinct.size(), t.evaluations.size());

  o.max_trials = 50;
  std::atomic<int> calls{0};
  EXPECT_THROW(tune(one_dimension(), o,
                    [&](const Evaluation& e) -> EvaluationResult {
                      ++calls;
                      if (e.trial == 4) D5_THROW(IoError, "disk full");
                      std::this_thread::sleep_for(std::chrono::milliseconds(5));
                      return {};
                    }),
               IoError);
  EXPECT_LT(calls.load(), 50);
  o.max_trials = 0;
  EXPECT_THROW(tune(one_dimension(), o, [](const Evaluation&) { return EvaluationResult{}; }), InvalidArgument);
}

TEST(TunedRecipe, TheBestValuesGoIntoTheEntrysMutableMapAndTheRecipeReadsBack) {
  const std::string text = std::string(kRecipe) + R"(
  - name: other
    command: ops bench
    mutable: {lr: 0.5}
)";
  const std::string tuned = recipe_with_values(text, 0, Params{{"lr", 0.00231}, {"batch", 32}}, "Tuned.\nTwo lines.");
  EXPECT_EQ(tuned.rfind("# Tuned.\n# Two lines.\n", 0), 0u) << tuned;
  const Recipe r = parse_recipe(tuned);
  EXPECT_EQ(r.entries[0].mutable_params["lr"], 0.00231);
  EXPECT_EQ(r.entries[0].mutable_params["batch"], 32);
  EXPECT_EQ(r.entries[0].mutable_params["epochs"], 9);
  EXPECT_EQ(r.entries[0].fixed["model"], "lenet5");
  EXPECT_EQ(r.entries[0].search["lr"], "log:0.0001:0.01");
  EXPECT_EQ(r.entries[1].mutable_params["lr"], 0.5);  // another entry keeps its value
  EXPECT_THROW(recipe_with_values(text, 5, Params::object(), ""), InvalidArgument);
}

}  // namespace
}  // namespace d5
