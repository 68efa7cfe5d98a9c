#pragma once
// Server interceptors every codeco service installs:
//  - RpcLogInterceptor: one structured log line per finished call;
//  - RpcMetricsInterceptor: latency histogram and in-flight gauge per method;
//  - DeadlineInterceptor: how much time clients give calls, and calls that
//    finish after their deadline;
//  - UnimplementedNoteInterceptor: turns the bare UNIMPLEMENTED of a method
//    whose issue has not landed into a message saying so.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/server_interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace codeco {

/// The RPC metrics of one service, created once from the registry:
///   codeco_<svc>_rpc_duration_seconds{method,code}   histogram
///   codeco_<svc>_rpc_in_flight{method}               gauge
///   codeco_<svc>_rpc_deadline_budget_seconds{method} histogram of client deadlines
///   codeco_<svc>_rpc_without_deadline_total{method}  counter
///   codeco_<svc>_rpc_deadline_exceeded_total{method} counter of calls finished late
struct RpcMetrics {
  /// Registers the families in `registry` for service `service`.
  RpcMetrics(const std::string& service, prometheus::Registry& registry);

  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Gauge>& in_flight;
  prometheus::Family<prometheus::Histogram>& deadline_budget;
  prometheus::Family<prometheus::Counter>& without_deadline;
  prometheus::Family<prometheus::Counter>& deadline_exceeded;
};

/// What the interceptors need to know about the server.
struct InterceptorOptions {
  /// Short service name for logs ("acm").
  std::string service;
  /// Metrics to update; null disables RpcMetricsInterceptor and DeadlineInterceptor.
  RpcMetrics* metrics = nullptr;
  /// Fully qualified gRPC service name -> note added to bare UNIMPLEMENTED
  /// answers of its methods (e.g. "lands with issue #4, the ACM gateway").
  std::map<std::string, std::string> unimplemented_notes;
};

/// The interceptor factories for a server, in the order they should run.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeServerInterceptors(const InterceptorOptions& options);

}  // namespace codeco
