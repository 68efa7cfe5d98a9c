#include "swm/core/migration_governor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codeco/common/status.h"

namespace codeco::swm {

std::string MoveTriggerName(MoveTrigger trigger) {
  switch (trigger) {
    case MoveTrigger::kFailure:
      return "failure";
    case MoveTrigger::kOverload:
      return "overload";
    case MoveTrigger::kBetterPlacement:
      return "better-placement";
    case MoveTrigger::kFailback:
      return "failback";
    case MoveTrigger::kLinkFailure:
      return "link-failure";
    case MoveTrigger::kForecastBreach:
      return "forecast-breach";
  }
  return "unknown";
}

absl::Status ValidateMigrationGovernorOptions(const MigrationGovernorOptions& o) {
  const std::pair<const char*, absl::Duration> durations[] = {
      {"failure_grace", o.failure_grace},
      {"overload_grace", o.overload_grace},
      {"cooldown", o.cooldown},
      {"failback_grace", o.failback_grace}};
  for (const auto& [name, value] : durations) {
    if (value < absl::ZeroDuration()) {
      return InvalidFieldError(absl::StrCat("adaptation.", name), "must not be negative");
    }
  }
  if (o.budget_interval <= absl::ZeroDuration()) {
    return InvalidFieldError("adaptation.budget_interval", "must be positive");
  }
  if (o.budget < 0) return InvalidFieldError("adaptation.budget", "must not be negative");
  if (!(o.overload_high > 0)) {
    return InvalidFieldError("adaptation.overload_high", "must be positive");
  }
  if (!(o.overload_low >= 0 && o.overload_low <= o.overload_high)) {
    return InvalidFieldError("adaptation.overload_low", "must be in [0, overload_high]");
  }
  if (!(o.min_gain >= 0 && o.min_gain <= 100)) {
    return InvalidFieldError("adaptation.min_gain", "must be in [0, 100]");
  }
  return absl::OkStatus();
}

MigrationGovernor::MigrationGovernor(const Clock& clock, MigrationGovernorOptions options)
    : clock_(clock), options_(std::move(options)) {}

void MigrationGovernor::ObserveHealth(const std::string& subject, bool healthy) {
  const absl::Time now = clock_.Now();
  Health& h = health_[subject];
  if (!healthy) {
    if (!h.unhealthy_since.has_value()) h.unhealthy_since = now;
    h.healthy_since.reset();
    if (now - *h.unhealthy_since >= options_.failure_grace) h.failed = true;
    return;
  }
  h.unhealthy_since.reset();
  if (h.failed && !h.healthy_since.has_value()) h.healthy_since = now;
}

void MigrationGovernor::RestoreFailed(const std::string& subject) {
  Health& h = health_[subject];
  h.failed = true;
  h.healthy_since.reset();
}

void MigrationGovernor::ObserveUtilization(const std::string& subject, double share) {
  const absl::Time now = clock_.Now();
  Load& l = load_[subject];
  if (share >= options_.overload_high) {
    if (!l.high_since.has_value()) l.high_since = now;
    if (now - *l.high_since >= options_.overload_grace) l.overloaded = true;
    return;
  }
  l.high_since.reset();
  if (share < options_.overload_low) l.overloaded = false;
}

bool MigrationGovernor::Failed(const std::string& subject) const {
  auto it = health_.find(subject);
  if (it == health_.end() || !it->second.unhealthy_since.has_value()) return false;
  return clock_.Now() - *it->second.unhealthy_since >= options_.failure_grace;
}

bool MigrationGovernor::Overloaded(const std::string& subject) const {
  auto it = load_.find(subject);
  return it != load_.end() && it->second.overloaded;
}

std::vector<std::string> MigrationGovernor::Recovered() {
  const absl::Time now = clock_.Now();
  std::vector<std::string> out;
  for (auto& [subject, h] : health_) {
    if (h.failed && h.healthy_since.has_value() &&
        now - *h.healthy_since >= options_.failback_grace) {
      out.push_back(subject);
      h.failed = false;
      h.healthy_since.reset();
    }
  }
  return out;
}

absl::Status MigrationGovernor::Admit(const MoveProposal& move) {
  RETURN_IF_ERROR(Allows(move));
  Record(move);
  return absl::OkStatus();
}

absl::Status MigrationGovernor::Allows(const MoveProposal& move) {
  const absl::Time now = clock_.Now();
  // Forced, and not a reason to hold the workload's way home back.
  if (move.trigger == MoveTrigger::kFailure) return absl::OkStatus();
  const bool must_gain =
      move.trigger == MoveTrigger::kOverload || move.trigger == MoveTrigger::kBetterPlacement;
  if (must_gain && move.gain < options_.min_gain) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: a %s move gains %.1f points, below min_gain %.1f", move.workload,
                        MoveTriggerName(move.trigger), move.gain, options_.min_gain));
  }
  if (auto it = last_move_.find(move.workload);
      it != last_move_.end() && now - it->second < options_.cooldown) {
    return absl::FailedPreconditionError(
        absl::StrCat(move.workload, ": moved ", absl::FormatDuration(now - it->second),
                     " ago, within its cooldown of ", absl::FormatDuration(options_.cooldown)));
  }
  while (!budget_used_.empty() && now - budget_used_.front() >= options_.budget_interval) {
    budget_used_.pop_front();
  }
  if (static_cast<int>(budget_used_.size()) >= options_.budget) {
    return absl::FailedPreconditionError(
        absl::StrCat(move.workload, ": the budget of ", options_.budget, " moves per ",
                     absl::FormatDuration(options_.budget_interval), " is spent"));
  }
  return absl::OkStatus();
}

void MigrationGovernor::Record(const MoveProposal& move) {
  ++admitted_;
  // A forced move holds neither the budget nor the workload's cooldown.
  if (move.trigger == MoveTrigger::kFailure) return;
  const absl::Time now = clock_.Now();
  budget_used_.push_back(now);
  last_move_[move.workload] = now;
}

}  // namespace codeco::swm
