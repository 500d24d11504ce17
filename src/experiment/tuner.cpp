#include "deep500/experiment/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "deep500/core/error.h"

namespace d5 {

namespace {

struct Trial {
  Params config;
  bool baseline = false;
  std::vector<std::optional<EvaluationResult>> at_rung;  // one per rung
  std::vector<bool> promoted;                           // from that rung to the next
};

bool ranks_before(const EvaluationResult& a, int64_t trial_a, const EvaluationResult& b, int64_t trial_b) {
  if (a.tier != b.tier) return a.tier < b.tier;
  if (a.value != b.value) return a.value < b.value;
  return trial_a < trial_b;  // ties: the earlier configuration, so that the schedule is reproducible
}

// The search's shared state; every member function is called with `mutex` held.
class Search {
 public:
  Search(const SearchSpace& space, const TunerOptions& o) : space_(space), o_(o), rng_(o.seed) {
    result.rungs = rung_resources(o);
    // Trial 0 is the baseline, or a place holder that never runs: drawn configurations count from 1.
    Trial t;
    t.baseline = o.baseline.has_value();
    if (o.baseline) t.config = *o.baseline;
    add(std::move(t));
  }

  // The next evaluation to run; nullopt with `wait` set when one may become possible after a
  // running evaluation finishes, nullopt without it when the search is over.
  std::optional<Evaluation> next(double elapsed_s, bool& wait) {
    wait = false;
    if (failure) return std::nullopt;
    if (o_.time_budget_s > 0 && elapsed_s >= o_.time_budget_s) {
      result.stop_reason = "time budget";
      return std::nullopt;
    }
    if (o_.baseline && !baseline_started_) {
      baseline_started_ = true;
      return start(0, top());
    }
    for (size_t k = top(); k-- > 0;)
      if (auto t = promotable(k)) {
        trials_[*t].promoted[k] = true;
        return start(*t, k + 1);
      }
    if (o_.max_trials == 0 || result.trials_drawn < o_.max_trials) {
      Trial t;
      t.config = sample_configuration(space_, rng_);
      ++result.trials_drawn;
      return start(add(std::move(t)), 0);
    }
    wait = running_ > 0;
    if (!wait && result.stop_reason.empty()) result.stop_reason = "trials";
    return std::nullopt;
  }

  void finish(const Evaluation& e, EvaluationResult r, double started_s, double finished_s) {
    --running_;
    Trial& t = trials_[static_cast<size_t>(e.trial)];
    TunedEvaluation done{e, r, t.baseline, r.final || e.rung == top(), started_s, finished_s};
    t.at_rung[e.rung] = std::move(r);
    result.evaluations.push_back(std::move(done));
    const size_t i = result.evaluations.size() - 1;
    const TunedEvaluation& d = result.evaluations[i];
    if (d.baseline) result.baseline = i;
    if (d.complete && d.result.tier == 0) {
      const auto& b = result.best;
      if (!b || ranks_before(d.result, e.trial, result.evaluations[*b].result, result.evaluations[*b].evaluation.trial))
        result.best = i;
    }
  }

  TuningResult result;
  std::exception_ptr failure;

 private:
  size_t top() const { return result.rungs.size() - 1; }

  size_t add(Trial t) {
    t.at_rung.resize(result.rungs.size());
    t.promoted.assign(result.rungs.size(), false);
    trials_.push_back(std::move(t));
    return trials_.size() - 1;
  }

  Evaluation start(size_t trial, size_t rung) {
    ++running_;
    Evaluation e;
    e.trial = static_cast<int64_t>(trial);
    e.rung = rung;
    e.resource = result.rungs[rung];
    e.config = trials_[trial].config;
    if (result.best) e.incumbent = result.evaluations[*result.best].result.value;
    return e;
  }

  // The best trial of rung k in the top 1/eta of the rung's results that was neither promoted nor
  // final there.
  std::optional<size_t> promotable(size_t k) const {
    std::vector<size_t> seen;
    for (size_t i = 0; i < trials_.size(); ++i)
      if (trials_[i].at_rung[k]) seen.push_back(i);
    std::sort(seen.begin(), seen.end(), [&](size_t a, size_t b) {
      return ranks_before(*trials_[a].at_rung[k], static_cast<int64_t>(a), *trials_[b].at_rung[k],
                          static_cast<int64_t>(b));
    });
    const size_t quota = static_cast<size_t>(std::floor(static_cast<double>(seen.size()) / o_.eta));
    for (size_t r = 0; r < quota && r < seen.size(); ++r) {
      const Trial& t = trials_[seen[r]];
      if (!t.promoted[k] && !t.at_rung[k]->final && t.at_rung[k]->tier < 2) return seen[r];
    }
    return std::nullopt;
  }

  const SearchSpace& space_;
  const TunerOptions& o_;
  std::mt19937_64 rng_;
  std::vector<Trial> trials_;
  bool baseline_started_ = false;
  int running_ = 0;
};

}  // namespace

std::vector<double> rung_resources(const TunerOptions& o) {
  D5_CHECK_ARG(o.max_resource > 0 && std::isfinite(o.max_resource), "the largest resource must be positive, not {}",
               o.max_resource);
  if (o.method == TunerOptions::Method::random) return {o.max_resource};
  D5_CHECK_ARG(o.eta > 1 && std::isfinite(o.eta), "successive halving needs a reduction factor eta > 1, not {}", o.eta);
  D5_CHECK_ARG(o.min_resource > 0 && o.min_resource <= o.max_resource,
               "the smallest resource ({}) must be positive and at most the largest ({})", o.min_resource,
               o.max_resource);
  // Rungs at min·eta^k below the top, as many as make the last step closest to a factor eta.
  const auto below = static_cast<int>(std::floor(std::log(o.max_resource / o.min_resource) / std::log(o.eta) + 0.5));
  std::vector<double> rungs;
  for (int k = 0; k < below; ++k) {
    double r = o.min_resource * std::pow(o.eta, k);
    if (o.integer_resource) r = std::max(1.0, std::round(r));
    if (r < o.max_resource && (rungs.empty() || r > rungs.back())) rungs.push_back(r);
  }
  rungs.push_back(o.max_resource);
  return rungs;
}

TuningResult tune(const SearchSpace& space, const TunerOptions& options, const Evaluator& evaluate) {
  D5_CHECK_ARG(options.max_trials > 0 || options.time_budget_s > 0,
               "a search needs a budget: a number of trials, a time, or both");
  D5_CHECK_ARG(options.slots >= 1, "at least one slot runs evaluations, not {}", options.slots);
  D5_CHECK_ARG(!space.empty() || options.max_trials == 1,
               "the search space is empty: nothing to search (give the entry a 'search:' map or --space)");
  Search search(space, options);
  std::mutex mutex;
  std::condition_variable changed;
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const auto work = [&] {
    std::unique_lock lock(mutex);
    for (;;) {
      bool wait = false;
      const auto e = search.next(elapsed(), wait);
      if (!e) {
        if (!wait) break;
        changed.wait(lock);
        continue;
      }
      const double started = elapsed();
      lock.unlock();
      EvaluationResult r;
      try {
        r = evaluate(*e);
      } catch (...) {
        lock.lock();
        if (!search.failure) search.failure = std::current_exception();
        search.finish(*e, EvaluationResult{}, started, elapsed());
        changed.notify_all();
        continue;
      }
      lock.lock();
      search.finish(*e, std::move(r), started, elapsed());
      changed.notify_all();
    }
    changed.notify_all();
  };
  std::vector<std::thread> workers;
  for (int s = 1; s < options.slots; ++s) workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();
  if (search.failure) std::rethrow_exception(search.failure);
  search.result.wall_s = elapsed();
  return std::move(search.result);
}

}  // namespace d5
