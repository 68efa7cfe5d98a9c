// The Prometheus HTTP API client and the telemetry scraper against the real
// /usr/bin/prometheus on 127.0.0.1 (a free port, storage in a scratch
// directory, killed at the end of the test), scraping an exporter in this
// process (prometheus-cpp's Exposer) that serves gauges with known values,
// with recording rules of the test's own that turn them into the series
// CODECO's rules produce. Plus the answers Prometheus itself never gives
// (malformed JSON, a server that never answers), from a canned-answer HTTP
// server on 127.0.0.1, and the parser on its own.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/ports.h"
#include "pdlc/server/prometheus_client.h"
#include "pdlc/store/kv_telemetry_store.h"

namespace codeco::pdlc {
namespace {

namespace fs = std::filesystem;

constexpr char kPrometheusBinary[] = "/usr/bin/prometheus";

int FreeLoopbackPort() {
  absl::StatusOr<int> port = codeco::FreePort("127.0.0.1");
  INFO(port.status());
  REQUIRE(port.ok());
  return *port;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Polls `condition` every 100 ms until it holds or `limit` passes; whether it held.
bool WaitFor(const std::function<bool()>& condition, absl::Duration limit = absl::Seconds(90)) {
  for (const absl::Time end = absl::Now() + limit; absl::Now() < end;) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return condition();
}

// A scratch directory removed with the object.
struct Scratch {
  Scratch() {
    std::string name = (fs::temp_directory_path() / "codeco-pdlc-prometheus-XXXXXX").string();
    REQUIRE(mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path Write(const std::string& name, const std::string& contents) const {
    std::ofstream(path / name, std::ios::binary) << contents;
    return path / name;
  }
  fs::path path;
};

// The test's exporter: gauges with known values on 127.0.0.1:<free port>/metrics.
struct Exporter {
  Exporter() {
    registry = std::make_shared<prometheus::Registry>();
    auto& cpu = prometheus::BuildGauge()
                    .Name("codeco_test_node_cpu_busy")
                    .Help("Fraction of the node's CPU busy.")
                    .Register(*registry);
    cpu.Add({{"cluster", "c1"}, {"node", "n1"}}).Set(0.25);
    cpu.Add({{"cluster", "c1"}, {"node", "n2"}}).Set(0.75);
    auto& memory = prometheus::BuildGauge()
                       .Name("codeco_test_node_memory_used")
                       .Help("Fraction of the node's memory used.")
                       .Register(*registry);
    memory.Add({{"cluster", "c1"}, {"node", "n1"}}).Set(0.5);
    memory.Add({{"cluster", "c1"}, {"node", "n2"}}).Set(0.125);
    auto& restarts = prometheus::BuildGauge()
                         .Name("codeco_test_node_restarts")
                         .Help("Container restarts on the node in the last hour.")
                         .Register(*registry);
    restarts.Add({{"cluster", "c1"}, {"node", "n1"}}).Set(3);
    restarts.Add({{"cluster", "c1"}, {"node", "n2"}}).Set(0);
    const std::map<std::string, std::string> pod = {
        {"cluster", "c1"}, {"namespace", "default"}, {"pod", "web-0"}, {"node", "n1"}};
    prometheus::BuildGauge()
        .Name("codeco_test_pod_cpu_cores")
        .Help("Cores a pod uses.")
        .Register(*registry)
        .Add(pod)
        .Set(1.5);
    prometheus::BuildGauge()
        .Name("codeco_test_pod_memory_bytes")
        .Help("Working set of a pod.")
        .Register(*registry)
        .Add(pod)
        .Set(2.5e8);
    prometheus::BuildGauge()
        .Name("codeco_test_broken")
        .Help("A gauge whose value is NaN.")
        .Register(*registry)
        .Add({{"node", "n1"}})
        .Set(std::nan(""));
    exposer = std::make_unique<prometheus::Exposer>("127.0.0.1:0", 1);
    exposer->RegisterCollectable(registry);
    REQUIRE_FALSE(exposer->GetListeningPorts().empty());
    address = absl::StrCat("127.0.0.1:", exposer->GetListeningPorts().front());
  }
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::string address;
};

// Recording rules of the test: CODECO's series names from the exporter's gauges.
constexpr char kRules[] = R"(groups:
  - name: codeco-test
    interval: 1s
    rules:
      - record: instance:node_cpu:rate1m
        expr: avg by (cluster, node) (codeco_test_node_cpu_busy)
      - record: instance:node_memory:avg1m
        expr: avg by (cluster, node) (codeco_test_node_memory_used)
      - record: pod:container_cpu:rate1m
        expr: sum by (cluster, namespace, pod, node) (codeco_test_pod_cpu_cores)
      - record: pod:container_memory_working_set:avg1m
        expr: sum by (cluster, namespace, pod, node) (codeco_test_pod_memory_bytes)
      - record: node:kube_pod_container_status_restarts:increase1h
        expr: sum by (cluster, node) (codeco_test_node_restarts)
)";

// /usr/bin/prometheus on 127.0.0.1:<free port>, scraping `target` every
// second with kRules, storage and log in a scratch directory. Killed (and
// reaped) with the object; also killed by the kernel if this process dies.
class PrometheusProcess {
 public:
  explicit PrometheusProcess(const std::string& target) {
    port_ = FreeLoopbackPort();
    const fs::path rules = scratch_.Write("rules.yml", kRules);
    const fs::path config = scratch_.Write(
        "prometheus.yml",
        absl::StrCat("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n",
                     "  evaluation_interval: 1s\n", "rule_files: [\"", rules.string(), "\"]\n",
                     "scrape_configs:\n  - job_name: codeco-test\n",
                     "    static_configs: [{targets: [\"", target, "\"]}]\n"));
    log_ = scratch_.path / "prometheus.log";
    std::vector<std::string> args = {kPrometheusBinary, "--config.file=" + config.string(),
                                     "--storage.tsdb.path=" + (scratch_.path / "data").string(),
                                     absl::StrCat("--web.listen-address=127.0.0.1:", port_),
                                     "--log.level=warn"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int log_fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(log_fd >= 0);
    const pid_t parent = getpid();
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(log_fd);
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  /// "http://127.0.0.1:<port>".
  std::string Url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  /// Whether it is still running.
  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }
  /// Its log so far.
  std::string Log() const { return ReadFile(log_); }

 private:
  Scratch scratch_;
  int port_ = 0;
  fs::path log_;
  pid_t pid_ = -1;
};

// A one-line HTTP server on 127.0.0.1: answers every request with `answer`
// (raw bytes, status line included) and closes; with an empty answer it
// accepts and reads but never answers.
class CannedHttpServer {
 public:
  explicit CannedHttpServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedHttpServer() {
    stop_ = true;
    thread_.join();
    for (int c : held_) close(c);
    close(fd_);
  }
  std::string Url() const { return absl::StrCat("http://127.0.0.1:", port_); }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      // Read the request head and body (the client sends small forms).
      std::string request;
      char buffer[4096];
      for (;;) {
        pollfd c{conn, POLLIN, 0};
        if (poll(&c, 1, 200) <= 0) break;
        const ssize_t n = read(conn, buffer, sizeof buffer);
        if (n <= 0) break;
        request.append(buffer, static_cast<size_t>(n));
      }
      if (answer_.empty()) {
        held_.push_back(conn);  // never answered; closed at the end
        continue;
      }
      size_t written = 0;
      while (written < answer_.size()) {
        const ssize_t n = write(conn, answer_.data() + written, answer_.size() - written);
        if (n <= 0) break;
        written += static_cast<size_t>(n);
      }
      close(conn);
    }
  }

  const std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  std::thread thread_;
};

std::string HttpAnswer(const std::string& status_line, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status_line, "\r\nContent-Type: application/json\r\n",
                      "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

PrometheusClient MakeClient(const std::string& url, PrometheusClientOptions options = {}) {
  options.base_url = url;
  PrometheusClient client(options);
  REQUIRE(client.Check().ok());
  return client;
}

const LabelledSample* FindByLabel(const std::vector<LabelledSample>& samples,
                                  const std::string& label, const std::string& value) {
  for (const LabelledSample& s : samples) {
    auto it = s.labels.find(label);
    if (it != s.labels.end() && it->second == value) return &s;
  }
  return nullptr;
}

TEST_CASE("Prometheus client and scraper against a real Prometheus") {
  REQUIRE(fs::exists(kPrometheusBinary));
  Exporter exporter;
  PrometheusProcess prometheus(exporter.address);
  PrometheusClient client = MakeClient(prometheus.Url());

  // Wait until every rule output (and the NaN gauge) can be read.
  const std::vector<std::string> wanted = {"instance:node_cpu:rate1m",
                                           "instance:node_memory:avg1m",
                                           "pod:container_cpu:rate1m",
                                           "pod:container_memory_working_set:avg1m",
                                           "node:kube_pod_container_status_restarts:increase1h",
                                           "codeco_test_broken"};
  std::string last_error;
  const bool ready = WaitFor([&] {
    if (!prometheus.Running()) return true;  // reported below
    for (const std::string& query : wanted) {
      absl::StatusOr<InstantQueryResult> r = client.QueryInstant(query, NowMs());
      if (!r.ok()) {
        last_error = r.status().ToString();
        return false;
      }
      if (r->samples.empty() && r->non_finite_skipped == 0) {
        last_error = query + ": no samples yet";
        return false;
      }
    }
    return true;
  });
  INFO("last error: " << last_error << "\nprometheus log:\n" << prometheus.Log());
  REQUIRE(prometheus.Running());
  REQUIRE(ready);

  {  // Instant queries.
    const int64_t now = NowMs();
    absl::StatusOr<InstantQueryResult> cpu = client.QueryInstant("instance:node_cpu:rate1m", now);
    REQUIRE(cpu.ok());
    REQUIRE(cpu->samples.size() == 2);
    CHECK(cpu->non_finite_skipped == 0);
    const LabelledSample* n1 = FindByLabel(cpu->samples, "node", "n1");
    const LabelledSample* n2 = FindByLabel(cpu->samples, "node", "n2");
    REQUIRE(n1 != nullptr);
    REQUIRE(n2 != nullptr);
    CHECK(n1->value == 0.25);
    CHECK(n2->value == 0.75);
    CHECK(n1->time_ms == now);
    CHECK(n1->labels.at("cluster") == "c1");
    CHECK(n1->labels.at("__name__") == "instance:node_cpu:rate1m");

    // A scalar is one sample without labels.
    absl::StatusOr<InstantQueryResult> scalar =
        client.QueryInstant("scalar(sum(instance:node_cpu:rate1m))", now);
    REQUIRE(scalar.ok());
    REQUIRE(scalar->samples.size() == 1);
    CHECK(scalar->samples[0].labels.empty());
    CHECK(scalar->samples[0].value == 1.0);

    // NaN and infinities are skipped and counted.
    absl::StatusOr<InstantQueryResult> nan = client.QueryInstant("codeco_test_broken", now);
    REQUIRE(nan.ok());
    CHECK(nan->samples.empty());
    CHECK(nan->non_finite_skipped == 1);
    absl::StatusOr<InstantQueryResult> inf =
        client.QueryInstant("instance:node_cpu:rate1m / 0 or vector(-1) / 0", now);
    REQUIRE(inf.ok());
    CHECK(inf->samples.empty());
    CHECK(inf->non_finite_skipped == 3);

    // A string answer is not a sample.
    absl::StatusOr<InstantQueryResult> text = client.QueryInstant("\"hello\"", now);
    CHECK(text.status().code() == absl::StatusCode::kInvalidArgument);
  }

  {  // Range queries.
    const int64_t end = NowMs();
    const int64_t start = end - 5'000;
    absl::StatusOr<RangeQueryResult> range =
        client.QueryRange("codeco_test_node_cpu_busy", start, end, absl::Seconds(1));
    INFO(range.status());
    REQUIRE(range.ok());
    REQUIRE(range->series.size() == 2);
    for (const LabelledSeries& series : range->series) {
      INFO(series.labels.at("node"));
      CHECK(series.labels.at("job") == "codeco-test");
      REQUIRE_FALSE(series.points.empty());
      CHECK(series.points.back().time_ms == end);
      for (const TimedValue& point : series.points) {
        CHECK((point.time_ms - start) % 1000 == 0);
        CHECK(point.value == (series.labels.at("node") == "n1" ? 0.25 : 0.75));
      }
    }
    // The rule output over a range too.
    absl::StatusOr<RangeQueryResult> recorded = client.QueryRange(
        "instance:node_memory:avg1m{node=\"n2\"}", start, end, absl::Milliseconds(500));
    REQUIRE(recorded.ok());
    REQUIRE(recorded->series.size() == 1);
    REQUIRE_FALSE(recorded->series[0].points.empty());
    CHECK(recorded->series[0].points.back().value == 0.125);
    // Too many points per series: Prometheus' own error, quoted.
    absl::StatusOr<RangeQueryResult> too_fine =
        client.QueryRange("codeco_test_node_cpu_busy", 0, end, absl::Seconds(1));
    CHECK(too_fine.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(too_fine.status().message()), Catch::Contains("bad_data"));
  }

  {  // Error answers and caps.
    // Bad PromQL: INVALID_ARGUMENT with Prometheus' errorType and error.
    absl::StatusOr<InstantQueryResult> bad = client.QueryInstant("sum(rate(", NowMs());
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string message(bad.status().message());
    CHECK_THAT(message, Catch::Contains("HTTP 400"));
    CHECK_THAT(message, Catch::Contains("bad_data"));
    CHECK_THAT(message, Catch::Contains("parse error"));
    CHECK_THAT(message, Catch::Contains(prometheus.Url()));
    absl::StatusOr<RangeQueryResult> bad_range =
        client.QueryRange("}{", NowMs() - 1000, NowMs(), absl::Seconds(1));
    CHECK(bad_range.status().code() == absl::StatusCode::kInvalidArgument);

    // The answer size cap and the point cap.
    PrometheusClientOptions small;
    small.max_response_bytes = 64;
    absl::StatusOr<InstantQueryResult> capped =
        MakeClient(prometheus.Url(), small).QueryInstant("instance:node_cpu:rate1m", NowMs());
    CHECK(capped.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(capped.status().message()), Catch::Contains("max_response_bytes = 64"));
    PrometheusClientOptions few;
    few.max_points = 1;
    absl::StatusOr<InstantQueryResult> too_many =
        MakeClient(prometheus.Url(), few).QueryInstant("instance:node_cpu:rate1m", NowMs());
    CHECK(too_many.status().code() == absl::StatusCode::kResourceExhausted);
  }

  {  // One pull of the scraper into a store.
    std::unique_ptr<KvStore> kv = NewInMemoryKvStore({kTelemetryColumnFamily});
    absl::StatusOr<std::unique_ptr<TelemetryStore>> store = NewKvTelemetryStore(*kv);
    REQUIRE(store.ok());
    TelemetryScraper scraper(client, **store, DefaultTelemetryMappings());
    const int64_t now = NowMs();
    PullReport report = scraper.Pull(now);
    INFO(report.status());
    REQUIRE(report.status().ok());
    REQUIRE(report.series.size() == 5);
    CHECK(report.stored() == 8);  // 2 nodes x 3 metrics + 1 pod x 2 metrics
    auto value_of = [&](SubjectKind kind, const std::string& subject, const std::string& metric) {
      absl::StatusOr<std::vector<TimedValue>> read =
          (*store)->ReadRaw({kind, subject, metric}, now, now + 1);
      REQUIRE(read.ok());
      REQUIRE(read->size() == 1);
      return (*read)[0].value;
    };
    CHECK(value_of(SubjectKind::kNode, "n1", kNodeCpuMetric) == 0.25);
    CHECK(value_of(SubjectKind::kNode, "n2", kNodeCpuMetric) == 0.75);
    CHECK(value_of(SubjectKind::kNode, "n1", kNodeMemoryMetric) == 0.5);
    CHECK(value_of(SubjectKind::kNode, "n2", kNodeMemoryMetric) == 0.125);
    CHECK(value_of(SubjectKind::kNode, "n1", kNodeRestartsMetric) == 3);
    CHECK(value_of(SubjectKind::kNode, "n2", kNodeRestartsMetric) == 0);
    CHECK(value_of(SubjectKind::kPod, "default/web-0", kPodCpuMetric) == 1.5);
    CHECK(value_of(SubjectKind::kPod, "default/web-0", kPodMemoryMetric) == 2.5e8);
    absl::StatusOr<std::vector<TelemetrySubject>> pods = (*store)->ListSubjects(SubjectKind::kPod);
    REQUIRE(pods.ok());
    REQUIRE(pods->size() == 1);
    CHECK((*pods)[0].metrics == std::vector<std::string>{kPodCpuMetric, kPodMemoryMetric});

    // The same pull retried is stored once; a later one adds samples.
    PullReport retry = scraper.Pull(now);
    REQUIRE(retry.status().ok());
    CHECK(retry.stored() == 0);
    for (const SeriesPullReport& s : retry.series) CHECK(s.duplicate);
    PullReport later = scraper.Pull(now + 1000);
    REQUIRE(later.status().ok());
    CHECK(later.stored() == 8);
  }
}

TEST_CASE("Prometheus client reports a refused connection") {
  const std::string url = absl::StrCat("http://127.0.0.1:", FreeLoopbackPort());
  absl::StatusOr<InstantQueryResult> r = MakeClient(url).QueryInstant("up", NowMs());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("cannot connect"));
  CHECK_THAT(std::string(r.status().message()), Catch::Contains(url));
}

TEST_CASE("Prometheus client times out on a server that never answers") {
  CannedHttpServer silent("");
  PrometheusClientOptions options;
  options.timeout = absl::Milliseconds(300);
  absl::StatusOr<InstantQueryResult> r = MakeClient(silent.Url(), options).QueryInstant("up", 0);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("no answer within 300ms"));
}

TEST_CASE("Prometheus client reports malformed and error answers from a server") {
  {
    CannedHttpServer truncated(HttpAnswer("200 OK", R"({"status":"success","data":{"resu)"));
    absl::StatusOr<InstantQueryResult> r = MakeClient(truncated.Url()).QueryInstant("up", 0);
    CHECK(r.status().code() == absl::StatusCode::kInternal);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("malformed answer: not JSON"));
  }
  {
    CannedHttpServer html(HttpAnswer("502 Bad Gateway", "<html>bad gateway</html>"));
    absl::StatusOr<InstantQueryResult> r = MakeClient(html.Url()).QueryInstant("up", 0);
    CHECK(r.status().code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("HTTP 502: <html>bad gateway"));
  }
  {
    CannedHttpServer timeout(HttpAnswer(
        "503 Service Unavailable",
        R"({"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"})"));
    absl::StatusOr<InstantQueryResult> r = MakeClient(timeout.Url()).QueryInstant("up", 0);
    CHECK(r.status().code() == absl::StatusCode::kDeadlineExceeded);
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("timeout: query timed out in expression evaluation"));
  }
}

TEST_CASE("Prometheus answers are parsed strictly") {
  auto parse = [](long status, const std::string& body) {
    return ParsePrometheusAnswer(status, body, 100, "test");
  };
  // Vector with labels, NaN skipped.
  absl::StatusOr<PrometheusAnswer> vector =
      parse(200, R"({"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"node":"n1"},"value":[1700000000.5,"0.25"]},
        {"metric":{"node":"n2"},"value":[1700000000.5,"NaN"]},
        {"metric":{"node":"n3"},"value":[1700000000.5,"-Inf"]},
        {"metric":{"node":"n4"},"value":[1700000000.5,"1e999"]}]},
        "warnings":["careful"]})");
  REQUIRE(vector.ok());
  REQUIRE(vector->instant.samples.size() == 1);
  CHECK(vector->instant.samples[0].labels.at("node") == "n1");
  CHECK(vector->instant.samples[0].time_ms == 1'700'000'000'500);
  CHECK(vector->instant.samples[0].value == 0.25);
  CHECK(vector->instant.non_finite_skipped == 3);
  CHECK(vector->instant.warnings == std::vector<std::string>{"careful"});

  // Matrix.
  absl::StatusOr<PrometheusAnswer> matrix =
      parse(200, R"({"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{},"values":[[1,"1"],[2,"+Inf"],[3,"3.5"]]}]}})");
  REQUIRE(matrix.ok());
  REQUIRE(matrix->range.series.size() == 1);
  CHECK(matrix->range.series[0].points == std::vector<TimedValue>{{1000, 1}, {3000, 3.5}});
  CHECK(matrix->range.non_finite_skipped == 1);

  // Error answers keep Prometheus' errorType and error, mapped to a code.
  absl::StatusOr<PrometheusAnswer> error =
      parse(422, R"({"status":"error","errorType":"execution","error":"many-to-many matching"})");
  CHECK(error.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(error.status().message()),
             Catch::Equals("test: prometheus error (HTTP 422) execution: many-to-many matching"));
  CHECK(parse(503, R"({"status":"error","errorType":"unavailable","error":"x"})").status().code() ==
        absl::StatusCode::kUnavailable);
  CHECK(parse(404, "404 page not found").status().code() == absl::StatusCode::kNotFound);
  CHECK(parse(401, "").status().code() == absl::StatusCode::kUnauthenticated);

  // Malformed answers are INTERNAL and say what is wrong.
  auto malformed = [&](const std::string& body, const std::string& why) {
    absl::StatusOr<PrometheusAnswer> r = parse(200, body);
    INFO(body);
    CHECK(r.status().code() == absl::StatusCode::kInternal);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains(why));
  };
  malformed("", "not JSON");
  malformed("[1,2]", "not a JSON object");
  malformed(R"({"status":"maybe"})", "\"status\"");
  malformed(R"({"status":"success"})", "no \"data\" object");
  malformed(R"({"status":"success","data":{"result":[]}})", "data.resultType");
  malformed(R"({"status":"success","data":{"resultType":"vector"}})", "data.result");
  malformed(R"({"status":"success","data":{"resultType":"vector","result":{}}})", "not an array");
  malformed(R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,1]}]}})",
            "data.result[0]");
  malformed(R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"abc"]}]}})",
            "data.result[0]");
  malformed(
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}})",
      "data.result[0]");
  malformed(R"({"status":"success","data":{"resultType":"matrix","result":[{"values":[[1]]}]}})",
            "data.result[0].values[0]");
  malformed(R"({"status":"success","data":{"resultType":"scalar","result":"x"}})", "data.result");
  malformed(R"({"status":"success","data":{"resultType":"blob","result":[]}})",
            "unknown resultType");

  // The point cap.
  std::string many = R"({"status":"success","data":{"resultType":"vector","result":[)";
  for (int i = 0; i < 101; ++i) absl::StrAppend(&many, i ? "," : "", R"({"value":[1,"1"]})");
  many += "]}}";
  CHECK(parse(200, many).status().code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("Prometheus client options are checked") {
  CHECK_THAT(std::string(PrometheusClient({.base_url = "127.0.0.1:9090"}).Check().message()),
             Catch::StartsWith("base_url"));
  CHECK_THAT(std::string(PrometheusClient({.base_url = "http://x", .timeout = absl::ZeroDuration()})
                             .Check()
                             .message()),
             Catch::StartsWith("timeout"));
  CHECK(PrometheusClient({.base_url = "http://127.0.0.1:9090/"}).options().base_url ==
        "http://127.0.0.1:9090");
  // Calls with bad options or arguments fail before any request.
  CHECK(PrometheusClient({.base_url = "ftp://x"}).QueryInstant("up", 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
  PrometheusClient client({.base_url = "http://127.0.0.1:1"});
  CHECK(client.QueryInstant("", 0).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(client.QueryRange("up", 10, 5, absl::Seconds(1)).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(client.QueryRange("up", 0, 5, absl::ZeroDuration()).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace codeco::pdlc
