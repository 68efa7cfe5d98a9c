#include "acm/core/application_autoscaler.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/logging.h"

namespace codeco::acm {

ReplicaAutoscalerOptions AutoscalerOptionsOf(const v1::Autoscaling& autoscaling) {
  ReplicaAutoscalerOptions options;
  options.min_replicas = std::max(1, autoscaling.min_replicas());
  options.max_replicas = autoscaling.max_replicas();
  if (autoscaling.target_cpu_utilization_percent() > 0) {
    options.target_utilization = autoscaling.target_cpu_utilization_percent() / 100.0;
  }
  if (autoscaling.scale_down_cooldown_ns() > 0) {
    options.scale_down_cooldown = absl::Nanoseconds(autoscaling.scale_down_cooldown_ns());
  }
  return options;
}

ApplicationAutoscaler::ApplicationAutoscaler(ApplicationManager& manager, const Clock& clock)
    : manager_(manager), clock_(clock) {}

void ApplicationAutoscaler::RecordUsage(const std::string& cluster,
                                        const std::vector<PodReport>& pods) {
  std::map<std::string, PodReport> by_pod;
  for (const PodReport& p : pods) by_pod[p.pod] = p;
  absl::MutexLock lock(&mu_);
  pods_[cluster] = std::move(by_pod);
}

void ApplicationAutoscaler::ForgetCluster(const std::string& cluster) {
  absl::MutexLock lock(&mu_);
  pods_.erase(cluster);
}

ReplicaAutoscaler& ApplicationAutoscaler::ScalerFor(const std::string& app,
                                                    const std::string& service,
                                                    const ReplicaAutoscalerOptions& options) {
  Scaler& scaler = scalers_[{app, service}];
  if (scaler.autoscaler == nullptr || !(scaler.options == options)) {
    scaler.options = options;
    scaler.autoscaler = std::make_unique<ReplicaAutoscaler>(clock_, options);
  }
  return *scaler.autoscaler;
}

std::vector<AutoscaleDecision> ApplicationAutoscaler::Tick() {
  std::vector<AutoscaleDecision> decisions;
  absl::StatusOr<ApplicationSnapshot> all = manager_.Snapshot("");
  if (!all.ok()) {
    log::Warn("autoscaler: applications not read",
              {{"error", std::string(all.status().message())}});
    return decisions;
  }
  struct Change {
    std::string application;
    int64_t spec_revision = 0;
    std::vector<v1::ServiceMetrics> metrics;
    std::map<std::string, int> wanted;
    size_t first_decision = 0;
  };
  std::vector<Change> changes;
  {
    absl::MutexLock lock(&mu_);
    std::set<std::pair<std::string, std::string>> autoscaled;
    for (const v1::Application& app : all->applications) {
      const std::string& name = app.metadata().name();
      const bool any =
          std::any_of(app.spec().services().begin(), app.spec().services().end(),
                      [](const v1::ServiceSpec& s) { return s.autoscaling().max_replicas() > 0; });
      if (!any) continue;
      for (const v1::ServiceSpec& s : app.spec().services()) {
        if (s.autoscaling().max_replicas() > 0) autoscaled.insert({name, s.name()});
      }
      // Only an application running its current spec: while a placement
      // (a scale among them) is on its way, the replicas are not all there.
      const v1::ApplicationPhase phase = app.status().phase();
      if ((phase != v1::APPLICATION_PHASE_RUNNING && phase != v1::APPLICATION_PHASE_DEGRADED) ||
          app.status().observed_spec_revision() != app.spec_revision()) {
        continue;
      }
      Change change{.application = name,
                    .spec_revision = app.spec_revision(),
                    .first_decision = decisions.size()};
      for (const v1::ServiceSpec& s : app.spec().services()) {
        int64_t cpu = 0, memory = 0;
        int measured = 0, ready = 0;
        for (const v1::ServicePlacement& p : app.status().placements()) {
          if (p.service() != s.name()) continue;
          auto cluster = pods_.find(p.cluster());
          if (cluster == pods_.end()) continue;
          auto pod = cluster->second.find(p.pod());
          if (pod == cluster->second.end() || pod->second.phase != lms::v1::POD_PHASE_RUNNING) {
            continue;
          }
          ++ready;
          if (!pod->second.usage_known) continue;
          ++measured;
          cpu += pod->second.cpu_millicores;
          memory += pod->second.memory_bytes;
        }
        const int64_t request = s.requests().cpu_millicores();
        const double utilization =
            measured > 0 && request > 0
                ? static_cast<double>(cpu) / (static_cast<double>(measured) * request)
                : 0;
        v1::ServiceMetrics& m = change.metrics.emplace_back();
        m.set_service(s.name());
        m.set_ready_replicas(ready);
        m.set_cpu_millicores(cpu);
        m.set_memory_bytes(memory);
        m.set_cpu_utilization_percent(static_cast<int32_t>(std::lround(utilization * 100)));
        if (s.autoscaling().max_replicas() <= 0 || measured == 0 || request <= 0) continue;
        const ReplicaAutoscalerOptions options = AutoscalerOptionsOf(s.autoscaling());
        if (!ValidateReplicaAutoscalerOptions(options).ok())
          continue;  // the CAM parser refuses these
        const int current = s.replicas() > 0 ? s.replicas() : 1;
        const int desired = ScalerFor(name, s.name(), options).Desired(current, utilization);
        if (desired == current) continue;
        change.wanted[s.name()] = desired;
        decisions.push_back(AutoscaleDecision{.application = name,
                                              .service = s.name(),
                                              .from = current,
                                              .to = desired,
                                              .utilization_percent = m.cpu_utilization_percent()});
      }
      changes.push_back(std::move(change));
    }
    // Services no longer autoscaled (or gone) lose their wishes.
    for (auto it = scalers_.begin(); it != scalers_.end();) {
      it = autoscaled.count(it->first) ? std::next(it) : scalers_.erase(it);
    }
  }

  for (const Change& change : changes) {
    absl::Status recorded = manager_.RecordMetrics(change.application, change.metrics);
    if (!recorded.ok() && !absl::IsNotFound(recorded)) {
      log::Warn("autoscaler: metrics not recorded",
                {{"application", change.application}, {"error", std::string(recorded.message())}});
    }
    if (change.wanted.empty()) continue;
    std::vector<std::string> parts;
    for (size_t i = change.first_decision; i < decisions.size(); ++i) {
      const AutoscaleDecision& d = decisions[i];
      if (d.application != change.application) break;
      parts.push_back(absl::StrCat(d.service, " ", d.from, " -> ", d.to, " (CPU ",
                                   d.utilization_percent, "% of requests)"));
    }
    const std::string cause = absl::StrCat("autoscaled: ", absl::StrJoin(parts, ", "));
    absl::StatusOr<v1::Application> scaled =
        manager_.ScaleServices(change.application, change.spec_revision, change.wanted, cause);
    for (size_t i = change.first_decision; i < decisions.size(); ++i) {
      AutoscaleDecision& d = decisions[i];
      if (d.application != change.application) break;
      if (!scaled.ok()) d.error = std::string(scaled.status().message());
    }
    if (scaled.ok()) {
      log::Info("autoscaled", {{"application", change.application},
                               {"cause", cause},
                               {"spec_revision", absl::StrCat(scaled->spec_revision())}});
    } else {
      log::Warn("autoscaler: scale not stored",
                {{"application", change.application},
                 {"cause", cause},
                 {"error", std::string(scaled.status().message())}});
    }
  }
  return decisions;
}

}  // namespace codeco::acm
