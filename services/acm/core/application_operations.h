#pragma once
// The operations ACM answers apply, rollback and delete with, kept in step
// with the application they act on. An operation's progress is read off the
// application's status at each commit, in the same store write, so the
// operation and the application never disagree, also after a restart:
//   apply / rollback: validated (10%) -> waiting for a neighborhood (20%) ->
//     (neighborhood chosen,) placing (40%) -> placed, waiting for pods (80%) ->
//     running (100%, done; result = the Application). DEGRADED is done with
//     the Application as result; FAILED is done with the error.
//   delete: releasing the application's pods (50%) -> deleted (100%, done).
// A newer apply, rollback or delete of the same application ends the one in
// flight as ABORTED ("superseded by <id>").

#include <string>

#include "codeco/acm/v1/application.pb.h"
#include "codeco/common/v1/operation.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace codeco::acm {

/// Kind of the operation ApplyApplication starts.
inline constexpr char kApplyOperationKind[] = "acm.ApplyApplication";
/// Kind of the operation RollbackApplication starts.
inline constexpr char kRollbackOperationKind[] = "acm.RollbackApplication";
/// Kind of the operation DeleteApplication starts.
inline constexpr char kDeleteOperationKind[] = "acm.DeleteApplication";

/// A new operation `id` of `kind` on application `name`, phase "validated".
common::v1::Operation NewApplicationOperation(const std::string& id, const std::string& kind,
                                              const std::string& name,
                                              const std::string& request_id,
                                              const google::protobuf::Timestamp& now);

/// Brings `op` in step with `app` (`deleted`: its record was just removed).
/// Returns false when nothing changed; a done operation never changes.
bool FoldIntoOperation(const v1::Application& app, bool deleted,
                       const google::protobuf::Timestamp& now, common::v1::Operation& op);

/// Ends `op` (when not done yet) as ABORTED, superseded by operation `by`.
/// Returns false when it was done already.
bool SupersedeOperation(const std::string& by, const google::protobuf::Timestamp& now,
                        common::v1::Operation& op);

}  // namespace codeco::acm
