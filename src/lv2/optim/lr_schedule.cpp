#include "deep500/train/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <optional>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"

namespace d5 {

namespace {
int64_t units(ScheduleUnit u, int64_t step, int64_t epoch) { return u == ScheduleUnit::step ? step : epoch; }
const char* unit_name(ScheduleUnit u) { return u == ScheduleUnit::step ? "steps" : "epochs"; }
}  // namespace

StepLr::StepLr(int64_t step_size, double gamma, ScheduleUnit unit) : step_size_(step_size), gamma_(gamma), unit_(unit) {
  D5_CHECK_ARG(step_size > 0, "step schedule: the step size must be > 0, not {}", step_size);
  D5_CHECK_ARG(gamma > 0, "step schedule: gamma must be > 0, not {}", gamma);
}
std::string StepLr::describe() const {
  return fmt::format("step: x{} every {} {}", gamma_, step_size_, unit_name(unit_));
}
double StepLr::rate(double base_lr, int64_t step, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(units(unit_, step, epoch) / step_size_));
}

CosineLr::CosineLr(int64_t t_max, double min_lr, ScheduleUnit unit) : t_max_(t_max), min_lr_(min_lr), unit_(unit) {
  D5_CHECK_ARG(t_max > 0, "cosine schedule: t_max must be > 0, not {}", t_max);
  D5_CHECK_ARG(min_lr >= 0, "cosine schedule: the minimum rate must be >= 0, not {}", min_lr);
}
std::string CosineLr::describe() const {
  return fmt::format("cosine: to {} over {} {}", min_lr_, t_max_, unit_name(unit_));
}
double CosineLr::rate(double base_lr, int64_t step, int64_t epoch) const {
  const double t = static_cast<double>(std::min(units(unit_, step, epoch), t_max_));
  return min_lr_ + (base_lr - min_lr_) * (1 + std::cos(std::numbers::pi * t / static_cast<double>(t_max_))) / 2;
}

LinearWarmupLr::LinearWarmupLr(int64_t warmup, double start_factor, std::shared_ptr<const LrSchedule> after,
                               ScheduleUnit unit)
    : warmup_(warmup), start_factor_(start_factor), after_(std::move(after)), unit_(unit) {
  D5_CHECK_ARG(warmup > 0, "warm-up schedule: the warm-up length must be > 0, not {}", warmup);
  D5_CHECK_ARG(start_factor > 0 && start_factor <= 1, "warm-up schedule: the start factor must be in (0, 1], not {}",
               start_factor);
}
std::string LinearWarmupLr::describe() const {
  return fmt::format("linear warm-up from x{} over {} {}{}", start_factor_, warmup_, unit_name(unit_),
                     after_ ? ", then " + after_->describe() : "");
}
double LinearWarmupLr::rate(double base_lr, int64_t step, int64_t epoch) const {
  const int64_t t = units(unit_, step, epoch);
  if (t < warmup_)
    return base_lr * (start_factor_ + (1 - start_factor_) * static_cast<double>(t) / static_cast<double>(warmup_));
  if (!after_) return base_lr;
  // The following schedule starts where the warm-up ends, in the warm-up's unit.
  return unit_ == ScheduleUnit::step ? after_->rate(base_lr, step - warmup_, epoch)
                                     : after_->rate(base_lr, step, epoch - warmup_);
}

namespace {

[[noreturn]] void bad_schedule(const std::string& spec, const std::string& why) {
  throw InvalidArgument(fmt::format(
      "learning-rate schedule '{}': {} (forms: step:SIZE:GAMMA, cosine:T_MAX[:MIN_LR], "
      "warmup:LENGTH:START_FACTOR[+SCHEDULE], each optionally ending in @epoch)",
      spec, why));
}

double number(const std::string& spec, const std::string& field) {
  const std::optional<double> v = parse_double(field);
  if (!v) bad_schedule(spec, fmt::format("'{}' is not a number", field));
  return *v;
}

int64_t integer(const std::string& spec, const std::string& field) {
  const double v = number(spec, field);
  if (v != std::floor(v)) bad_schedule(spec, fmt::format("'{}' is not an integer", field));
  return static_cast<int64_t>(v);
}

}  // namespace

std::shared_ptr<const LrSchedule> parse_lr_schedule(const std::string& spec) {
  std::string body = spec;
  ScheduleUnit unit = ScheduleUnit::step;
  std::shared_ptr<const LrSchedule> after;
  const size_t plus = body.find('+');
  if (plus != std::string::npos) {
    after = parse_lr_schedule(body.substr(plus + 1));
    body = body.substr(0, plus);
  }
  const size_t at = body.find('@');
  if (at != std::string::npos) {
    const std::string u = body.substr(at + 1);
    if (u == "epoch") {
      unit = ScheduleUnit::epoch;
    } else if (u != "step") {
      bad_schedule(spec, fmt::format("unknown unit '{}' (step or epoch)", u));
    }
    body = body.substr(0, at);
  }
  std::vector<std::string> f;
  size_t start = 0;
  for (;;) {
    const size_t c = body.find(':', start);
    f.push_back(body.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  const std::string& kind = f[0];
  if (after && kind != "warmup") bad_schedule(spec, "only a warm-up can be followed by another schedule");
  if (kind == "step" && f.size() == 3) return std::make_shared<StepLr>(integer(spec, f[1]), number(spec, f[2]), unit);
  if (kind == "cosine" && (f.size() == 2 || f.size() == 3))
    return std::make_shared<CosineLr>(integer(spec, f[1]), f.size() == 3 ? number(spec, f[2]) : 0.0, unit);
  if (kind == "warmup" && f.size() == 3)
    return std::make_shared<LinearWarmupLr>(integer(spec, f[1]), number(spec, f[2]), after, unit);
  bad_schedule(spec, fmt::format("cannot read '{}'", body));
}

}  // namespace d5
