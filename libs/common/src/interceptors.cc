#include "codeco/common/interceptors.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"
#include "grpcpp/server_context.h"

namespace codeco {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::Interceptor;
using grpc::experimental::InterceptorBatchMethods;
using grpc::experimental::ServerInterceptorFactoryInterface;
using grpc::experimental::ServerRpcInfo;

const char* CodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i <= 16 ? kNames[i] : "UNKNOWN";
}

// "/pkg.Service/Method" -> "pkg.Service".
std::string ServiceOf(const std::string& method) {
  size_t slash = method.rfind('/');
  if (slash == std::string::npos || slash == 0) return "";
  return method.substr(1, slash - 1);
}

// Seconds from now to `deadline`; negative when past, infinite when none.
double SecondsLeft(std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) return -1;
  return std::chrono::duration<double>(deadline - std::chrono::system_clock::now()).count();
}

bool HasDeadline(std::chrono::system_clock::time_point deadline) {
  return deadline != std::chrono::system_clock::time_point::max();
}

class RpcLogInterceptor final : public Interceptor {
 public:
  explicit RpcLogInterceptor(ServerRpcInfo* info) : info_(info), start_(absl::Now()) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      log::Level level = status.ok() ? log::Level::kDebug : log::Level::kInfo;
      if (status.error_code() == grpc::StatusCode::INTERNAL ||
          status.error_code() == grpc::StatusCode::UNKNOWN ||
          status.error_code() == grpc::StatusCode::DATA_LOSS) {
        level = log::Level::kWarn;
      }
      if (log::Enabled(level)) {
        log::Fields fields = {{"method", info_->method()},
                              {"code", CodeName(status.error_code())},
                              {"duration_ms",
                               absl::StrCat(absl::ToDoubleMilliseconds(absl::Now() - start_))},
                              {"peer", info_->server_context()->peer()}};
        if (!status.ok()) fields.emplace_back("error", status.error_message());
        log::Write(level, "rpc", fields);
      }
    }
    methods->Proceed();
  }

 private:
  ServerRpcInfo* info_;
  absl::Time start_;
};

class RpcMetricsInterceptor final : public Interceptor {
 public:
  RpcMetricsInterceptor(ServerRpcInfo* info, RpcMetrics* metrics)
      : info_(info),
        metrics_(metrics),
        in_flight_(metrics->in_flight.Add({{"method", info->method()}})),
        start_(absl::Now()) {
    in_flight_.Increment();
  }

  ~RpcMetricsInterceptor() override {
    // A call cancelled before its status was sent still counts.
    if (!recorded_) Record("CANCELLED");
    in_flight_.Decrement();
  }

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Record(CodeName(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  void Record(const char* code) {
    recorded_ = true;
    static const prometheus::Histogram::BucketBoundaries kBuckets = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
        0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
    metrics_->duration.Add({{"method", info_->method()}, {"code", code}}, kBuckets)
        .Observe(absl::ToDoubleSeconds(absl::Now() - start_));
  }

  ServerRpcInfo* info_;
  RpcMetrics* metrics_;
  prometheus::Gauge& in_flight_;
  absl::Time start_;
  bool recorded_ = false;
};

class DeadlineInterceptor final : public Interceptor {
 public:
  DeadlineInterceptor(ServerRpcInfo* info, RpcMetrics* metrics) : info_(info), metrics_(metrics) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      auto deadline = info_->server_context()->deadline();
      if (HasDeadline(deadline)) {
        static const prometheus::Histogram::BucketBoundaries kBuckets = {
            0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 3600};
        metrics_->deadline_budget.Add({{"method", info_->method()}}, kBuckets)
            .Observe(SecondsLeft(deadline));
      } else {
        metrics_->without_deadline.Add({{"method", info_->method()}}).Increment();
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      auto deadline = info_->server_context()->deadline();
      if (HasDeadline(deadline) && SecondsLeft(deadline) < 0) {
        metrics_->deadline_exceeded.Add({{"method", info_->method()}}).Increment();
        log::Warn("rpc finished after its deadline",
                  {{"method", info_->method()},
                   {"late_ms", absl::StrCat(-SecondsLeft(deadline) * 1000)}});
      }
    }
    methods->Proceed();
  }

 private:
  ServerRpcInfo* info_;
  RpcMetrics* metrics_;
};

class UnimplementedNoteInterceptor final : public Interceptor {
 public:
  UnimplementedNoteInterceptor(ServerRpcInfo* info, const std::string* note)
      : info_(info), note_(note) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::UNIMPLEMENTED,
            absl::StrCat(info_->method(), " is not implemented yet: ", *note_)));
      }
    }
    methods->Proceed();
  }

 private:
  ServerRpcInfo* info_;
  const std::string* note_;
};

// A factory that builds one interceptor type per call.
template <typename Make>
class Factory final : public ServerInterceptorFactoryInterface {
 public:
  explicit Factory(Make make) : make_(std::move(make)) {}
  Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override { return make_(info); }

 private:
  Make make_;
};

template <typename Make>
std::unique_ptr<ServerInterceptorFactoryInterface> MakeFactory(Make make) {
  return std::make_unique<Factory<Make>>(std::move(make));
}

}  // namespace

RpcMetrics::RpcMetrics(const std::string& service, prometheus::Registry& registry)
    : duration(prometheus::BuildHistogram()
                   .Name(MetricName(service, "rpc_duration_seconds"))
                   .Help("Server-side latency of gRPC calls by method and status code")
                   .Register(registry)),
      in_flight(prometheus::BuildGauge()
                    .Name(MetricName(service, "rpc_in_flight"))
                    .Help("gRPC calls being handled, by method")
                    .Register(registry)),
      deadline_budget(prometheus::BuildHistogram()
                          .Name(MetricName(service, "rpc_deadline_budget_seconds"))
                          .Help("Time left until the client's deadline when a call arrives")
                          .Register(registry)),
      without_deadline(prometheus::BuildCounter()
                           .Name(MetricName(service, "rpc_without_deadline_total"))
                           .Help("Calls that arrived without a deadline")
                           .Register(registry)),
      deadline_exceeded(prometheus::BuildCounter()
                            .Name(MetricName(service, "rpc_deadline_exceeded_total"))
                            .Help("Calls whose handler finished after the client's deadline")
                            .Register(registry)) {}

std::vector<std::unique_ptr<ServerInterceptorFactoryInterface>> MakeServerInterceptors(
    const InterceptorOptions& options) {
  std::vector<std::unique_ptr<ServerInterceptorFactoryInterface>> out;
  // Notes first, so the log and metrics see the final status.
  auto notes = std::make_shared<std::map<std::string, std::string>>(options.unimplemented_notes);
  out.push_back(MakeFactory([notes](ServerRpcInfo* info) -> Interceptor* {
    auto it = notes->find(ServiceOf(info->method()));
    return it == notes->end() ? nullptr : new UnimplementedNoteInterceptor(info, &it->second);
  }));
  if (options.metrics != nullptr) {
    RpcMetrics* metrics = options.metrics;
    out.push_back(MakeFactory([metrics](ServerRpcInfo* info) -> Interceptor* {
      return new RpcMetricsInterceptor(info, metrics);
    }));
    out.push_back(MakeFactory([metrics](ServerRpcInfo* info) -> Interceptor* {
      return new DeadlineInterceptor(info, metrics);
    }));
  }
  out.push_back(
      MakeFactory([](ServerRpcInfo* info) -> Interceptor* { return new RpcLogInterceptor(info); }));
  return out;
}

}  // namespace codeco
