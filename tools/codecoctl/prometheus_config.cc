#include "prometheus_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace codeco::ctl {
namespace {

// A single-quoted YAML scalar.
std::string Quote(const std::string& text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

// A Prometheus duration: whole seconds as "5s", else milliseconds.
std::string Duration(absl::Duration d) {
  int64_t ms = absl::ToInt64Milliseconds(d);
  if (ms <= 0) ms = 1000;
  return ms % 1000 == 0 ? absl::StrCat(ms / 1000, "s") : absl::StrCat(ms, "ms");
}

void AppendTargets(const std::vector<ScrapeTarget>& targets, std::string* out) {
  for (const ScrapeTarget& t : targets) {
    absl::StrAppend(out, "      - targets: [", Quote(t.address), "]\n");
    if (t.labels.empty()) continue;
    absl::StrAppend(out, "        labels: {");
    for (size_t i = 0; i < t.labels.size(); ++i) {
      absl::StrAppend(out, i == 0 ? "" : ", ", t.labels[i].first, ": ", Quote(t.labels[i].second));
    }
    absl::StrAppend(out, "}\n");
  }
}

}  // namespace

std::string PrometheusConfigYaml(const PrometheusConfig& config) {
  std::string out;
  if (!config.comment.empty()) absl::StrAppend(&out, "# ", config.comment, "\n");
  absl::StrAppend(&out, "global:\n  scrape_interval: ", Duration(config.scrape_interval),
                  "\n  evaluation_interval: ", Duration(config.evaluation_interval), "\n");
  if (!config.rule_files.empty()) {
    absl::StrAppend(&out, "rule_files:\n");
    for (const std::string& file : config.rule_files) {
      absl::StrAppend(&out, "  - ", Quote(file), "\n");
    }
  }
  absl::StrAppend(&out, "scrape_configs:\n");
  if (!config.services.empty()) {
    absl::StrAppend(&out, "  - job_name: codeco\n    static_configs:\n");
    AppendTargets(config.services, &out);
  }
  if (!config.codef.empty()) {
    // The series name their own cluster, node and instance (the node, as
    // node-exporter's is after kube-prometheus' relabelling): keep them.
    absl::StrAppend(&out, "  - job_name: codef\n    honor_labels: true\n    static_configs:\n");
    AppendTargets(config.codef, &out);
  }
  return out;
}

std::string RulesFileInSource() {
  return std::string(CODECO_SOURCE_DIR) + "/deploy/prometheus/codeco-rules.yml";
}

}  // namespace codeco::ctl
