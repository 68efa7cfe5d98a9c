#include "acm/core/application_manager.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "acm/core/application_operations.h"
#include "acm/core/codeco_app_merge.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"

namespace codeco::acm {
namespace {

// The status entry of job `service` of `app`, added when missing.
v1::JobStatus& JobEntry(v1::ApplicationStatus& status, const std::string& service) {
  for (v1::JobStatus& j : *status.mutable_jobs()) {
    if (j.service() == service) return j;
  }
  v1::JobStatus& j = *status.add_jobs();
  j.set_service(service);
  return j;
}

// The status entry of job `service`, or null.
const v1::JobStatus* FindJob(const v1::ApplicationStatus& status, const std::string& service) {
  for (const v1::JobStatus& j : status.jobs()) {
    if (j.service() == service) return &j;
  }
  return nullptr;
}

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& names,
              const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Adds `name` to `names` unless it is there.
void AddOnce(google::protobuf::RepeatedPtrField<std::string>& names, const std::string& name) {
  if (!Contains(names, name)) *names.Add() = name;
}

}  // namespace

void NoteFailedJobPod(v1::Application& app, const std::string& service, const std::string& pod) {
  for (const v1::ServiceSpec& s : app.spec().services()) {
    if (s.name() != service || !s.has_job()) continue;
    AddOnce(*JobEntry(*app.mutable_status(), service).mutable_failed_pods(), pod);
  }
}

std::vector<JobSlot> JobPodsToReplace(const v1::Application& app) {
  std::vector<JobSlot> out;
  const v1::ApplicationStatus& status = app.status();
  for (const v1::ServiceSpec& s : app.spec().services()) {
    if (!s.has_job()) continue;
    const v1::JobStatus* job = FindJob(status, s.name());
    const int failed = job == nullptr ? 0 : job->failed_pods_size();
    if (failed > s.job().backoff_limit()) continue;  // the job failed
    int active = 0;
    std::vector<const v1::ServicePlacement*> ended;
    for (const v1::ServicePlacement& p : status.placements()) {
      if (p.service() != s.name()) continue;
      if (p.succeeded() || (job != nullptr && Contains(job->failed_pods(), p.pod()))) {
        ended.push_back(&p);
      } else {
        ++active;
      }
    }
    int missing =
        s.job().completions() - (job == nullptr ? 0 : job->succeeded_pods_size()) - active;
    for (const v1::ServicePlacement* p : ended) {
      if (missing <= 0) break;
      if (p->workload().empty()) continue;  // placed before placements named their slot
      out.push_back({p->workload(), p->pod()});
      --missing;
    }
  }
  return out;
}

void FoldJobs(v1::Application& app) {
  v1::ApplicationStatus& status = *app.mutable_status();
  google::protobuf::RepeatedPtrField<v1::JobStatus> jobs;
  for (const v1::ServiceSpec& s : app.spec().services()) {
    if (!s.has_job()) continue;
    v1::JobStatus& j = *jobs.Add();
    j = JobEntry(status, s.name());
    j.set_completions(s.job().completions());
    for (const v1::ServicePlacement& p : status.placements()) {
      if (p.service() == s.name() && p.succeeded()) AddOnce(*j.mutable_succeeded_pods(), p.pod());
    }
  }
  status.mutable_jobs()->Swap(&jobs);
}

namespace {

// How a DEGRADED application's error_msg starts when a scale left replicas
// with no node: Reconcile places it again after `unplaced_retry`.
constexpr absl::string_view kUnplacedReplicas = "replicas not placed, found no node";

using google::protobuf::util::MessageDifferencer;

// Deterministic bytes of `message` with its request_id cleared: equal
// requests give equal fingerprints.
template <typename Request>
std::string Fingerprint(Request request) {
  request.clear_request_id();
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  return out;
}

absl::Status CheckExpectedRevision(int64_t expected, const std::optional<v1::Application>& app,
                                   const std::string& field) {
  if (expected == 0) return absl::OkStatus();
  int64_t actual = app ? app->metadata().revision() : 0;
  if (actual != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": the application is at revision ", actual, ", not ", expected));
  }
  return absl::OkStatus();
}

bool LabelsEqual(const google::protobuf::Map<std::string, std::string>& a,
                 const google::protobuf::Map<std::string, std::string>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second != v) return false;
  }
  return true;
}

// An apply of `rev`'s spec as submitted (before the admission policies
// changed it), with `app`'s labels: what a rollback or a re-admission sends
// through the policies in force.
v1::ApplyApplicationRequest Resubmission(const v1::Application& app,
                                         const v1::ApplicationRevision& rev) {
  v1::ApplyApplicationRequest apply;
  *apply.mutable_spec() = rev.has_submitted_spec() ? rev.submitted_spec() : rev.spec();
  *apply.mutable_labels() = app.metadata().labels();
  return apply;
}

}  // namespace

bool MatchesLabels(const common::v1::LabelSelector& selector,
                   const google::protobuf::Map<std::string, std::string>& labels) {
  for (const auto& [k, v] : selector.match_labels()) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& req : selector.match_expressions()) {
    auto it = labels.find(req.key());
    bool has = it != labels.end();
    bool in = has &&
              std::find(req.values().begin(), req.values().end(), it->second) != req.values().end();
    switch (req.op()) {
      case common::v1::LABEL_SELECTOR_OPERATOR_IN:
        if (!in) return false;
        break;
      case common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN:
        if (in) return false;
        break;
      case common::v1::LABEL_SELECTOR_OPERATOR_EXISTS:
        if (!has) return false;
        break;
      case common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST:
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

ApplicationManager::ApplicationManager(ApplicationStore& store, PlacementScheduler& scheduler,
                                       Clock& clock, ApplicationManagerOptions options,
                                       NeighborhoodProvider* neighborhoods,
                                       const AdmissionChain* admission)
    : store_(store),
      scheduler_(scheduler),
      clock_(clock),
      neighborhoods_(neighborhoods),
      admission_(admission),
      options_(std::move(options)),
      backoff_(options_.placement_retry, options_.retry_seed),
      unplaced_backoff_(options_.unplaced_retry, options_.retry_seed) {}

google::protobuf::Timestamp ApplicationManager::NowProto() const {
  return ToProtoTimestamp(clock_.Now());
}

int ApplicationManager::PageSize(int requested) const {
  if (requested <= 0) return options_.default_page_size;
  return std::min(requested, options_.max_page_size);
}

absl::StatusOr<std::optional<std::string>> ApplicationManager::CheckRequest(
    const std::string& key, const std::string& fingerprint) const {
  ASSIGN_OR_RETURN(std::optional<StoredRequest> stored, store_.GetRequest(key));
  if (!stored) return std::optional<std::string>();
  if (stored->fingerprint != fingerprint) {
    return InvalidFieldError("request_id", "already used for a different request");
  }
  return std::optional<std::string>(stored->response);
}

absl::Status ApplicationManager::CommitNext(ApplicationCommit& commit) {
  ASSIGN_OR_RETURN(int64_t last, store_.LastRevision());
  commit.revision = last + 1;
  commit.time = clock_.Now();
  RETURN_IF_ERROR(FoldOperationLocked(commit));
  return store_.Commit(commit);
}

absl::Status ApplicationManager::FoldOperationLocked(ApplicationCommit& commit) {
  const v1::Application& app = commit.put ? *commit.put : commit.event.application();
  const std::string& id = app.status().operation_id();
  if (id.empty()) return absl::OkStatus();
  auto it = std::find_if(commit.operations.begin(), commit.operations.end(),
                         [&](const common::v1::Operation& op) { return op.id() == id; });
  if (it != commit.operations.end()) {
    FoldIntoOperation(app, commit.erase.has_value(), NowProto(), *it);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::optional<common::v1::Operation> stored, store_.GetOperation(id));
  if (!stored) return absl::OkStatus();
  if (FoldIntoOperation(app, commit.erase.has_value(), NowProto(), *stored)) {
    commit.operations.push_back(*std::move(stored));
  }
  return absl::OkStatus();
}

absl::Status ApplicationManager::SupersedeLocked(const std::string& id, const std::string& by,
                                                 ApplicationCommit& commit) {
  if (id.empty() || id == by) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<common::v1::Operation> stored, store_.GetOperation(id));
  if (stored && SupersedeOperation(by, NowProto(), *stored)) {
    commit.operations.push_back(*std::move(stored));
  }
  return absl::OkStatus();
}

absl::Status ApplicationManager::CommitModified(v1::Application& app) {
  ASSIGN_OR_RETURN(int64_t last, store_.LastRevision());
  app.mutable_metadata()->set_revision(last + 1);
  *app.mutable_metadata()->mutable_update_time() = NowProto();
  ApplicationCommit commit;
  commit.put = app;
  commit.event.set_type(common::v1::WATCH_EVENT_TYPE_MODIFIED);
  *commit.event.mutable_application() = app;
  return CommitNext(commit);
}

std::optional<absl::Time> HeldUntil(const v1::ApplicationSpec& spec, absl::Time now) {
  if (!spec.intents().has_earliest_start_time()) return std::nullopt;
  const absl::Time start = FromProtoTimestamp(spec.intents().earliest_start_time());
  if (start <= now) return std::nullopt;
  return start;
}

void ApplicationManager::MarkSentLocked(const std::string& name) {
  Attempt& attempt = attempts_[name];
  attempt.due = clock_.Now() + options_.answer_timeout;
  attempt.backing_off = false;
}

absl::Time ApplicationManager::ScheduleRetryLocked(const std::string& name) {
  Attempt& attempt = attempts_[name];
  ++attempt.failures;
  attempt.due = clock_.Now() + backoff_.Delay(attempt.failures);
  attempt.backing_off = true;
  return attempt.due;
}

int ApplicationManager::RetryNow() {
  absl::MutexLock lock(&write_mu_);
  const absl::Time now = clock_.Now();
  int brought_forward = 0;
  for (auto& [name, attempt] : attempts_) {
    if (attempt.backing_off && attempt.due > now) {
      attempt.due = now;
      ++brought_forward;
    }
  }
  return brought_forward;
}

v1::Application ApplicationManager::ForScheduler(const v1::Application& app) {
  v1::Application out = app;
  *out.mutable_spec() = SchedulableSpec(app.spec());
  return out;
}

void ApplicationManager::SendPlacement(const v1::Application& app,
                                       const v1::Neighborhood& neighborhood) {
  {
    absl::MutexLock lock(&write_mu_);
    MarkSentLocked(app.metadata().name());
  }
  absl::Status asked =
      scheduler_.RequestPlacement(ForScheduler(app), neighborhood, PlacementRequestId(app));
  if (asked.ok()) return;
  // Refused (e.g. shutting down): recorded as a transient error, so a later
  // Reconcile asks again.
  PlacementResult refused;
  refused.error =
      IsTransientSchedulerError(asked) ? asked : absl::UnavailableError(asked.message());
  RecordPlacement(app.metadata().name(), app.spec_revision(), refused).IgnoreError();
}

void ApplicationManager::Notify() { listeners_.Notify(notify_hook_for_test_); }

int ApplicationManager::AddListener(std::function<void()> listener) {
  return listeners_.Add(std::move(listener));
}

void ApplicationManager::RemoveListener(int id) { listeners_.Remove(id); }

void ApplicationManager::SetNotifyHookForTest(std::function<void()> hook) {
  notify_hook_for_test_ = std::move(hook);
}

absl::StatusOr<v1::ApplyApplicationResponse> ApplicationManager::Apply(
    const v1::ApplyApplicationRequest& request) {
  std::string key;
  std::string fingerprint;
  if (!request.request_id().empty() && !request.dry_run()) {
    key = "apply/" + request.request_id();
    fingerprint = Fingerprint(request);
    ASSIGN_OR_RETURN(std::optional<std::string> stored, CheckRequest(key, fingerprint));
    if (stored) {
      v1::ApplyApplicationResponse response;
      if (!response.ParseFromString(*stored)) return absl::DataLossError("stored response");
      return response;
    }
  }
  absl::StatusOr<v1::ApplyApplicationResponse> response;
  {
    absl::MutexLock lock(&write_mu_);
    // A concurrent twin may have committed while we were unlocked.
    if (!key.empty()) {
      ASSIGN_OR_RETURN(std::optional<std::string> stored, CheckRequest(key, fingerprint));
      if (stored) {
        v1::ApplyApplicationResponse again;
        if (!again.ParseFromString(*stored)) return absl::DataLossError("stored response");
        return again;
      }
    }
    response = ApplyLocked(
        request, "apply",
        RequestRecord{key, fingerprint,
                      [](const v1::ApplyApplicationResponse& r) { return r.SerializeAsString(); }});
  }
  if (response.ok() && !request.dry_run()) Notify();
  return response;
}

absl::StatusOr<v1::ApplyApplicationResponse> ApplicationManager::ApplyLocked(
    const v1::ApplyApplicationRequest& request, const std::string& change_cause,
    const RequestRecord& record, const std::string& spec_yaml) {
  v1::ApplyApplicationResponse response;
  v1::ApplicationSpec spec;
  google::protobuf::Map<std::string, std::string> labels;
  std::string cam_yaml;
  switch (request.source_case()) {
    case v1::ApplyApplicationRequest::kCamYaml: {
      ASSIGN_OR_RETURN(ParsedCam cam, ParseCam(request.cam_yaml(), options_.cam_limits));
      for (auto& w : cam.warnings) response.add_warnings(w);
      // One application per appName: this CodecoApp's services join (or
      // replace their earlier selves in) those its sibling CodecoApps declared.
      ASSIGN_OR_RETURN(std::optional<v1::Application> stored, store_.Get(cam.spec.app_name()));
      const bool deleting =
          stored && stored->status().phase() == v1::APPLICATION_PHASE_DELETING;
      ASSIGN_OR_RETURN(MergedSpec merged,
                       MergeCodecoApp(stored && !deleting ? &stored->spec() : nullptr, cam));
      RETURN_IF_ERROR(ValidateApplicationSpec(merged.spec, options_.cam_limits));
      for (auto& w : merged.warnings) response.add_warnings(w);
      const bool siblings =
          stored && !deleting &&
          std::any_of(stored->spec().services().begin(), stored->spec().services().end(),
                      [&](const v1::ServiceSpec& s) {
                        return OwnerOf(s, cam.spec.app_name()) != cam.codeco_app;
                      });
      // With sibling CodecoApps, labels add up (the last one applied wins a
      // key); a lone CodecoApp's labels replace the application's.
      if (siblings) labels = stored->metadata().labels();
      for (auto& [k, v] : cam.labels) labels[k] = v;
      spec = std::move(merged.spec);
      cam_yaml = request.cam_yaml();
      break;
    }
    case v1::ApplyApplicationRequest::kSpec:
      RETURN_IF_ERROR(ValidateApplicationSpec(request.spec(), options_.cam_limits));
      spec = request.spec();
      labels = request.labels();
      cam_yaml = spec_yaml;
      break;
    default:
      return InvalidFieldError("source", "either cam_yaml or spec is required");
  }
  for (const auto& [k, v] : labels) {
    if (k.empty() || k.size() > 253) return InvalidFieldError("labels", "keys must be 1-253 bytes");
  }
  // The admission policies refuse the spec or change it; a change is kept
  // with the revision and told back.
  std::string admission_patch, bundle_version;
  std::optional<v1::ApplicationSpec> submitted;
  if (admission_ != nullptr) {
    ASSIGN_OR_RETURN(AdmissionOutcome admitted, admission_->Admit(spec, labels));
    if (!admitted.json_patch.empty()) submitted = spec;
    spec = std::move(admitted.spec);
    admission_patch = std::move(admitted.json_patch);
    bundle_version = std::move(admitted.bundle_version);
    for (auto& w : admitted.warnings) response.add_warnings(std::move(w));
  }

  const std::string& name = spec.app_name();
  const std::optional<absl::Time> held = HeldUntil(spec, clock_.Now());
  ASSIGN_OR_RETURN(std::optional<v1::Application> current, store_.Get(name));
  RETURN_IF_ERROR(CheckExpectedRevision(request.expected_revision(), current, "expected_revision"));
  ASSIGN_OR_RETURN(int64_t last, store_.LastRevision());
  const int64_t revision = last + 1;

  v1::Application app;
  bool spec_changed = true;
  if (current && current->status().phase() == v1::APPLICATION_PHASE_DELETING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "application \"", name, "\" is being deleted; apply it again once it is gone"));
  }
  if (current) {
    app = *current;
    spec_changed = !MessageDifferencer::Equals(current->spec(), spec);
    if (!spec_changed && LabelsEqual(current->metadata().labels(), labels)) {
      *response.mutable_application() = *current;
      return response;  // nothing to change
    }
  } else {
    response.set_created(true);
    app.mutable_metadata()->set_name(name);
    app.mutable_metadata()->set_uid(absl::StrCat(name, "-", revision));
    *app.mutable_metadata()->mutable_create_time() = NowProto();
  }
  *app.mutable_metadata()->mutable_labels() = labels;
  app.mutable_metadata()->set_revision(revision);
  *app.mutable_metadata()->mutable_update_time() = NowProto();

  ApplicationCommit commit;
  std::optional<v1::Neighborhood> neighborhood;
  if (spec_changed) {
    *app.mutable_spec() = spec;
    app.set_cam_yaml(cam_yaml);
    app.set_spec_revision(app.spec_revision() + 1);
    v1::ApplicationStatus& status = *app.mutable_status();
    status.set_phase(v1::APPLICATION_PHASE_PENDING);
    status.set_status(v1::STATUS_LEVEL_UNSPECIFIED);
    status.set_error_msg("");
    status.clear_neighborhood_id();
    if (held) {
      status.set_error_msg(absl::StrCat(
          "waiting for its start time ",
          absl::FormatTime(absl::RFC3339_sec, *held, absl::UTCTimeZone()),
          " (spec.intents.earliestStartTime)"));
    }
    if (neighborhoods_ != nullptr && !request.dry_run()) {
      absl::StatusOr<v1::Neighborhood> assigned = neighborhoods_->Assign(spec);
      if (assigned.ok()) {
        status.set_neighborhood_id(assigned->id());
        neighborhood = *std::move(assigned);
      } else {
        // Stays PENDING, honestly saying why; a later apply or cluster join retries.
        status.set_error_msg(
            absl::StrCat("waiting for a neighborhood: ", assigned.status().message()));
        response.add_warnings(status.error_msg());
      }
    }
    v1::ApplicationRevision rev;
    rev.set_spec_revision(app.spec_revision());
    *rev.mutable_spec() = spec;
    rev.set_cam_yaml(cam_yaml);
    *rev.mutable_create_time() = NowProto();
    rev.set_request_id(request.request_id());
    rev.set_change_cause(change_cause);
    rev.set_admission_patch(admission_patch);
    rev.set_policy_bundle_version(bundle_version);
    if (submitted) *rev.mutable_submitted_spec() = std::move(*submitted);
    commit.spec_revision = std::move(rev);
    if (!request.dry_run()) {
      const bool rollback = absl::StartsWith(change_cause, "rollback");
      const std::string op_id = absl::StrCat(rollback ? "rollback-" : "apply-", name, "-", revision);
      if (current) RETURN_IF_ERROR(SupersedeLocked(current->status().operation_id(), op_id, commit));
      status.set_operation_id(op_id);
      commit.operations.push_back(NewApplicationOperation(
          op_id, rollback ? kRollbackOperationKind : kApplyOperationKind, name,
          request.request_id(), NowProto()));
    }
  }
  *response.mutable_application() = app;
  if (request.dry_run()) return response;

  commit.put = app;
  commit.event.set_type(current ? common::v1::WATCH_EVENT_TYPE_MODIFIED
                                : common::v1::WATCH_EVENT_TYPE_ADDED);
  *commit.event.mutable_application() = app;
  if (spec_changed) {
    // The operation as it stands after this commit, in the answer (and its replay).
    RETURN_IF_ERROR(FoldOperationLocked(commit));
    for (const auto& op : commit.operations) {
      if (op.id() == app.status().operation_id()) *response.mutable_operation() = op;
    }
  }
  if (!record.key.empty()) {
    commit.request = {record.key, StoredRequest{record.fingerprint, record.encode(response)}};
  }
  RETURN_IF_ERROR(CommitNext(commit));
  if (spec_changed && !held && (neighborhoods_ == nullptr || neighborhood)) {
    // The intent is stored with the commit above; this is only the first try.
    MarkSentLocked(name);
    absl::Status asked = scheduler_.RequestPlacement(
        ForScheduler(app), neighborhood.value_or(v1::Neighborhood()), PlacementRequestId(app));
    if (!asked.ok()) {
      absl::Time next = ScheduleRetryLocked(name);
      response.add_warnings(
          absl::StrCat("scheduler not reached (", asked.ToString(), "); placement retried at ",
                       absl::FormatTime(absl::RFC3339_sec, next, absl::UTCTimeZone())));
    }
  } else if (spec_changed) {
    attempts_.erase(name);
  }
  return response;
}

absl::StatusOr<v1::GetApplicationResponse> ApplicationManager::Get(
    const v1::GetApplicationRequest& request) const {
  if (request.name().empty()) return InvalidFieldError("name", "required");
  if (request.spec_revision() < 0)
    return InvalidFieldError("spec_revision", "must not be negative");
  ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(request.name()));
  if (!app) return absl::NotFoundError(absl::StrCat("application \"", request.name(), "\""));
  v1::GetApplicationResponse response;
  if (request.spec_revision() != 0 && request.spec_revision() != app->spec_revision()) {
    absl::StatusOr<v1::ApplicationRevision> rev =
        store_.GetSpecRevision(request.name(), request.spec_revision());
    if (absl::IsNotFound(rev.status())) {
      return absl::NotFoundError(absl::StrCat("spec_revision: application \"", request.name(),
                                              "\" has no spec revision ", request.spec_revision()));
    }
    RETURN_IF_ERROR(rev.status());
    *app->mutable_spec() = rev->spec();
    app->set_cam_yaml(rev->cam_yaml());
    app->set_spec_revision(rev->spec_revision());
  }
  *response.mutable_application() = std::move(*app);
  return response;
}

absl::StatusOr<v1::ListApplicationsResponse> ApplicationManager::List(
    const v1::ListApplicationsRequest& request) const {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  const size_t page = PageSize(request.page_size());
  v1::ListApplicationsResponse response;
  bool more = false;
  RETURN_IF_ERROR(store_.List(request.page_token(), [&](const v1::Application& app) {
    if (request.phase() != v1::APPLICATION_PHASE_UNSPECIFIED &&
        app.status().phase() != request.phase()) {
      return true;
    }
    if (!MatchesLabels(request.label_selector(), app.metadata().labels())) return true;
    if (static_cast<size_t>(response.applications_size()) == page) {
      more = true;
      return false;
    }
    *response.add_applications() = app;
    return true;
  }));
  if (more) {
    response.set_next_page_token(
        response.applications(response.applications_size() - 1).metadata().name());
  }
  return response;
}

absl::StatusOr<v1::DeleteApplicationResponse> ApplicationManager::Delete(
    const v1::DeleteApplicationRequest& request) {
  if (request.name().empty()) return InvalidFieldError("name", "required");
  std::string key;
  std::string fingerprint;
  if (!request.request_id().empty()) {
    key = "delete/" + request.request_id();
    fingerprint = Fingerprint(request);
  }
  v1::DeleteApplicationResponse response;
  bool committed = false;
  bool partial = false;  // only one CodecoApp's services went
  std::string release_id;
  {
    absl::MutexLock lock(&write_mu_);
    if (!key.empty()) {
      ASSIGN_OR_RETURN(std::optional<std::string> stored, CheckRequest(key, fingerprint));
      if (stored) {
        if (!response.ParseFromString(*stored)) return absl::DataLossError("stored response");
        return response;
      }
    }
    ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(request.name()));
    if (!app) return absl::NotFoundError(absl::StrCat("application \"", request.name(), "\""));
    RETURN_IF_ERROR(CheckExpectedRevision(request.expected_revision(), app, "expected_revision"));
    if (!request.codeco_app().empty() && app->status().phase() != v1::APPLICATION_PHASE_DELETING) {
      // One CodecoApp of the application goes: its services leave the spec
      // (a new spec revision, placed again), unless none would be left.
      ASSIGN_OR_RETURN(MergedSpec rest, RemoveCodecoApp(app->spec(), request.codeco_app()));
      if (rest.spec.services_size() > 0) {
        v1::ApplyApplicationRequest apply;
        *apply.mutable_spec() = std::move(rest.spec);
        *apply.mutable_labels() = app->metadata().labels();
        apply.set_request_id(request.request_id());
        RequestRecord record{key, fingerprint, [](const v1::ApplyApplicationResponse& applied) {
                               v1::DeleteApplicationResponse r;
                               if (applied.has_operation())
                                 *r.mutable_operation() = applied.operation();
                               return r.SerializeAsString();
                             }};
        ASSIGN_OR_RETURN(v1::ApplyApplicationResponse applied, ApplyLocked(apply, "apply", record));
        if (applied.has_operation()) *response.mutable_operation() = applied.operation();
        committed = true;
        partial = true;
      }
    }
    if (!partial) {  // the whole application goes
      common::v1::Operation& op = *response.mutable_operation();
      if (app->status().phase() == v1::APPLICATION_PHASE_DELETING) {
        // Already on its way out: the same operation, and the scheduler asked again below.
        ASSIGN_OR_RETURN(std::optional<common::v1::Operation> stored,
                         store_.GetOperation(app->status().operation_id()));
        if (stored) {
          op = *std::move(stored);
        } else {  // deleted before operations were stored
          op = NewApplicationOperation(app->status().operation_id(), kDeleteOperationKind,
                                       request.name(), request.request_id(),
                                       app->metadata().update_time());
          FoldIntoOperation(*app, false, app->metadata().update_time(), op);
        }
      } else {
        ASSIGN_OR_RETURN(int64_t last, store_.LastRevision());
        const int64_t revision = last + 1;
        op = NewApplicationOperation(absl::StrCat("delete-", request.name(), "-", revision),
                                     kDeleteOperationKind, request.name(), request.request_id(),
                                     NowProto());
        app->mutable_metadata()->set_revision(revision);
        *app->mutable_metadata()->mutable_update_time() = NowProto();
        v1::ApplicationStatus& status = *app->mutable_status();
        status.set_phase(v1::APPLICATION_PHASE_DELETING);
        status.set_error_msg("");
        ApplicationCommit commit;
        RETURN_IF_ERROR(SupersedeLocked(status.operation_id(), op.id(), commit));
        status.set_operation_id(op.id());
        commit.put = *app;
        commit.event.set_type(common::v1::WATCH_EVENT_TYPE_MODIFIED);
        *commit.event.mutable_application() = *app;
        commit.operations.push_back(op);
        RETURN_IF_ERROR(FoldOperationLocked(commit));
        op = commit.operations.back();
        if (!key.empty()) {
          commit.request = {key, StoredRequest{fingerprint, response.SerializeAsString()}};
        }
        RETURN_IF_ERROR(CommitNext(commit));
        committed = true;
      }
      release_id = ReleaseRequestId(*app);
      MarkSentLocked(request.name());
    }
  }
  if (committed) Notify();
  if (partial) return response;  // one CodecoApp removed; the rest is placed again
  // Outside the lock: the scheduler may report back at once. A refusal here
  // (e.g. shutting down) leaves the application DELETING; Reconcile asks
  // again (at the latest after a restart).
  absl::Status asked = scheduler_.ReleasePlacement(request.name(), release_id);
  if (!asked.ok()) {
    RecordRelease(request.name(), asked).IgnoreError();
  }
  return response;
}

absl::StatusOr<std::vector<std::string>> ApplicationManager::MoveOffCluster(
    const std::string& cluster, StuckApplications stuck, const std::string& why) {
  if (cluster.empty()) return InvalidFieldError("name", "required");
  std::vector<std::pair<v1::Application, absl::StatusOr<v1::Neighborhood>>> moves;
  std::vector<std::string> moved;
  {
    absl::MutexLock lock(&write_mu_);
    std::vector<v1::Application> affected;
    // Re-evaluation leaves an application already moving to finish its move.
    auto skip = [&](const v1::Application& app) {
      const auto phase = app.status().phase();
      return phase == v1::APPLICATION_PHASE_DELETING ||
             (stuck == StuckApplications::kLeave && phase == v1::APPLICATION_PHASE_MIGRATING);
    };
    RETURN_IF_ERROR(store_.List("", [&](const v1::Application& app) {
      if (skip(app)) return true;
      bool here = std::any_of(app.status().placements().begin(), app.status().placements().end(),
                              [&](const auto& p) { return p.cluster() == cluster; });
      if (here) affected.push_back(app);
      return true;
    }));
    if (neighborhoods_ != nullptr) {
      // Applications not placed there yet but scoped to it.
      RETURN_IF_ERROR(store_.List("", [&](const v1::Application& app) {
        if (skip(app)) return true;
        if (std::any_of(affected.begin(), affected.end(), [&](const v1::Application& a) {
              return a.metadata().name() == app.metadata().name();
            })) {
          return true;
        }
        absl::StatusOr<std::optional<v1::Neighborhood>> nb =
            neighborhoods_->Find(app.metadata().name());
        if (nb.ok() && *nb &&
            std::any_of((*nb)->members().begin(), (*nb)->members().end(),
                        [&](const auto& m) { return m.cluster() == cluster; })) {
          affected.push_back(app);
        }
        return true;
      }));
    }
    // First choose for all, storing nothing, so a refusal leaves no trace.
    std::string refused;
    for (const v1::Application& app : affected) {
      absl::StatusOr<v1::Neighborhood> nb =
          neighborhoods_ != nullptr ? neighborhoods_->Preview(app.spec()) : v1::Neighborhood();
      if (!nb.ok()) {
        absl::StrAppend(&refused, "\n", app.metadata().name(), ": ", nb.status().message());
      }
      moves.emplace_back(app, std::move(nb));
    }
    if (!refused.empty() && stuck == StuckApplications::kRefuse) {
      return absl::FailedPreconditionError(
          absl::StrCat("name: applications on cluster \"", cluster,
                       "\" have nowhere else to go (force removes it anyway):", refused));
    }
    if (stuck == StuckApplications::kLeave) {
      std::erase_if(moves, [](const auto& move) { return !move.second.ok(); });
    }
    for (auto& [app, nb] : moves) {
      if (nb.ok() && neighborhoods_ != nullptr) nb = neighborhoods_->Assign(app.spec());
      v1::ApplicationStatus& status = *app.mutable_status();
      if (nb.ok()) {
        status.set_phase(v1::APPLICATION_PHASE_MIGRATING);
        status.set_error_msg(absl::StrCat("moving off cluster ", cluster, " (", why, ")"));
        status.set_neighborhood_id(nb->id());
      } else {
        status.set_phase(v1::APPLICATION_PHASE_PENDING);
        status.set_status(v1::STATUS_LEVEL_ERROR);
        status.set_error_msg(absl::StrCat("cluster ", cluster, " ", why,
                                          "; waiting for a neighborhood: ", nb.status().message()));
        status.clear_neighborhood_id();
      }
      RETURN_IF_ERROR(CommitModified(app));
      attempts_.erase(app.metadata().name());  // a new intent: its attempts start afresh
      moved.push_back(app.metadata().name());
    }
  }
  if (!moved.empty()) Notify();
  for (const auto& [app, nb] : moves) {
    if (!nb.ok()) continue;
    SendPlacement(app, *nb);
  }
  return moved;
}

absl::Status ApplicationManager::RecordRelease(const std::string& name,
                                               const absl::Status& outcome) {
  {
    absl::MutexLock lock(&write_mu_);
    ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(name));
    if (!app) return absl::OkStatus();  // already gone
    if (app->status().phase() != v1::APPLICATION_PHASE_DELETING) {
      return absl::FailedPreconditionError(
          absl::StrCat("application \"", name, "\" is not being deleted"));
    }
    ApplicationCommit commit;
    if (outcome.ok()) {
      app->mutable_status()->set_status(v1::STATUS_LEVEL_OK);
      app->mutable_status()->set_error_msg("");
      app->mutable_status()->clear_placements();
      commit.erase = name;
      commit.event.set_type(common::v1::WATCH_EVENT_TYPE_DELETED);
      pod_failures_.erase(name);
    } else {
      std::string message = absl::StrCat("pods not released yet (retrying): ", outcome.message());
      if (app->status().error_msg() == message) return absl::OkStatus();  // no news
      app->mutable_status()->set_status(v1::STATUS_LEVEL_WARNING);
      app->mutable_status()->set_error_msg(message);
      commit.put = *app;
      commit.event.set_type(common::v1::WATCH_EVENT_TYPE_MODIFIED);
    }
    ASSIGN_OR_RETURN(int64_t last, store_.LastRevision());
    app->mutable_metadata()->set_revision(last + 1);
    *app->mutable_metadata()->mutable_update_time() = NowProto();
    if (commit.put) *commit.put = *app;
    *commit.event.mutable_application() = *app;
    RETURN_IF_ERROR(CommitNext(commit));
    if (outcome.ok() && neighborhoods_ != nullptr) {
      // The application is gone either way; a stale neighborhood is only
      // listed until the next apply of the same name re-chooses it.
      neighborhoods_->Release(name).IgnoreError();
    }
  }
  Notify();
  return absl::OkStatus();
}

absl::StatusOr<int> ApplicationManager::Resume() { return Reconcile(); }

absl::StatusOr<int> ApplicationManager::Reconcile() {
  std::vector<v1::Application> releases;
  std::vector<v1::Application> placements;
  // Jobs' ended pods to run again: application, its slot, and the request_id.
  std::vector<std::tuple<std::string, std::string, std::string>> next_job_pods;
  // Set when history is due for pruning, with the operations applications name.
  std::optional<absl::Time> prune_at;
  std::set<std::string> keep_operations;
  {
    absl::MutexLock lock(&write_mu_);
    const absl::Time now = clock_.Now();
    std::set<std::string> intents;
    std::set<std::string> named_operations;
    RETURN_IF_ERROR(store_.List("", [&](const v1::Application& app) {
      const std::string& name = app.metadata().name();
      named_operations.insert(app.status().operation_id());
      const auto phase = app.status().phase();
      if (phase == v1::APPLICATION_PHASE_DEPLOYING || phase == v1::APPLICATION_PHASE_RUNNING ||
          phase == v1::APPLICATION_PHASE_DEGRADED) {
        for (const JobSlot& slot : JobPodsToReplace(app)) {
          // Asked again while the pod still stands in the placements.
          auto [asked, fresh] = job_pods_asked_.try_emplace(name + "/" + slot.pod, now);
          if (!fresh && asked->second + kJobPodAskAgain > now) continue;
          asked->second = now;
          next_job_pods.emplace_back(name, slot.workload, NextJobPodRequestId(app, slot.pod));
        }
      }
      const bool release = phase == v1::APPLICATION_PHASE_DELETING;
      // PENDING without a neighborhood waits for one (a later apply or cluster change).
      const bool place = phase == v1::APPLICATION_PHASE_MIGRATING ||
                         (phase == v1::APPLICATION_PHASE_PENDING &&
                          (neighborhoods_ == nullptr || !app.status().neighborhood_id().empty()));
      const bool retry_unplaced = phase == v1::APPLICATION_PHASE_DEGRADED &&
                                  options_.unplaced_retry.initial > absl::ZeroDuration() &&
                                  absl::StartsWith(app.status().error_msg(), kUnplacedReplicas);
      if (retry_unplaced) {
        intents.insert(name);
        auto [retry, fresh] = unplaced_.try_emplace(name);
        if (fresh) {  // a restart forgot the count: wait one interval
          retry->second.failures = 1;
          retry->second.due = now + unplaced_backoff_.Delay(1);
        }
        if (retry->second.due > now) return true;
        auto sent = attempts_.find(name);
        if (sent != attempts_.end() && sent->second.due > now) return true;  // in flight
        // Should the answer be lost, asked again after the same wait.
        retry->second.due = now + unplaced_backoff_.Delay(retry->second.failures);
        MarkSentLocked(name);
        placements.push_back(app);
        return true;
      }
      if (!release && !place) return true;
      intents.insert(name);
      if (!release && HeldUntil(app.spec(), now)) return true;  // its start time is later
      auto it = attempts_.find(name);
      if (it != attempts_.end() && it->second.due > now) return true;
      MarkSentLocked(name);
      (release ? releases : placements).push_back(app);
      return true;
    }));
    std::erase_if(attempts_, [&](const auto& entry) { return !intents.count(entry.first); });
    std::erase_if(unplaced_, [&](const auto& entry) { return !intents.count(entry.first); });
    std::erase_if(job_pods_asked_, [&](const auto& entry) {
      return entry.second + 10 * kJobPodAskAgain < now;  // long replaced, or its app gone
    });
    if (now >= next_prune_) {
      next_prune_ = now + absl::Minutes(1);
      prune_at = now;
      keep_operations = std::move(named_operations);
    }
  }
  // Outside write_mu_: it deletes only records nothing writes any more.
  if (prune_at) RETURN_IF_ERROR(PruneHistory(*prune_at, keep_operations));
  for (const auto& [name, workload, request_id] : next_job_pods) {
    absl::Status asked = scheduler_.RunNextJobPod(name, workload, request_id);
    if (!asked.ok()) {
      log::Warn(
          "next job pod not asked",
          {{"application", name}, {"workload", workload}, {"error", std::string(asked.message())}});
    }
  }
  for (const auto& app : releases) {
    absl::Status asked = scheduler_.ReleasePlacement(app.metadata().name(), ReleaseRequestId(app));
    if (!asked.ok()) RecordRelease(app.metadata().name(), asked).IgnoreError();
  }
  for (const auto& app : placements) {
    std::optional<v1::Neighborhood> nb;
    if (neighborhoods_ != nullptr) {
      absl::StatusOr<std::optional<v1::Neighborhood>> found =
          neighborhoods_->Find(app.metadata().name());
      if (found.ok()) nb = *std::move(found);
    }
    SendPlacement(app, nb.value_or(v1::Neighborhood()));
  }
  return static_cast<int>(releases.size() + placements.size() + next_job_pods.size());
}

absl::Status ApplicationManager::PruneHistory(absl::Time now,
                                              const std::set<std::string>& named_operations) {
  HistoryPruning pruning{
      .now = now,
      .operations_done_by = now - options_.operation_retention,
      .keep = [&](const common::v1::Operation& op) { return named_operations.count(op.id()) > 0; },
      .requests_done_by = now - options_.request_retention};
  for (bool more = true; more;) {
    ASSIGN_OR_RETURN(PrunedHistory pruned, store_.PruneHistory(pruning));
    more = pruned.more;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RollbackApplicationResponse> ApplicationManager::Rollback(
    const v1::RollbackApplicationRequest& request) {
  if (request.name().empty()) return InvalidFieldError("name", "required");
  if (request.to_spec_revision() <= 0) {
    return InvalidFieldError("to_spec_revision", "must be a spec revision (1 or more)");
  }
  std::string key;
  std::string fingerprint;
  if (!request.request_id().empty()) {
    key = "rollback/" + request.request_id();
    fingerprint = Fingerprint(request);
  }
  v1::RollbackApplicationResponse response;
  {
    absl::MutexLock lock(&write_mu_);
    if (!key.empty()) {
      ASSIGN_OR_RETURN(std::optional<std::string> stored, CheckRequest(key, fingerprint));
      if (stored) {
        if (!response.ParseFromString(*stored)) return absl::DataLossError("stored response");
        return response;
      }
    }
    ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(request.name()));
    if (!app) return absl::NotFoundError(absl::StrCat("application \"", request.name(), "\""));
    absl::StatusOr<v1::ApplicationRevision> rev =
        store_.GetSpecRevision(request.name(), request.to_spec_revision());
    if (absl::IsNotFound(rev.status())) {
      return absl::NotFoundError(absl::StrCat("to_spec_revision: application \"", request.name(),
                                              "\" has no spec revision ",
                                              request.to_spec_revision()));
    }
    RETURN_IF_ERROR(rev.status());
    // The revision's whole spec (re-parsing its YAML would merge it with the
    // application's other CodecoApps), with its YAML kept alongside; as
    // submitted, so that the policies in force admit it afresh.
    v1::ApplyApplicationRequest apply = Resubmission(*app, *rev);
    apply.set_request_id(request.request_id());
    RequestRecord record{key, fingerprint, [](const v1::ApplyApplicationResponse& applied) {
                           v1::RollbackApplicationResponse r;
                           *r.mutable_application() = applied.application();
                           if (applied.has_operation()) *r.mutable_operation() = applied.operation();
                           return r.SerializeAsString();
                         }};
    ASSIGN_OR_RETURN(
        v1::ApplyApplicationResponse applied,
        ApplyLocked(apply, absl::StrCat("rollback to ", request.to_spec_revision()), record,
                    rev->cam_yaml()));
    *response.mutable_application() = applied.application();
    if (applied.has_operation()) *response.mutable_operation() = applied.operation();
  }
  Notify();
  return response;
}

absl::StatusOr<v1::Application> ApplicationManager::ScaleServices(
    const std::string& name, int64_t expected_spec_revision,
    const std::map<std::string, int>& replicas, const std::string& cause) {
  absl::StatusOr<v1::ApplyApplicationResponse> applied;
  {
    absl::MutexLock lock(&write_mu_);
    ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(name));
    if (!app) return absl::NotFoundError(absl::StrCat("application \"", name, "\""));
    if (app->spec_revision() != expected_spec_revision) {
      return absl::FailedPreconditionError(
          absl::StrCat("application \"", name, "\" is at spec revision ", app->spec_revision(),
                       ", not ", expected_spec_revision));
    }
    if (app->status().phase() == v1::APPLICATION_PHASE_DELETING) {
      return absl::FailedPreconditionError(
          absl::StrCat("application \"", name, "\" is being deleted"));
    }
    ASSIGN_OR_RETURN(v1::ApplicationRevision rev,
                     store_.GetSpecRevision(name, app->spec_revision()));
    v1::ApplyApplicationRequest apply = Resubmission(*app, rev);
    for (const auto& [service, count] : replicas) {
      auto it = std::find_if(apply.mutable_spec()->mutable_services()->begin(),
                             apply.mutable_spec()->mutable_services()->end(),
                             [&](const v1::ServiceSpec& s) { return s.name() == service; });
      if (it == apply.mutable_spec()->mutable_services()->end()) {
        return absl::NotFoundError(
            absl::StrCat("application \"", name, "\" has no service \"", service, "\""));
      }
      it->set_replicas(count);
    }
    applied = ApplyLocked(apply, cause, RequestRecord{});
  }
  if (!applied.ok()) return applied.status();
  Notify();
  return applied->application();
}

absl::Status ApplicationManager::RecordMetrics(const std::string& name,
                                               const std::vector<v1::ServiceMetrics>& metrics) {
  {
    absl::MutexLock lock(&write_mu_);
    ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(name));
    if (!app) return absl::NotFoundError(absl::StrCat("application \"", name, "\""));
    v1::AppMetrics measured = app->status().app_metrics();
    measured.clear_services();
    for (const v1::ServiceMetrics& m : metrics) *measured.add_services() = m;
    if (MessageDifferencer::Equals(measured, app->status().app_metrics())) return absl::OkStatus();
    *app->mutable_status()->mutable_app_metrics() = std::move(measured);
    RETURN_IF_ERROR(CommitModified(*app));
  }
  Notify();
  return absl::OkStatus();
}

absl::StatusOr<ReadmitOutcome> ApplicationManager::ReadmitWaiting() {
  ReadmitOutcome outcome;
  if (admission_ == nullptr) return outcome;
  {
    absl::MutexLock lock(&write_mu_);
    const absl::Time now = clock_.Now();
    std::vector<v1::Application> waiting;
    RETURN_IF_ERROR(store_.List("", [&](const v1::Application& app) {
      if (app.status().phase() == v1::APPLICATION_PHASE_PENDING && HeldUntil(app.spec(), now)) {
        waiting.push_back(app);
      }
      return true;
    }));
    const std::string cause = absl::StrCat(
        "re-admitted under policy bundle ",
        admission_->version().empty() ? "(built-in defaults)" : admission_->version());
    for (const v1::Application& app : waiting) {
      const std::string& name = app.metadata().name();
      ASSIGN_OR_RETURN(v1::ApplicationRevision rev,
                       store_.GetSpecRevision(name, app.spec_revision()));
      absl::StatusOr<v1::ApplyApplicationResponse> applied =
          ApplyLocked(Resubmission(app, rev), cause, RequestRecord{}, rev.cam_yaml());
      if (!applied.ok()) {
        // Refused now (say, its deadline can no longer be met): it keeps the
        // schedule it was admitted with.
        outcome.refused.push_back(absl::StrCat(name, ": ", applied.status().message()));
        continue;
      }
      if (applied->application().spec_revision() != app.spec_revision()) {
        outcome.changed.push_back(name);
      }
    }
  }
  Notify();
  return outcome;
}

absl::StatusOr<v1::ListApplicationRevisionsResponse> ApplicationManager::ListRevisions(
    const v1::ListApplicationRevisionsRequest& request) const {
  if (request.name().empty()) return InvalidFieldError("name", "required");
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  int64_t before = INT64_MAX;
  if (!request.page_token().empty() && !absl::SimpleAtoi(request.page_token(), &before)) {
    return InvalidFieldError("page_token", "not a token this server issued");
  }
  ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(request.name()));
  if (!app) return absl::NotFoundError(absl::StrCat("application \"", request.name(), "\""));
  ASSIGN_OR_RETURN(std::vector<v1::ApplicationRevision> revs,
                   store_.ListSpecRevisions(request.name()));
  const size_t page = PageSize(request.page_size());
  v1::ListApplicationRevisionsResponse response;
  for (auto it = revs.rbegin(); it != revs.rend(); ++it) {
    if (it->spec_revision() >= before) continue;
    if (static_cast<size_t>(response.revisions_size()) == page) {
      response.set_next_page_token(
          absl::StrCat(response.revisions(response.revisions_size() - 1).spec_revision()));
      break;
    }
    *response.add_revisions() = *it;
  }
  return response;
}

absl::StatusOr<v1::Application> ApplicationManager::RecordPlacement(const std::string& name,
                                                                    int64_t spec_revision,
                                                                    const PlacementResult& result) {
  v1::Application app;
  {
    absl::MutexLock lock(&write_mu_);
    ASSIGN_OR_RETURN(std::optional<v1::Application> current, store_.Get(name));
    if (!current) return absl::NotFoundError(absl::StrCat("application \"", name, "\""));
    if (current->spec_revision() != spec_revision) {
      return absl::FailedPreconditionError(absl::StrCat("placement is for spec revision ",
                                                        spec_revision, " but application \"", name,
                                                        "\" is at ", current->spec_revision()));
    }
    if (current->status().phase() == v1::APPLICATION_PHASE_DELETING) {
      return absl::FailedPreconditionError(
          absl::StrCat("application \"", name, "\" is being deleted"));
    }
    app = *std::move(current);
    const auto phase = app.status().phase();
    const bool waiting =
        phase == v1::APPLICATION_PHASE_PENDING || phase == v1::APPLICATION_PHASE_MIGRATING;
    if (IsTransientSchedulerError(result.error)) {
      if (!waiting) return app;  // a late retry's error; the answer is in already
      absl::Time next = ScheduleRetryLocked(name);
      v1::ApplicationStatus& status = *app.mutable_status();
      status.set_status(v1::STATUS_LEVEL_WARNING);
      status.set_error_msg(
          absl::StrCat("placement not confirmed, the scheduler could not answer (",
                       absl::StatusCodeToString(result.error.code()), ": ", result.error.message(),
                       "); attempt ", attempts_[name].failures, " failed, next attempt at ",
                       absl::FormatTime(absl::RFC3339_sec, next, absl::UTCTimeZone())));
      RETURN_IF_ERROR(CommitModified(app));
    } else {
      attempts_.erase(name);
      pod_failures_.erase(name);  // a new plan: its pods report afresh
      v1::ApplicationStatus& status = *app.mutable_status();
      // The pods a scale in place leaves running keep their readiness.
      std::map<std::tuple<std::string, std::string, std::string, std::string>, v1::ServicePlacement>
          stays;
      if (result.in_place) {
        for (const v1::ServicePlacement& p : status.placements()) {
          if (p.ready() || p.succeeded()) stays[{p.service(), p.cluster(), p.node(), p.pod()}] = p;
        }
      } else {
        status.clear_jobs();  // a placement anew runs its jobs anew
      }
      status.clear_placements();
      status.set_observed_spec_revision(spec_revision);
      status.set_plan_revision(result.plan_revision);
      // The channels of the new plan: those SWM reported already, else none yet.
      status.clear_channels();
      TakeEarlyChannelsLocked(name, result.plan_revision, status);
      status.set_neighborhood_id(result.neighborhood_id);
      if (!result.error.ok()) {
        // The scheduler's definitive answer (e.g. INVALID_ARGUMENT, FAILED_PRECONDITION).
        status.set_phase(v1::APPLICATION_PHASE_FAILED);
        status.set_status(v1::STATUS_LEVEL_ERROR);
        status.set_error_msg(
            absl::StrCat("scheduler: ", absl::StatusCodeToString(result.error.code()), ": ",
                         result.error.message()));
      } else if (!result.placed) {
        status.set_phase(v1::APPLICATION_PHASE_FAILED);
        status.set_status(v1::STATUS_LEVEL_ERROR);
        status.set_error_msg(result.message.empty() ? "placement failed" : result.message);
      } else {
        std::set<std::string> placed;
        bool all_ready = true;
        for (const auto& p : result.placements) {
          v1::ServicePlacement* kept = status.add_placements();
          *kept = p;
          if (auto same = stays.find({p.service(), p.cluster(), p.node(), p.pod()});
              !kept->ready() && same != stays.end()) {
            kept->set_ready(same->second.ready());
            kept->set_succeeded(same->second.succeeded());
            *kept->mutable_addresses() = same->second.addresses();
          }
          placed.insert(p.service());
          all_ready = all_ready && kept->ready();
        }
        std::string missing;
        for (const auto& s : app.spec().services()) {
          if (s.replicas() > 0 && !placed.count(s.name())) {
            absl::StrAppend(&missing, missing.empty() ? "" : ", ", s.name());
          }
        }
        if (!missing.empty()) {
          status.set_phase(v1::APPLICATION_PHASE_DEGRADED);
          status.set_status(v1::STATUS_LEVEL_WARNING);
          status.set_error_msg(absl::StrCat("not placed: ", missing));
        } else if (!result.unplaced_replicas.empty()) {
          status.set_phase(v1::APPLICATION_PHASE_DEGRADED);
          status.set_status(v1::STATUS_LEVEL_WARNING);
          UnplacedRetry& retry = unplaced_[name];
          ++retry.failures;
          retry.due = clock_.Now() + unplaced_backoff_.Delay(retry.failures);
          retry.detail = absl::StrJoin(result.unplaced_replicas, "; ");
          status.set_error_msg(UnplacedMessageLocked(name, retry.detail));
        } else {
          status.set_phase(all_ready ? v1::APPLICATION_PHASE_RUNNING
                                     : v1::APPLICATION_PHASE_DEPLOYING);
          status.set_status(v1::STATUS_LEVEL_OK);
          status.set_error_msg(result.message);
        }
      }
      if (result.unplaced_replicas.empty() || !result.error.ok()) unplaced_.erase(name);
      RETURN_IF_ERROR(CommitModified(app));
    }
  }
  Notify();
  return app;
}

void ApplicationManager::TakeEarlyChannelsLocked(const std::string& name, int64_t plan_revision,
                                                 v1::ApplicationStatus& status) {
  auto early = early_channels_.find(name);
  if (early == early_channels_.end()) return;
  if (early->second.plan_revision == plan_revision) {
    status.clear_channels();
    for (const v1::ChannelStatus& c : early->second.channels) *status.add_channels() = c;
  }
  if (early->second.plan_revision <= plan_revision) early_channels_.erase(early);
}

std::string ApplicationManager::UnplacedMessageLocked(const std::string& name,
                                                      const std::string& detail) const {
  std::string when = "at a later apply";
  if (options_.unplaced_retry.initial > absl::ZeroDuration()) {
    auto retry = unplaced_.find(name);
    when = retry == unplaced_.end() || retry->second.failures == 0
               ? "tried again shortly"
               : absl::StrCat(
                     "tried again at ",
                     absl::FormatTime(absl::RFC3339_sec, retry->second.due, absl::UTCTimeZone()),
                     ", attempt ", retry->second.failures + 1);
  }
  return absl::StrCat(kUnplacedReplicas, " (", when, "): ", detail);
}

void ApplicationManager::FoldPodStatus(v1::Application& app) const {
  v1::ApplicationStatus& status = *app.mutable_status();
  FoldJobs(app);
  std::set<std::string> placed;
  std::set<std::string> running;  // served by a running pod, or a job with a pod done
  std::map<std::string, int> replicas_placed;
  int ready = 0;
  int done = 0;  // jobs' pods that succeeded
  for (const auto& p : status.placements()) {
    placed.insert(p.service());
    ++replicas_placed[p.service()];
    if (p.ready() || p.succeeded()) running.insert(p.service());
    if (p.ready()) ++ready;
    if (p.succeeded()) ++done;
  }
  // A job with more failed pods than its backoff_limit has failed; one with
  // all its completions is complete (FoldJobs made an entry for each job).
  std::vector<std::string> failed_jobs;
  bool jobs_only = true;
  bool jobs_complete = true;
  for (const auto& s : app.spec().services()) {
    const v1::JobStatus* j = s.has_job() ? FindJob(status, s.name()) : nullptr;
    if (j == nullptr) {
      jobs_only = false;
      continue;
    }
    const int backoff_limit = s.job().backoff_limit();
    if (j->failed_pods_size() > backoff_limit) {
      failed_jobs.push_back(
          absl::StrCat("job ", j->service(), " failed: ", j->failed_pods_size(),
                       " of its pods failed, more than its backoffLimit ", backoff_limit, " (pod ",
                       absl::StrJoin(j->failed_pods(), ", pod "), "; ", j->succeeded_pods_size(),
                       " of ", j->completions(), " succeeded)"));
    }
    jobs_complete = jobs_complete && j->succeeded_pods_size() >= j->completions();
  }
  if (!failed_jobs.empty()) {
    std::vector<std::string> why = failed_jobs;
    if (auto it = pod_failures_.find(app.metadata().name()); it != pod_failures_.end()) {
      for (const auto& [cluster, failures] : it->second) {
        why.insert(why.end(), failures.begin(), failures.end());
      }
    }
    status.set_phase(v1::APPLICATION_PHASE_FAILED);
    status.set_status(v1::STATUS_LEVEL_ERROR);
    status.set_error_msg(absl::StrJoin(why, "; "));
    return;
  }
  if (jobs_only && status.jobs_size() > 0 && jobs_complete) {
    status.set_phase(v1::APPLICATION_PHASE_SUCCEEDED);
    status.set_status(v1::STATUS_LEVEL_OK);
    status.set_error_msg("");
    return;
  }
  std::vector<std::string> problems;
  std::string missing;
  std::vector<std::string> short_of;  // services with fewer replicas placed than wanted
  for (const auto& s : app.spec().services()) {
    if (s.replicas() > 0 && !placed.count(s.name())) {
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", s.name());
    } else if (replicas_placed[s.name()] < s.replicas()) {
      short_of.push_back(
          absl::StrCat(s.name(), " ", replicas_placed[s.name()], " of ", s.replicas(), " placed"));
    }
  }
  if (!short_of.empty()) {
    // Replicas a scale left with no node: DEGRADED until they run.
    auto known = unplaced_.find(app.metadata().name());
    problems.push_back(UnplacedMessageLocked(
        app.metadata().name(), known != unplaced_.end() && !known->second.detail.empty()
                                   ? known->second.detail
                                   : absl::StrJoin(short_of, ", ")));
  }
  if (!missing.empty()) problems.push_back(absl::StrCat("not placed: ", missing));
  for (const auto& c : status.channels()) {
    if (c.phase() == v1::CHANNEL_PHASE_OOQOS || c.phase() == v1::CHANNEL_PHASE_REJECTED) {
      problems.push_back(absl::StrCat(
          "channel ", c.name(), " ",
          absl::StripPrefix(v1::ChannelPhase_Name(c.phase()), "CHANNEL_PHASE_"), ": ",
          c.message()));
    }
  }
  if (auto it = pod_failures_.find(app.metadata().name()); it != pod_failures_.end()) {
    for (const auto& [cluster, failures] : it->second) {
      problems.insert(problems.end(), failures.begin(), failures.end());
    }
  }
  if (problems.empty() && ready + done == status.placements_size() && ready + done > 0) {
    status.set_phase(v1::APPLICATION_PHASE_RUNNING);
    status.set_status(v1::STATUS_LEVEL_OK);
    status.set_error_msg("");
  } else if (problems.empty()) {
    status.set_phase(v1::APPLICATION_PHASE_DEPLOYING);
    status.set_status(v1::STATUS_LEVEL_OK);
    status.set_error_msg("");
  } else {
    // Every service still served by a running pod: a warning; else an error.
    bool all_served = missing.empty();
    for (const auto& service : placed) all_served = all_served && running.count(service);
    status.set_phase(v1::APPLICATION_PHASE_DEGRADED);
    status.set_status(all_served ? v1::STATUS_LEVEL_WARNING : v1::STATUS_LEVEL_ERROR);
    status.set_error_msg(absl::StrJoin(problems, "; "));
  }
}

absl::Status ApplicationManager::RecordChannels(const std::string& name, int64_t plan_revision,
                                                const std::vector<v1::ChannelStatus>& channels) {
  {
    absl::MutexLock lock(&write_mu_);
    ASSIGN_OR_RETURN(std::optional<v1::Application> current, store_.Get(name));
    if (!current) {
      early_channels_.erase(name);
      return absl::NotFoundError(absl::StrCat("application \"", name, "\""));
    }
    v1::Application app = *std::move(current);
    const int64_t held = app.status().plan_revision();
    if (plan_revision <= 0 || plan_revision < held) return absl::OkStatus();  // removed or stale
    if (plan_revision > held) {
      early_channels_[name] = ChannelReport{plan_revision, channels};
      return absl::OkStatus();
    }
    early_channels_.erase(name);
    const v1::ApplicationStatus before = app.status();
    v1::ApplicationStatus& status = *app.mutable_status();
    status.clear_channels();
    for (const v1::ChannelStatus& c : channels) *status.add_channels() = c;
    const auto phase = status.phase();
    if (phase == v1::APPLICATION_PHASE_DEPLOYING || phase == v1::APPLICATION_PHASE_RUNNING ||
        phase == v1::APPLICATION_PHASE_DEGRADED) {
      FoldPodStatus(app);
    }
    if (MessageDifferencer::Equals(before, app.status())) return absl::OkStatus();
    RETURN_IF_ERROR(CommitModified(app));
  }
  Notify();
  return absl::OkStatus();
}

absl::Status ApplicationManager::RecordMove(const std::string& name, int64_t spec_revision,
                                            int64_t plan_revision,
                                            const std::vector<v1::ServicePlacement>& placements) {
  {
    absl::MutexLock lock(&write_mu_);
    ASSIGN_OR_RETURN(std::optional<v1::Application> current, store_.Get(name));
    if (!current) return absl::NotFoundError(absl::StrCat("application \"", name, "\""));
    v1::Application app = *std::move(current);
    v1::ApplicationStatus& status = *app.mutable_status();
    const auto phase = status.phase();
    const bool placed = phase == v1::APPLICATION_PHASE_DEPLOYING ||
                        phase == v1::APPLICATION_PHASE_RUNNING ||
                        phase == v1::APPLICATION_PHASE_DEGRADED;
    // Its own placement answers through RecordPlacement; a plan for another
    // spec or older than the one held is stale.
    if (!placed || placements.empty() || app.spec_revision() != spec_revision ||
        status.observed_spec_revision() != spec_revision ||
        plan_revision <= status.plan_revision()) {
      return absl::OkStatus();
    }
    // A pod kept by the move keeps its readiness and where it serves.
    std::map<std::tuple<std::string, std::string, std::string, std::string>,
             const v1::ServicePlacement*>
        ready;
    google::protobuf::RepeatedPtrField<v1::ServicePlacement> before;
    before.Swap(status.mutable_placements());
    for (const v1::ServicePlacement& p : before) {
      if (p.ready() || p.succeeded()) ready[{p.service(), p.cluster(), p.node(), p.pod()}] = &p;
    }
    for (const v1::ServicePlacement& p : placements) {
      v1::ServicePlacement* kept = status.add_placements();
      *kept = p;
      kept->set_ready(false);
      kept->clear_addresses();
      auto was = ready.find({p.service(), p.cluster(), p.node(), p.pod()});
      if (was != ready.end()) {
        kept->set_ready(was->second->ready());
        kept->set_succeeded(was->second->succeeded());
        *kept->mutable_addresses() = was->second->addresses();
        continue;
      }
      auto reported = running_pods_.find(p.cluster());
      if (reported == running_pods_.end()) continue;
      auto running = reported->second.find({name, p.pod()});
      if (running == reported->second.end()) continue;
      kept->set_ready(true);
      for (const std::string& address : running->second) kept->add_addresses(address);
    }
    status.set_plan_revision(plan_revision);
    TakeEarlyChannelsLocked(name, plan_revision, status);
    FoldPodStatus(app);
    RETURN_IF_ERROR(CommitModified(app));
  }
  Notify();
  return absl::OkStatus();
}

absl::StatusOr<int> ApplicationManager::RecordPods(const std::string& cluster,
                                                   const std::vector<PodReport>& pods) {
  if (cluster.empty()) return InvalidFieldError("cluster", "required");
  // application -> pod name -> report
  std::map<std::string, std::map<std::string, const PodReport*>> reported;
  for (const auto& pod : pods) reported[pod.application][pod.pod] = &pod;
  int changed = 0;
  {
    absl::MutexLock lock(&write_mu_);
    auto& running = running_pods_[cluster];
    running.clear();
    for (const auto& pod : pods) {
      if (pod.phase == lms::v1::POD_PHASE_RUNNING) {
        running[{pod.application, pod.pod}] = pod.addresses;
      }
    }
    std::vector<v1::Application> placed_here;
    RETURN_IF_ERROR(store_.List("", [&](const v1::Application& app) {
      const auto phase = app.status().phase();
      if (phase != v1::APPLICATION_PHASE_DEPLOYING && phase != v1::APPLICATION_PHASE_RUNNING &&
          phase != v1::APPLICATION_PHASE_DEGRADED) {
        return true;
      }
      for (const auto& p : app.status().placements()) {
        if (p.cluster() == cluster) {
          placed_here.push_back(app);
          break;
        }
      }
      return true;
    }));
    for (v1::Application& app : placed_here) {
      const std::string& name = app.metadata().name();
      const v1::ApplicationStatus before = app.status();
      auto app_pods = reported.find(name);
      std::vector<std::string> failures;
      for (auto& p : *app.mutable_status()->mutable_placements()) {
        if (p.cluster() != cluster) continue;
        const PodReport* pod = nullptr;
        if (app_pods != reported.end()) {
          auto it = app_pods->second.find(p.pod());
          if (it != app_pods->second.end()) pod = it->second;
        }
        p.set_ready(pod != nullptr && pod->phase == lms::v1::POD_PHASE_RUNNING);
        // A job's pod that succeeded stays done, also once it is removed.
        if (pod != nullptr && pod->phase == lms::v1::POD_PHASE_SUCCEEDED) p.set_succeeded(true);
        // Touches status.jobs only, not the placements walked here.
        if (pod != nullptr && pod->phase == lms::v1::POD_PHASE_FAILED) {
          NoteFailedJobPod(app, p.service(), p.pod());
        }
        if (pod != nullptr && !pod->node.empty()) p.set_node(pod->node);
        p.clear_addresses();
        if (p.ready()) {
          for (const std::string& address : pod->addresses) p.add_addresses(address);
        }
        if (pod != nullptr && pod->phase == lms::v1::POD_PHASE_FAILED) {
          failures.push_back(absl::StrCat("pod ", p.pod(), " of ", p.service(), " failed on ",
                                          cluster, "/", p.node(), pod->message.empty() ? "" : ": ",
                                          pod->message));
        }
      }
      if (failures.empty()) {
        auto it = pod_failures_.find(name);
        if (it != pod_failures_.end()) {
          it->second.erase(cluster);
          if (it->second.empty()) pod_failures_.erase(it);
        }
      } else {
        pod_failures_[name][cluster] = std::move(failures);
      }
      FoldPodStatus(app);
      if (MessageDifferencer::Equals(before, app.status())) continue;
      RETURN_IF_ERROR(CommitModified(app));
      ++changed;
    }
  }
  if (changed > 0) Notify();
  return changed;
}

absl::StatusOr<v1::GetOperationResponse> ApplicationManager::GetOperation(
    const v1::GetOperationRequest& request) const {
  if (request.id().empty()) return InvalidFieldError("id", "required");
  ASSIGN_OR_RETURN(std::optional<common::v1::Operation> op, store_.GetOperation(request.id()));
  if (!op) return absl::NotFoundError(absl::StrCat("id: no operation \"", request.id(), "\""));
  v1::GetOperationResponse response;
  *response.mutable_operation() = *std::move(op);
  return response;
}

absl::StatusOr<v1::ListOperationsResponse> ApplicationManager::ListOperations(
    const v1::ListOperationsRequest& request) const {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  const size_t page = PageSize(request.page_size());
  v1::ListOperationsResponse response;
  std::string last_position;
  // Newest first; reads one page (and one more to know there is a next).
  // Tokens are the store's positions.
  absl::Status listed = store_.ListOperations(
      request.page_token(), [&](const std::string& position, const common::v1::Operation& op) {
        if (!request.kind().empty() && op.kind() != request.kind()) return true;
        if (!request.resource().empty() && op.resource() != request.resource()) return true;
        if (request.active_only() && op.done()) return true;
        if (static_cast<size_t>(response.operations_size()) == page) {
          response.set_next_page_token(last_position);
          return false;
        }
        *response.add_operations() = op;
        last_position = position;
        return true;
      });
  if (absl::IsInvalidArgument(listed)) {
    return InvalidFieldError("page_token", "not a token this server issued");
  }
  RETURN_IF_ERROR(listed);
  return response;
}

absl::Status ApplicationManager::RecordOperation(const common::v1::Operation& operation) {
  RETURN_IF_ERROR(store_.PutOperation(operation));
  Notify();
  return absl::OkStatus();
}

absl::StatusOr<ApplicationSnapshot> ApplicationManager::Snapshot(const std::string& name) const {
  absl::MutexLock lock(&write_mu_);
  ApplicationSnapshot snapshot;
  ASSIGN_OR_RETURN(snapshot.revision, store_.LastRevision());
  if (!name.empty()) {
    ASSIGN_OR_RETURN(std::optional<v1::Application> app, store_.Get(name));
    if (app) snapshot.applications.push_back(*std::move(app));
    return snapshot;
  }
  RETURN_IF_ERROR(store_.List("", [&](const v1::Application& app) {
    snapshot.applications.push_back(app);
    return true;
  }));
  return snapshot;
}

absl::StatusOr<std::vector<v1::WatchApplicationResponse>> ApplicationManager::ReadChanges(
    const std::string& name, int64_t after, size_t limit) const {
  if (after < 0) return InvalidFieldError("from_revision", "must not be negative");
  ASSIGN_OR_RETURN(int64_t oldest, store_.OldestEventRevision());
  if (after + 1 < oldest) {
    return absl::OutOfRangeError(absl::StrCat("from_revision: changes before revision ", oldest,
                                              " are no longer kept; re-read and watch from the "
                                              "current state"));
  }
  std::vector<v1::WatchApplicationResponse> out;
  RETURN_IF_ERROR(store_.ReadEvents(after, [&](const v1::WatchApplicationResponse& event) {
    if (name.empty() || event.application().metadata().name() == name) out.push_back(event);
    return out.size() < limit;
  }));
  return out;
}

absl::StatusOr<int64_t> ApplicationManager::CurrentRevision() const {
  return store_.LastRevision();
}

}  // namespace codeco::acm
