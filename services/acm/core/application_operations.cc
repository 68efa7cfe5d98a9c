#include "acm/core/application_operations.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"

namespace codeco::acm {
namespace {

void Progress(common::v1::Operation& op, int percent, std::string phase) {
  op.set_progress_percent(percent);
  op.set_phase(std::move(phase));
}

void Fail(common::v1::Operation& op, common::v1::ErrorCode code, const std::string& message) {
  op.set_done(true);
  op.mutable_error()->set_code(code);
  op.mutable_error()->set_message(message);
}

// " (why)" when `why` says something.
std::string Why(const std::string& why) { return why.empty() ? "" : absl::StrCat(": ", why); }

}  // namespace

common::v1::Operation NewApplicationOperation(const std::string& id, const std::string& kind,
                                              const std::string& name,
                                              const std::string& request_id,
                                              const google::protobuf::Timestamp& now) {
  common::v1::Operation op;
  op.set_id(id);
  op.set_kind(kind);
  op.set_resource(absl::StrCat("applications/", name));
  op.set_request_id(request_id);
  Progress(op, 10, "validated");
  *op.mutable_create_time() = now;
  *op.mutable_update_time() = now;
  return op;
}

bool FoldIntoOperation(const v1::Application& app, bool deleted,
                       const google::protobuf::Timestamp& now, common::v1::Operation& op) {
  if (op.done()) return false;
  const common::v1::Operation before = op;
  const v1::ApplicationStatus& status = app.status();
  if (op.kind() == kDeleteOperationKind) {
    if (deleted) {
      op.set_done(true);
      Progress(op, 100, "deleted");
    } else if (status.phase() == v1::APPLICATION_PHASE_DELETING) {
      Progress(op, 50, absl::StrCat("releasing the application's pods", Why(status.error_msg())));
    }
  } else if (deleted) {
    Fail(op, common::v1::ERROR_CODE_ABORTED, "the application was deleted");
  } else {
    switch (status.phase()) {
      case v1::APPLICATION_PHASE_PENDING:
        if (absl::StrContains(status.error_msg(), "waiting for a neighborhood")) {
          Progress(op, 20, status.error_msg());
        } else if (!status.neighborhood_id().empty()) {
          Progress(op, 40, absl::StrCat("neighborhood ", status.neighborhood_id(),
                                        " chosen; placing", Why(status.error_msg())));
        } else {
          Progress(op, 40, absl::StrCat("placing", Why(status.error_msg())));
        }
        break;
      case v1::APPLICATION_PHASE_MIGRATING:
        Progress(op, 40, absl::StrCat("placing again", Why(status.error_msg())));
        break;
      case v1::APPLICATION_PHASE_DEPLOYING:
        Progress(op, 80, "placed; waiting for pods");
        break;
      case v1::APPLICATION_PHASE_RUNNING:
      case v1::APPLICATION_PHASE_DEGRADED:
      case v1::APPLICATION_PHASE_SUCCEEDED:
        op.set_done(true);
        Progress(op, 100,
                 status.phase() == v1::APPLICATION_PHASE_RUNNING ? "running"
                 : status.phase() == v1::APPLICATION_PHASE_SUCCEEDED
                     ? "its jobs succeeded"
                     : absl::StrCat("placed, degraded", Why(status.error_msg())));
        op.mutable_result()->PackFrom(app);
        break;
      case v1::APPLICATION_PHASE_FAILED:
        Fail(op, common::v1::ERROR_CODE_FAILED_PRECONDITION,
             status.error_msg().empty() ? "placement failed" : status.error_msg());
        break;
      default:
        break;
    }
  }
  if (google::protobuf::util::MessageDifferencer::Equals(before, op)) return false;
  *op.mutable_update_time() = now;
  return true;
}

bool SupersedeOperation(const std::string& by, const google::protobuf::Timestamp& now,
                        common::v1::Operation& op) {
  if (op.done()) return false;
  Fail(op, common::v1::ERROR_CODE_ABORTED, absl::StrCat("superseded by ", by));
  *op.mutable_update_time() = now;
  return true;
}

}  // namespace codeco::acm
