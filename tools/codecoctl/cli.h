#pragma once
// Shared plumbing of codecoctl commands: argument parsing, and channels to
// the federation `codecoctl up` started (found through the run state).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace codeco::ctl {

/// Positional arguments and --flags of one command.
struct Args {
  /// Arguments that are not flags, in order.
  std::vector<std::string> positional;
  /// --name value, --name=value; a flag in `switches` alone means "true".
  std::map<std::string, std::string> flags;
  /// Every value each valued flag was given, in order (flags keeps the last).
  std::map<std::string, std::vector<std::string>> all_values;

  /// The flag's value or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  /// True when the flag was given.
  bool Has(const std::string& name) const { return flags.contains(name); }
  /// Every value of a repeatable flag, in order (none: empty).
  std::vector<std::string> GetAll(const std::string& name) const;
};

/// How a flag is spelled on the command line: "-o" for one letter, else "--name".
std::string FlagName(const std::string& name);

/// Parses argv[first..argc). `switches` are flags that take no value; every
/// flag must be in `switches` or `valued`. Errors name the flag.
absl::StatusOr<Args> ParseArgs(int argc, char** argv, int first,
                               const std::set<std::string>& switches,
                               const std::set<std::string>& valued);

/// A channel to `address`: plaintext with --insecure, mTLS with --ca/--cert/--key,
/// else the identity recorded by `codecoctl up`.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelTo(const std::string& address,
                                                         const Args& args);

/// A context whose deadline is --timeout (default `fallback`) from now.
std::unique_ptr<grpc::ClientContext> ContextWithTimeout(const Args& args, absl::Duration fallback);
/// Writes "codecoctl <command>: <message>" to stderr; returns 1 (the exit code).
int Fail(const std::string& command, const std::string& message);

/// Where the codeco binaries are: $CODECO_BIN_DIR when set, else the
/// directory codecoctl itself lives in (the build's bin/ directory).
std::string BinDir();

/// `codecoctl health`.
int RunHealth(const Args& args);
/// `codecoctl up`.
int RunUp(const Args& args);
/// `codecoctl down`.
int RunDown(const Args& args);
/// `codecoctl restart NAME [--kill] [--down-for D]`: stops one process `up`
/// started (SIGKILL with --kill, as a crash would), leaves it down for D, and
/// starts it again with the same command line on the same addresses.
int RunRestart(const Args& args);
/// `codecoctl fault`.
int RunFault(const Args& args);
/// `codecoctl apply -f FILE [--wait]` (applications, and missions for Mission documents).
int RunApply(const Args& args);
/// `codecoctl get apps|clusters|tree|neighborhoods|revisions NAME|operations|operation ID|
/// missions [NAME]`.
int RunGet(const Args& args);
/// `codecoctl describe app NAME`.
int RunDescribe(const Args& args);
/// `codecoctl delete app NAME | mission NAME | -f FILE | cluster NAME [--force]`.
int RunDelete(const Args& args);
/// `codecoctl watch app NAME [--from-revision N]` (or `watch apps` for all).
int RunWatch(const Args& args);
/// `codecoctl rollback app NAME --to-revision N`.
int RunRollback(const Args& args);
/// `codecoctl migrate APP/WORKLOAD [--to C [--node N]]`: the hub SWM moves
/// one workload; `codecoctl migrate POD --from C --to C --node N`: moves a
/// container with its state through the checkpointers, with a progress bar.
int RunMigrate(const Args& args);

// Rendering of ACM resources (apps.cc). Pure functions, so they are tested
// without a server.

/// How a command prints what it got (-o).
enum class Output {
  /// Aligned columns for people (the default).
  kTable,
  /// YAML: proto field names, enums by name, timestamps in RFC 3339.
  kYaml,
  /// JSON as protobuf's JSON mapping prints it, with proto field names.
  kJson,
};

/// The -o flag of `args` (table when absent); INVALID_ARGUMENT naming -o otherwise.
absl::StatusOr<Output> ParseOutput(const Args& args);
/// One document of a YAML file as `apply -f` and `delete -f` read it.
struct ManifestDocument {
  /// 1-based position in the file.
  int index = 0;
  /// The document's own text (sent to ACM unchanged).
  std::string text;
  /// apiVersion, kind and metadata.name; empty when absent or not YAML.
  std::string api_version, kind, name;
  /// The application it belongs to: spec.appName of a CodecoApp, else metadata.name.
  std::string app_name;
  /// True for the kinds ACM applies (CodecoApp, MultiClusterDeployment) and
  /// for text that is not readable YAML (ACM then says what is wrong with it).
  bool application_model = true;
};
/// `text` cut at its "---" document markers; documents with nothing but
/// comments and blank lines are dropped. A file of one document comes back
/// whole, comments included.
std::vector<ManifestDocument> SplitManifest(const std::string& text);
/// `message` as JSON; indented, or on one line when `compact` (one event per line).
std::string ToJson(const google::protobuf::Message& message, bool compact = false);
/// `message` as -o asks: JSON (with a newline) or YAML.
std::string Print(const google::protobuf::Message& message, Output output);
/// `rows` as columns padded to the widest cell, two spaces apart (the last
/// not padded), a newline after each row.
std::string Columns(const std::vector<std::vector<std::string>>& rows);
/// An enum value's name without `prefix`, capitalised, '_' as '-':
/// ("APPLICATION_PHASE_RUNNING", "APPLICATION_PHASE_") -> "Running".
std::string EnumText(std::string name, const std::string& prefix);
/// `message` as one YAML document (a map), ending in a newline.
std::string ToYaml(const google::protobuf::Message& message);
/// `get apps` as a table.
std::string AppsTable(const acm::v1::ListApplicationsResponse& apps);
/// `get clusters` as a table.
std::string ClustersTable(const acm::v1::ListClustersResponse& clusters);
/// `get neighborhoods` as a table.
std::string NeighborhoodsTable(const acm::v1::ListNeighborhoodsResponse& neighborhoods);
/// `get revisions NAME` as a table.
std::string RevisionsTable(const acm::v1::ListApplicationRevisionsResponse& revisions);
/// `get endpoints`: one row per replica of a multi-cluster service, nearest first.
std::string EndpointsTable(const acm::v1::ResolveServiceResponse& resolved);
/// `describe app NAME` as text (without the channels SWM's plan adds).
std::string DescribeApp(const acm::v1::Application& app);
/// One line (no newline) saying where `op` stands: id, percent, phase, and
/// "done" or "failed: <error>" once done.
std::string OperationLine(const common::v1::Operation& op);
/// `get operations` as a table.
std::string OperationsTable(const acm::v1::ListOperationsResponse& operations);
/// `get migrations` as a table: id, workload, reason, phase, from, to.
std::string MigrationsTable(const swm::v1::ListMigrationsResponse& migrations);
/// `get backups` as a table: each stateful workload's newest backup (the
/// pod it is of, when it was taken, its bytes) and what comes next.
std::string StateBackupsTable(const swm::v1::ListStateBackupsResponse& backups);
/// The hub ACM: --acm ADDR, else the federation's (`codecoctl up`).
absl::StatusOr<std::unique_ptr<acm::v1::AcmService::Stub>> AcmStub(const Args& args);
/// The hub SWM: --swm ADDR, else the federation's (`codecoctl up`).
absl::StatusOr<std::unique_ptr<swm::v1::SwmService::Stub>> SwmStub(const Args& args);
/// The header line `watch` prints before table lines.
std::string WatchHeader();
/// One watch event as one line (table), one compact JSON line, or one YAML
/// document that starts with "---".
std::string WatchLine(const acm::v1::WatchApplicationResponse& event, Output output);

}  // namespace codeco::ctl
