#include "swm/server/plan_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
// The index of applications whose newest plan holds pods, and its marker.
constexpr char kLivePrefix[] = "a/";
constexpr char kLiveIndexBuilt[] = "a!";
// Migrations, the index of those not final, and the placement requests.
constexpr char kMigrationPrefix[] = "g/";
constexpr char kActiveMigrationPrefix[] = "gx/";
constexpr char kPlacementRequestPrefix[] = "p/";
// The state backups of stateful workloads.
constexpr char kStateBackupPrefix[] = "b/";

std::string StateBackupKey(const std::string& application, const std::string& workload) {
  return absl::StrCat(kStateBackupPrefix, application, "/", workload);
}

absl::Status Corrupt(std::string_view key) {
  return absl::DataLossError("stored record " + std::string(key) + " does not parse");
}

// The first `Record` stored under `prefix` of `family` (the newest, as the
// keys are laid out), or nullopt.
template <typename Record>
absl::StatusOr<std::optional<Record>> FirstUnder(const KvStore& kv, const char* family,
                                                 const std::string& prefix) {
  std::optional<Record> out;
  absl::Status parse = absl::OkStatus();
  RETURN_IF_ERROR(kv.Scan(family, {.prefix = prefix, .limit = 1},
                          [&](std::string_view key, std::string_view value) {
                            out.emplace();
                            if (!out->ParseFromArray(value.data(), value.size())) {
                              parse = Corrupt(key);
                            }
                            return false;
                          }));
  RETURN_IF_ERROR(parse);
  return out;
}

// Every `Record` stored under `prefix` of `family`, in key order.
template <typename Record>
absl::StatusOr<std::vector<Record>> AllUnder(const KvStore& kv, const char* family,
                                             const std::string& prefix) {
  std::vector<Record> out;
  absl::Status parse = absl::OkStatus();
  RETURN_IF_ERROR(kv.Scan(family, {.prefix = prefix},
                          [&](std::string_view key, std::string_view value) {
                            if (!out.emplace_back().ParseFromArray(value.data(), value.size())) {
                              parse = Corrupt(key);
                              return false;
                            }
                            return true;
                          }));
  RETURN_IF_ERROR(parse);
  return out;
}

// The `Record` stored at `key` of `family`, or nullopt.
template <typename Record>
absl::StatusOr<std::optional<Record>> StoredAt(const KvStore& kv, const char* family,
                                               const std::string& key) {
  absl::StatusOr<std::string> value = kv.Get(family, key);
  if (absl::IsNotFound(value.status())) return std::nullopt;
  if (!value.ok()) return value.status();
  Record record;
  if (!record.ParseFromString(*value)) return Corrupt(key);
  return record;
}

// One page of the `Record`s stored under `prefix` of `family` after
// `page_token` (the last key of the previous page), as the List RPCs define
// it: `keep` filters them (a record left out still moves the token on), at
// most `page_size` (0: the default) go to `items`, and `out` gets the next
// page's token when more follow. INVALID_ARGUMENT naming page_size or
// page_token.
template <typename Record, typename Response>
absl::Status ScanPage(const KvStore& kv, const char* family, const std::string& prefix,
                      const std::string& page_token, int32_t page_size,
                      const std::function<bool(const Record&)>& keep,
                      google::protobuf::RepeatedPtrField<Record>& items, Response& out) {
  if (page_size < 0) return InvalidFieldError("page_size", "must not be negative");
  if (!page_token.empty() && !absl::StartsWith(page_token, prefix)) {
    return InvalidFieldError("page_token", "does not belong to this listing");
  }
  const size_t limit = page_size == 0 ? kDefaultPageSize : std::min(page_size, kMaxPageSize);
  std::string last_key;
  absl::Status parse = absl::OkStatus();
  RETURN_IF_ERROR(kv.Scan(family, {.prefix = prefix, .start_after = page_token},
                          [&](std::string_view key, std::string_view value) {
                            Record record;
                            if (!record.ParseFromArray(value.data(), value.size())) {
                              parse = Corrupt(key);
                              return false;
                            }
                            if (!keep(record)) {
                              last_key = std::string(key);
                              return true;
                            }
                            if (static_cast<size_t>(items.size()) == limit) {
                              out.set_next_page_token(last_key);
                              return false;
                            }
                            *items.Add() = std::move(record);
                            last_key = std::string(key);
                            return true;
                          }));
  return parse;
}

}  // namespace

std::string PlanStore::PlanKey(const std::string& application, int64_t revision) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%020lld",
                static_cast<long long>(std::numeric_limits<int64_t>::max() - revision));
  return absl::StrCat(application, "/", digits);
}

std::string PlanStore::MigrationKey(const std::string& id) {
  const size_t slash = id.rfind('/');
  const std::string application = slash == std::string::npos ? id : id.substr(0, slash);
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%020lld",
                static_cast<long long>(std::numeric_limits<int64_t>::max() - MigrationNumber(id)));
  return absl::StrCat(kMigrationPrefix, application, "/", digits);
}

absl::StatusOr<pb::Migration> PlanStore::GetMigration(const std::string& id) const {
  const std::string key = MigrationKey(id);
  ASSIGN_OR_RETURN(std::optional<pb::Migration> migration,
                   StoredAt<pb::Migration>(kv_, kOperationsFamily, key));
  if (!migration.has_value()) return absl::NotFoundError("no migration " + id);
  if (migration->id() != id) return Corrupt(key);
  return *migration;
}

absl::StatusOr<std::optional<pb::Migration>> PlanStore::NewestMigration(
    const std::string& application) const {
  return FirstUnder<pb::Migration>(kv_, kOperationsFamily,
                                   absl::StrCat(kMigrationPrefix, application, "/"));
}

absl::StatusOr<std::vector<pb::Migration>> PlanStore::ActiveMigrations() const {
  std::vector<std::string> ids;
  RETURN_IF_ERROR(kv_.Scan(kOperationsFamily, {.prefix = kActiveMigrationPrefix},
                           [&](std::string_view key, std::string_view) {
                             ids.emplace_back(key.substr(sizeof(kActiveMigrationPrefix) - 1));
                             return true;
                           }));
  std::vector<pb::Migration> out;
  for (const std::string& id : ids) {
    ASSIGN_OR_RETURN(pb::Migration m, GetMigration(id));
    if (!IsFinal(m.phase())) out.push_back(std::move(m));
  }
  return out;
}

absl::Status PlanStore::SaveMigration(const pb::Migration& migration,
                                      const pb::AssignmentPlan* plan,
                                      const codeco::common::v1::Operation& operation,
                                      const std::string& request_id) {
  KvWriteBatch batch;
  batch.Put(kOperationsFamily, MigrationKey(migration.id()), migration.SerializeAsString());
  if (IsFinal(migration.phase())) {
    batch.Delete(kOperationsFamily, kActiveMigrationPrefix + migration.id());
  } else {
    batch.Put(kOperationsFamily, kActiveMigrationPrefix + migration.id(), "");
  }
  AddSave(plan, operation, request_id, batch);
  RETURN_IF_ERROR(kv_.Write(batch));
  if (on_save_) on_save_();
  return absl::OkStatus();
}

absl::StatusOr<pb::ListMigrationsResponse> PlanStore::ListMigrations(
    const pb::ListMigrationsRequest& request) const {
  pb::ListMigrationsResponse out;
  RETURN_IF_ERROR(ScanPage<pb::Migration>(
      kv_, kOperationsFamily,
      absl::StrCat(kMigrationPrefix,
                   request.application().empty() ? "" : request.application() + "/"),
      request.page_token(), request.page_size(),
      [&](const pb::Migration& m) {
        return request.phase() == pb::MIGRATION_PHASE_UNSPECIFIED || m.phase() == request.phase();
      },
      *out.mutable_migrations(), out));
  return out;
}

absl::Status PlanStore::SavePlacementRequest(const std::string& application,
                                             const pb::PlaceApplicationRequest& request) {
  return kv_.Put(kOperationsFamily, kPlacementRequestPrefix + application,
                 request.SerializeAsString());
}

absl::StatusOr<std::optional<pb::PlaceApplicationRequest>> PlanStore::PlacementRequest(
    const std::string& application) const {
  return StoredAt<pb::PlaceApplicationRequest>(kv_, kOperationsFamily,
                                               kPlacementRequestPrefix + application);
}

absl::StatusOr<std::optional<pb::AssignmentPlan>> PlanStore::Latest(
    const std::string& application) const {
  return FirstUnder<pb::AssignmentPlan>(kv_, kPlansFamily, application + "/");
}

absl::Status PlanStore::BuildLiveIndex() const {
  KvWriteBatch batch;
  std::set<std::string> seen;
  absl::Status parse = absl::OkStatus();
  // Within an application the newest revision comes first (see PlanKey).
  RETURN_IF_ERROR(kv_.Scan(kPlansFamily, {}, [&](std::string_view key, std::string_view value) {
    pb::AssignmentPlan plan;
    if (!plan.ParseFromArray(value.data(), value.size())) {
      parse = Corrupt(key);
      return false;
    }
    if (seen.insert(plan.application()).second && HoldsPods(plan)) {
      batch.Put(kOperationsFamily, kLivePrefix + plan.application(), "");
    }
    return true;
  }));
  RETURN_IF_ERROR(parse);
  batch.Put(kOperationsFamily, kLiveIndexBuilt, "");
  return kv_.Write(batch);
}

absl::StatusOr<std::vector<pb::AssignmentPlan>> PlanStore::LivePlans() const {
  absl::StatusOr<std::string> built = kv_.Get(kOperationsFamily, kLiveIndexBuilt);
  if (absl::IsNotFound(built.status())) {
    RETURN_IF_ERROR(BuildLiveIndex());
  } else if (!built.ok()) {
    return built.status();
  }
  std::vector<std::string> applications;
  RETURN_IF_ERROR(kv_.Scan(kOperationsFamily, {.prefix = kLivePrefix},
                           [&](std::string_view key, std::string_view) {
                             applications.emplace_back(key.substr(std::strlen(kLivePrefix)));
                             return true;
                           }));
  std::vector<pb::AssignmentPlan> out;
  for (const std::string& application : applications) {
    ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, Latest(application));
    // An entry a concurrent Save has just made stale is skipped.
    if (latest.has_value() && HoldsPods(*latest)) out.push_back(*std::move(latest));
  }
  return out;
}

absl::StatusOr<pb::AssignmentPlan> PlanStore::Get(const std::string& application,
                                                  int64_t revision) const {
  if (revision == 0) {
    ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, Latest(application));
    if (!latest) return absl::NotFoundError("no plan for application " + application);
    return *latest;
  }
  std::string key = PlanKey(application, revision);
  absl::StatusOr<std::string> value = kv_.Get(kPlansFamily, key);
  if (absl::IsNotFound(value.status())) {
    return absl::NotFoundError(absl::StrCat("no plan ", application, "/", revision));
  }
  if (!value.ok()) return value.status();
  pb::AssignmentPlan plan;
  if (!plan.ParseFromString(*value)) return Corrupt(key);
  return plan;
}

absl::StatusOr<pb::ListAssignmentPlansResponse> PlanStore::List(
    const pb::ListAssignmentPlansRequest& request) const {
  pb::ListAssignmentPlansResponse out;
  RETURN_IF_ERROR(ScanPage<pb::AssignmentPlan>(
      kv_, kPlansFamily, request.application().empty() ? "" : request.application() + "/",
      request.page_token(), request.page_size(),
      [&](const pb::AssignmentPlan& plan) {
        return request.phase() == pb::PLAN_PHASE_UNSPECIFIED || plan.phase() == request.phase();
      },
      *out.mutable_plans(), out));
  return out;
}

absl::StatusOr<std::optional<codeco::common::v1::Operation>> PlanStore::OperationForRequest(
    const std::string& request_id) const {
  absl::StatusOr<std::string> id = kv_.Get(kOperationsFamily, "r/" + request_id);
  if (absl::IsNotFound(id.status())) return std::nullopt;
  if (!id.ok()) return id.status();
  ASSIGN_OR_RETURN(codeco::common::v1::Operation op, GetOperation(*id));
  return op;
}

absl::StatusOr<codeco::common::v1::Operation> PlanStore::GetOperation(const std::string& id) const {
  ASSIGN_OR_RETURN(std::optional<codeco::common::v1::Operation> op,
                   StoredAt<codeco::common::v1::Operation>(kv_, kOperationsFamily, "o/" + id));
  if (!op.has_value()) return absl::NotFoundError("no operation " + id);
  return *op;
}

absl::Status PlanStore::Save(const pb::AssignmentPlan* plan,
                             const codeco::common::v1::Operation& operation,
                             const std::string& request_id) {
  KvWriteBatch batch;
  AddSave(plan, operation, request_id, batch);
  RETURN_IF_ERROR(kv_.Write(batch));
  if (on_save_) on_save_();
  return absl::OkStatus();
}

void PlanStore::AddSave(const pb::AssignmentPlan* plan,
                        const codeco::common::v1::Operation& operation,
                        const std::string& request_id, KvWriteBatch& batch) {
  if (plan != nullptr) {
    batch.Put(kPlansFamily, PlanKey(plan->application(), plan->plan_revision()),
              plan->SerializeAsString());
    if (HoldsPods(*plan)) {
      batch.Put(kOperationsFamily, kLivePrefix + plan->application(), "");
    } else {
      batch.Delete(kOperationsFamily, kLivePrefix + plan->application());
    }
  }
  batch.Put(kOperationsFamily, "o/" + operation.id(), operation.SerializeAsString());
  if (!request_id.empty()) batch.Put(kOperationsFamily, "r/" + request_id, operation.id());
}

absl::StatusOr<std::vector<codeco::common::v1::Operation>> PlanStore::Operations() const {
  return AllUnder<codeco::common::v1::Operation>(kv_, kOperationsFamily, "o/");
}

absl::StatusOr<pb::ListOperationsResponse> PlanStore::ListOperations(
    const pb::ListOperationsRequest& request) const {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  ASSIGN_OR_RETURN(std::vector<codeco::common::v1::Operation> all, Operations());
  std::vector<codeco::common::v1::Operation> ops;
  for (auto& op : all) {
    if (!request.kind().empty() && op.kind() != request.kind()) continue;
    if (!request.resource().empty() && op.resource() != request.resource()) continue;
    if (request.active_only() && op.done()) continue;
    ops.push_back(std::move(op));
  }
  // Newest first; the id breaks ties, so pages are stable.
  auto order = [](const codeco::common::v1::Operation& op) {
    return std::make_tuple(op.create_time().seconds(), op.create_time().nanos(), op.id());
  };
  std::sort(ops.begin(), ops.end(),
            [&](const auto& a, const auto& b) { return order(a) > order(b); });
  // The token is the sort key of the page's last operation
  // ("<seconds>:<nanos>:<id>"), so the next page starts after it even when
  // that operation no longer matches the filter.
  size_t start = 0;
  if (!request.page_token().empty()) {
    std::vector<std::string> parts = absl::StrSplit(request.page_token(), absl::MaxSplits(':', 2));
    int64_t seconds = 0;
    int32_t nanos = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &seconds) ||
        !absl::SimpleAtoi(parts[1], &nanos)) {
      return InvalidFieldError("page_token", "not a token this listing issued");
    }
    const auto after = std::make_tuple(seconds, nanos, parts[2]);
    while (start < ops.size() && !(order(ops[start]) < after)) ++start;
  }
  const size_t limit =
      request.page_size() == 0 ? kDefaultPageSize : std::min(request.page_size(), kMaxPageSize);
  pb::ListOperationsResponse out;
  for (size_t i = start; i < ops.size(); ++i) {
    if (static_cast<size_t>(out.operations_size()) == limit) {
      const auto& last = out.operations(out.operations_size() - 1);
      out.set_next_page_token(absl::StrCat(last.create_time().seconds(), ":",
                                           last.create_time().nanos(), ":", last.id()));
      break;
    }
    *out.add_operations() = std::move(ops[i]);
  }
  return out;
}

absl::Status PlanStore::SaveLmsEndpoint(const std::string& cluster, const std::string& lms) {
  return kv_.Put(kOperationsFamily, "l/" + cluster, lms);
}

absl::StatusOr<std::optional<std::string>> PlanStore::LmsEndpoint(
    const std::string& cluster) const {
  return Remembered("l/" + cluster);
}

absl::StatusOr<std::vector<std::string>> PlanStore::LmsClusters() const {
  std::vector<std::string> out;
  RETURN_IF_ERROR(kv_.Scan(kOperationsFamily, {.prefix = "l/"},
                           [&](std::string_view key, std::string_view) {
                             out.emplace_back(key.substr(2));
                             return true;
                           }));
  return out;
}

absl::Status PlanStore::SaveSwmEndpoint(const std::string& cluster, const std::string& swm) {
  return kv_.Put(kOperationsFamily, "m/" + cluster, swm);
}

absl::StatusOr<std::optional<std::string>> PlanStore::SwmEndpoint(
    const std::string& cluster) const {
  return Remembered("m/" + cluster);
}

absl::Status PlanStore::SaveCheckpointerEndpoint(const std::string& cluster,
                                                 const std::string& checkpointer) {
  return kv_.Put(kOperationsFamily, "k/" + cluster, checkpointer);
}

absl::StatusOr<std::optional<std::string>> PlanStore::CheckpointerEndpoint(
    const std::string& cluster) const {
  return Remembered("k/" + cluster);
}

absl::StatusOr<std::vector<pb::StateBackupRecord>> PlanStore::StateBackups() const {
  return AllUnder<pb::StateBackupRecord>(kv_, kOperationsFamily, kStateBackupPrefix);
}

absl::StatusOr<pb::ListStateBackupsResponse> PlanStore::ListStateBackups(
    const pb::ListStateBackupsRequest& request) const {
  pb::ListStateBackupsResponse out;
  RETURN_IF_ERROR(ScanPage<pb::StateBackupRecord>(
      kv_, kOperationsFamily,
      absl::StrCat(kStateBackupPrefix,
                   request.application().empty() ? "" : request.application() + "/"),
      request.page_token(), request.page_size(),
      [](const pb::StateBackupRecord&) { return true; }, *out.mutable_backups(), out));
  return out;
}

absl::StatusOr<std::optional<pb::StateBackupRecord>> PlanStore::StateBackupOf(
    const std::string& application, const std::string& workload) const {
  return StoredAt<pb::StateBackupRecord>(kv_, kOperationsFamily,
                                         StateBackupKey(application, workload));
}

absl::Status PlanStore::SaveStateBackup(const pb::StateBackupRecord& record) {
  return kv_.Put(kOperationsFamily, StateBackupKey(record.application(), record.workload()),
                 record.SerializeAsString());
}

absl::Status PlanStore::DeleteStateBackup(const std::string& application,
                                          const std::string& workload) {
  return kv_.Delete(kOperationsFamily, StateBackupKey(application, workload));
}

absl::StatusOr<std::optional<std::string>> PlanStore::Remembered(const std::string& key) const {
  absl::StatusOr<std::string> value = kv_.Get(kOperationsFamily, key);
  if (absl::IsNotFound(value.status())) return std::nullopt;
  if (!value.ok()) return value.status();
  return *value;
}

}  // namespace codeco::swm
