#include "swm/core/state_backups.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/proto_util.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;

std::string KeyOf(const std::string& application, const std::string& workload) {
  return absl::StrCat(application, "/", workload);
}

}  // namespace

StateBackupScheduler::StateBackupScheduler(const Clock& clock, PlanRepository& plans,
                                           StateMover& mover, StateBackupOptions options)
    : clock_(clock), plans_(plans), mover_(mover), options_(options) {}

bool StateBackupScheduler::Follow(pb::StateBackupRecord& record, absl::Time deadline,
                                  StateBackupPass& pass) {
  const std::string key = KeyOf(record.application(), record.workload());
  const pb::StateBackup& pending = record.pending();
  absl::StatusOr<StateBackupProgress> progress =
      mover_.AwaitBackup(pending.source().cluster(), record.pending_operation_id(),
                         std::min(deadline, absl::Now() + options_.await));
  const bool stale =
      clock_.Now() - FromProtoTimestamp(pending.take_time()) >= options_.pending_timeout;
  if (!progress.ok() || !progress->done) {
    if (!stale) return false;  // the next pass asks again
    // Given up: its checkpointer never answered or never finished.
    SetError(absl::DeadlineExceededError(absl::StrCat(
                 "backup operation ", record.pending_operation_id(), " at the checkpointer of ",
                 pending.source().cluster(), " did not finish in ",
                 absl::FormatDuration(options_.pending_timeout),
                 progress.ok() ? "" : absl::StrCat(" (", progress.status().message(), ")"))),
             record.mutable_last_error());
    pass.failed.push_back(absl::StrCat(key, ": ", record.last_error().message()));
    record.clear_pending_operation_id();
    record.clear_pending();
    return true;
  }
  if (!progress->status.ok()) {
    SetError(progress->status, record.mutable_last_error());
    pass.failed.push_back(absl::StrCat(key, ": ", progress->status.message()));
  } else {
    if (record.has_latest()) *record.add_retired() = record.latest();
    pb::StateBackup* latest = record.mutable_latest();
    *latest = pending;
    latest->set_checkpoint_id(progress->checkpoint_id);
    latest->set_image_reference(progress->image_reference);
    latest->set_state_bytes(progress->state_bytes);
    record.clear_last_error();
    pass.completed.push_back(key);
  }
  record.clear_pending_operation_id();
  record.clear_pending();
  return true;
}

bool StateBackupScheduler::DeleteRetired(pb::StateBackupRecord& record, absl::Time deadline,
                                         StateBackupPass& pass) {
  bool changed = false;
  auto* retired = record.mutable_retired();
  for (int i = 0; i < retired->size();) {
    const pb::StateBackup& old = retired->Get(i);
    if (absl::Now() >= deadline) break;
    absl::Status deleted = old.checkpoint_id().empty()
                               ? absl::OkStatus()
                               : mover_.DeleteBackup(old.source().cluster(), old.checkpoint_id(),
                                                     deadline);
    if (!deleted.ok()) {
      ++i;  // its cluster may be away: the next pass tries again
      continue;
    }
    pass.deleted.push_back(absl::StrCat(old.source().cluster(), ":", old.checkpoint_id()));
    retired->DeleteSubrange(i, 1);
    changed = true;
  }
  return changed;
}

StateBackupPass StateBackupScheduler::Run(const std::vector<BackupSubject>& subjects,
                                          absl::Time deadline) {
  StateBackupPass pass;
  absl::StatusOr<std::vector<pb::StateBackupRecord>> stored = plans_.StateBackups();
  absl::StatusOr<std::vector<pb::AssignmentPlan>> live = plans_.LivePlans();
  absl::StatusOr<std::vector<pb::Migration>> migrations = plans_.ActiveMigrations();
  if (!stored.ok() || !live.ok() || !migrations.ok()) {
    const absl::Status& why =
        !stored.ok() ? stored.status() : !live.ok() ? live.status() : migrations.status();
    pass.failed.push_back(absl::StrCat("reading the backup records: ", why.message()));
    return pass;
  }
  std::map<std::string, pb::StateBackupRecord> records;
  for (pb::StateBackupRecord& r : *stored) {
    std::string key = KeyOf(r.application(), r.workload());
    records.emplace(std::move(key), std::move(r));
  }
  std::set<std::string> placed_applications;
  for (const pb::AssignmentPlan& plan : *live) placed_applications.insert(plan.application());
  // A workload being moved is left alone until its new plan is written:
  // its source is fenced by the move, or restored from the backup this
  // would replace. Once CUTTING_OVER (the old pod waits for its cluster to
  // answer) the new pod serves and is backed up.
  std::set<std::string> moving;
  for (const pb::Migration& m : *migrations) {
    if (m.phase() != pb::MIGRATION_PHASE_CUTTING_OVER) {
      moving.insert(KeyOf(m.application(), m.workload()));
    }
  }
  auto save = [&](const pb::StateBackupRecord& record) {
    if (absl::Status saved = plans_.SaveStateBackup(record); !saved.ok()) {
      pass.failed.push_back(absl::StrCat(KeyOf(record.application(), record.workload()),
                                         ": storing its record: ", saved.message()));
    }
  };

  // The workloads attempted longest ago first (never attempted: first of
  // all), so a pass cut short by its deadline leaves the others' turn to
  // the next one.
  std::vector<const BackupSubject*> order;
  std::set<std::string> subject_keys;
  for (const BackupSubject& subject : subjects) {
    order.push_back(&subject);
    subject_keys.insert(KeyOf(subject.application, subject.workload));
  }
  auto last_attempt = [&](const BackupSubject* subject) {
    auto it = records.find(KeyOf(subject->application, subject->workload));
    return it == records.end() || !it->second.has_last_attempt_time()
               ? absl::InfinitePast()
               : FromProtoTimestamp(it->second.last_attempt_time());
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const BackupSubject* a, const BackupSubject* b) {
                     return last_attempt(a) < last_attempt(b);
                   });
  for (const BackupSubject* next : order) {
    const BackupSubject& subject = *next;
    const std::string key = KeyOf(subject.application, subject.workload);
    if (moving.count(key)) continue;
    auto [it, fresh] = records.try_emplace(key);
    pb::StateBackupRecord& record = it->second;
    if (fresh) {
      record.set_application(subject.application);
      record.set_workload(subject.workload);
    }
    bool changed = false;
    if (!record.pending_operation_id().empty()) changed = Follow(record, deadline, pass);
    const absl::Time now = clock_.Now();
    const bool due = record.pending_operation_id().empty() &&
                     (!record.has_last_attempt_time() ||
                      (record.has_latest() && record.latest().source().pod() !=
                                                  subject.placed.pod()) ||
                      now - FromProtoTimestamp(record.last_attempt_time()) >= options_.interval);
    if (due && absl::Now() < deadline) {
      const std::string request_id = absl::StrCat("swm-backup/", key, "/", subject.placed.pod(),
                                                  "/", absl::ToUnixNanos(now));
      absl::StatusOr<std::string> started =
          mover_.StartBackup(StateBackupRequest{.request_id = request_id,
                                                .cluster = subject.placed.cluster(),
                                                .checkpointer = subject.checkpointer,
                                                .node = subject.placed.node(),
                                                .pod = subject.placed.pod()},
                             deadline);
      *record.mutable_last_attempt_time() = ToProtoTimestamp(now);
      if (started.ok()) {
        record.set_pending_operation_id(*started);
        pb::StateBackup* pending = record.mutable_pending();
        *pending->mutable_source() = subject.placed;
        *pending->mutable_take_time() = ToProtoTimestamp(now);
        pass.started.push_back(key);
        // Small states are done at once: this pass records it.
        Follow(record, deadline, pass);
      } else {
        SetError(started.status(), record.mutable_last_error());
        pass.failed.push_back(absl::StrCat(key, ": ", started.status().message()));
      }
      changed = true;
    }
    changed = DeleteRetired(record, deadline, pass) || changed;
    if (changed) save(record);
  }

  // Records of workloads not backed up any more: those of an application
  // no longer placed go, their backups deleted first. (A placed
  // application's workload missing from `subjects` — its placement request
  // unreadable for now, say — keeps its backup.)
  for (auto& [key, record] : records) {
    if (subject_keys.count(key) || placed_applications.count(record.application())) continue;
    bool changed = false;
    if (!record.pending_operation_id().empty()) changed = Follow(record, deadline, pass);
    if (record.pending_operation_id().empty() && record.has_latest()) {
      *record.add_retired() = record.latest();
      record.clear_latest();
      changed = true;
    }
    changed = DeleteRetired(record, deadline, pass) || changed;
    if (record.pending_operation_id().empty() && record.retired().empty()) {
      if (absl::Status gone = plans_.DeleteStateBackup(record.application(), record.workload());
          !gone.ok()) {
        pass.failed.push_back(absl::StrCat(key, ": removing its record: ", gone.message()));
      }
    } else if (changed) {
      save(record);
    }
  }
  return pass;
}

}  // namespace codeco::swm
