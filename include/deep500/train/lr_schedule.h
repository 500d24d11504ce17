#pragma once
// Learning-rate schedules (docs/optimizers.md): what Optimizer::current_learning_rate() applies to
// the base rate. They are pure functions of (step, epoch), so a resumed run (load_state restores
// the step count) continues on the same curve. Each counts in steps or in epochs, as chosen.
#include <cstdint>
#include <memory>
#include <string>

#include "deep500/train/optimizer.h"

namespace d5 {

enum class ScheduleUnit { step, epoch };

// torch.optim.lr_scheduler.StepLR: base * gamma^floor(t / step_size).
class StepLr final : public LrSchedule {
 public:
  StepLr(int64_t step_size, double gamma, ScheduleUnit unit = ScheduleUnit::step);
  std::string describe() const override;
  double rate(double base_lr, int64_t step, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
  ScheduleUnit unit_;
};

// torch.optim.lr_scheduler.CosineAnnealingLR's closed form:
// min_lr + (base - min_lr) * (1 + cos(pi * min(t, t_max) / t_max)) / 2.
class CosineLr final : public LrSchedule {
 public:
  CosineLr(int64_t t_max, double min_lr = 0, ScheduleUnit unit = ScheduleUnit::step);
  std::string describe() const override;
  double rate(double base_lr, int64_t step, int64_t epoch) const override;

 private:
  int64_t t_max_;
  double min_lr_;
  ScheduleUnit unit_;
};

// Linear warm-up (torch's LinearLR from start_factor to 1 over `warmup` units), then `after`
// (constant when null) counted from the end of the warm-up.
class LinearWarmupLr final : public LrSchedule {
 public:
  LinearWarmupLr(int64_t warmup, double start_factor, std::shared_ptr<const LrSchedule> after = nullptr,
                 ScheduleUnit unit = ScheduleUnit::step);
  std::string describe() const override;
  double rate(double base_lr, int64_t step, int64_t epoch) const override;

 private:
  int64_t warmup_;
  double start_factor_;
  std::shared_ptr<const LrSchedule> after_;
  ScheduleUnit unit_;
};

// Parses a schedule from the command line: "step:SIZE:GAMMA", "cosine:T_MAX[:MIN_LR]",
// "warmup:STEPS:START_FACTOR[+SCHEDULE]" (e.g. "warmup:100:0.1+cosine:1000"); a trailing "@epoch"
// counts epochs instead of steps. InvalidArgument showing the accepted forms otherwise.
std::shared_ptr<const LrSchedule> parse_lr_schedule(const std::string& spec);

}  // namespace d5
