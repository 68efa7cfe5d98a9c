#pragma once
// The prometheus.yml `codecoctl up` writes: every service's /metrics (job
// "codeco"), every emulated cluster's Kubernetes-style series from CODEF
// (job "codef", honor_labels so that the series keep their own cluster,
// node and instance labels), and CODECO's recording rules
// (deploy/prometheus/codeco-rules.yml).

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace codeco::ctl {

/// One scrape target and the labels Prometheus attaches to its series.
struct ScrapeTarget {
  /// host:port of its /metrics.
  std::string address;
  /// Target labels, e.g. {cluster, rennes}.
  std::vector<std::pair<std::string, std::string>> labels;
};

/// What the generated prometheus.yml holds.
struct PrometheusConfig {
  /// A comment for the first line (without '#').
  std::string comment;
  /// How often every target is scraped (default 5s).
  absl::Duration scrape_interval = absl::Seconds(5);
  /// How often the recording rules run (default 5s).
  absl::Duration evaluation_interval = absl::Seconds(5);
  /// Rule files, absolute paths.
  std::vector<std::string> rule_files;
  /// The codeco services (job "codeco").
  std::vector<ScrapeTarget> services;
  /// CODEF's per-cluster metrics endpoints (job "codef", honor_labels).
  std::vector<ScrapeTarget> codef;
};

/// The YAML text of `config`.
std::string PrometheusConfigYaml(const PrometheusConfig& config);

/// Where the recording rules are in the source tree this binary was built
/// from: <source>/deploy/prometheus/codeco-rules.yml.
std::string RulesFileInSource();

}  // namespace codeco::ctl
