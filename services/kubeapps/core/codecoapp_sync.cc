#include "kubeapps/core/codecoapp_sync.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codeco/common/logging.h"
#include "codeco/common/status.h"
#include "codeco/common/url.h"

namespace codeco::kubeapps {
namespace {

using codeco::acm::v1::Application;
using codeco::common::v1::WatchEventType;
using json = nlohmann::json;
using kube::JsonMember;
using kube::JsonString;

const json& Metadata(const json& object) { return JsonMember(object, "metadata"); }

int64_t Generation(const json& object) {
  const json& g = JsonMember(Metadata(object), "generation");
  return g.is_number_integer() ? g.get<int64_t>() : 0;
}

int64_t ObservedGeneration(const json& object) {
  const json& g = JsonMember(JsonMember(object, "status"), "observedGeneration");
  return g.is_number_integer() ? g.get<int64_t>() : 0;
}

bool Deleting(const json& object) {
  return !JsonString(Metadata(object), "deletionTimestamp").empty();
}

json Finalizers(const json& object) {
  const json& f = JsonMember(Metadata(object), "finalizers");
  return f.is_array() ? f : json::array();
}

bool HasFinalizer(const json& object) {
  for (const json& f : Finalizers(object)) {
    if (f.is_string() && f.get<std::string>() == kFinalizer) return true;
  }
  return false;
}

// The reason of the object's Accepted condition ("" when it has none).
std::string AcceptedReason(const json& object) {
  const json& conditions = JsonMember(JsonMember(object, "status"), "conditions");
  return conditions.is_array() && !conditions.empty() ? JsonString(conditions[0], "reason") : "";
}

// Whether ACM has answered for the object's current generation: it applied
// it or refused it (a name conflict is not ACM's answer).
bool Settled(const json& object) {
  const int64_t generation = Generation(object);
  const std::string reason = AcceptedReason(object);
  return generation != 0 && ObservedGeneration(object) == generation &&
         (reason == "Applied" || reason == "Invalid");
}

// The object's status, or an empty object when it has none.
json StatusOf(const json& object) {
  const json& status = JsonMember(object, "status");
  return status.is_object() ? status : json::object();
}

// The application ACM files the object under: as written in its status, else
// spec.appName, else metadata.name (ACM's own rule).
std::string ApplicationOf(const json& object) {
  std::string app = JsonString(JsonMember(object, "status"), "application");
  if (app.empty()) app = JsonString(JsonMember(object, "spec"), "appName");
  if (app.empty()) app = JsonString(Metadata(object), "name");
  return app;
}

std::string PhaseName(codeco::acm::v1::ApplicationPhase phase) {
  switch (phase) {
    case codeco::acm::v1::APPLICATION_PHASE_PENDING:
      return "Pending";
    case codeco::acm::v1::APPLICATION_PHASE_PLACING:
      return "Placing";
    case codeco::acm::v1::APPLICATION_PHASE_DEPLOYING:
      return "Deploying";
    case codeco::acm::v1::APPLICATION_PHASE_RUNNING:
      return "Running";
    case codeco::acm::v1::APPLICATION_PHASE_DEGRADED:
      return "Degraded";
    case codeco::acm::v1::APPLICATION_PHASE_MIGRATING:
      return "Migrating";
    case codeco::acm::v1::APPLICATION_PHASE_FAILED:
      return "Failed";
    case codeco::acm::v1::APPLICATION_PHASE_DELETING:
      return "Deleting";
    case codeco::acm::v1::APPLICATION_PHASE_SUCCEEDED:
      return "Succeeded";
    default:
      return "Unknown";
  }
}

std::string LevelName(codeco::acm::v1::StatusLevel level) {
  switch (level) {
    case codeco::acm::v1::STATUS_LEVEL_OK:
      return "OK";
    case codeco::acm::v1::STATUS_LEVEL_WARNING:
      return "WARNING";
    case codeco::acm::v1::STATUS_LEVEL_ERROR:
      return "ERROR";
    default:
      return "";
  }
}

// Errors after which trying the same generation again cannot help: ACM
// refused the document.
bool Refusal(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument ||
         s.code() == absl::StatusCode::kFailedPrecondition ||
         s.code() == absl::StatusCode::kOutOfRange;
}

// `s` with what failed in front of its message.
absl::Status Annotate(const absl::Status& s, const std::string& what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// The Accepted condition, Kubernetes' way.
json Condition(bool accepted, const std::string& reason, const std::string& message,
               int64_t generation, absl::Time now) {
  return {{"type", "Accepted"},
          {"status", accepted ? "True" : "False"},
          {"reason", reason},
          {"message", message},
          {"observedGeneration", generation},
          {"lastTransitionTime", kube::FormatKubeTime(now)}};
}

}  // namespace

std::vector<CodecoAppResource> DefaultCodecoAppResources() {
  return {{"codeco.io", "v1", "codecoapps"}, {"codeco.he-codeco.eu", "v1alpha1", "codecoapps"}};
}

absl::StatusOr<CodecoAppResource> ParseCodecoAppResource(const std::string& text,
                                                         const std::string& field) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  if (parts.size() < 2 || parts.size() > 3) {
    return InvalidFieldError(field, absl::StrCat("\"", text, "\" is not group/version[/plural]"));
  }
  for (const std::string& p : parts) {
    if (p.empty() || p.size() > 253 ||
        p.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos) {
      return InvalidFieldError(field,
                               absl::StrCat("\"", text,
                                            "\": each part must be lower-case letters, digits, "
                                            "'-' or '.'"));
    }
  }
  CodecoAppResource r{parts[0], parts[1]};
  if (parts.size() == 3) r.plural = parts[2];
  return r;
}

std::string CamOf(const json& object) {
  json cam = {{"apiVersion", JsonString(object, "apiVersion")},
              {"kind", JsonString(object, "kind")},
              {"metadata", {{"name", JsonString(Metadata(object), "name")}}},
              {"spec", JsonMember(object, "spec")}};
  const json& labels = JsonMember(Metadata(object), "labels");
  if (labels.is_object() && !labels.empty()) cam["metadata"]["labels"] = labels;
  return cam.dump();
}

json StatusFromApplication(const Application& app, const std::string& codeco_app) {
  std::set<std::string> declared;
  for (const auto& s : app.spec().services()) {
    if (s.codeco_app().empty() || s.codeco_app() == codeco_app) declared.insert(s.name());
  }
  json placements = json::array();
  for (const auto& p : app.status().placements()) {
    if (!declared.count(p.service())) continue;
    placements.push_back({{"service", p.service()},
                          {"cluster", p.cluster()},
                          {"node", p.node()},
                          {"ready", p.ready()}});
  }
  return {{"application", app.metadata().name()},     {"specRevision", app.spec_revision()},
          {"phase", PhaseName(app.status().phase())}, {"status", LevelName(app.status().status())},
          {"errorMsg", app.status().error_msg()},     {"placements", std::move(placements)}};
}

CodecoAppSync::CodecoAppSync(kube::KubeApi* kube_api, AcmApplications* acm, Clock* clock,
                             kube::WaitFn wait, CodecoAppSyncOptions options)
    : kube_(kube_api, clock, std::move(wait), options.kube),
      acm_(acm),
      clock_(clock),
      options_(std::move(options)),
      retry_(options_.retry, static_cast<uint64_t>(absl::ToUnixNanos(clock->Now()))) {}

std::string CodecoAppSync::CollectionPath(size_t resource) const {
  const CodecoAppResource& r = options_.resources[resource];
  return absl::StrCat("/apis/", r.group, "/", r.version, options_.ns.empty() ? "" : "/namespaces/",
                      PercentEncode(options_.ns), "/", r.plural);
}

std::string CodecoAppSync::ObjectPath(const Key& key) const {
  const auto& [resource, ns, name] = key;
  const CodecoAppResource& r = options_.resources[resource];
  return absl::StrCat("/apis/", r.group, "/", r.version, "/namespaces/", PercentEncode(ns), "/",
                      r.plural, "/", PercentEncode(name));
}

std::string CodecoAppSync::Describe(const Key& key) const {
  const auto& [resource, ns, name] = key;
  const CodecoAppResource& r = options_.resources[resource];
  return absl::StrCat(r.plural, ".", r.group, " ", ns, "/", name);
}

void CodecoAppSync::Observe(size_t resource, const json& object, bool gone) {
  const json& meta = Metadata(object);
  const Key key{resource, JsonString(meta, "namespace"), JsonString(meta, "name")};
  if (std::get<2>(key).empty()) return;
  absl::MutexLock lock(&mu_);
  Pending& p = pending_[key];
  p.object = gone ? json() : object;
  p.due = clock_->Now();
  p.failures = 0;
  ++wakeups_;
}

void CodecoAppSync::Follow(size_t resource, const std::function<bool()>& cancelled) {
  const std::string collection = CollectionPath(resource);
  int failures = 0;
  while (!(cancelled && cancelled())) {
    // List, then watch from the list's version; the list also shows which
    // objects went while no watch was open.
    std::set<Key> listed;
    absl::StatusOr<std::string> version = kube_.ListAll(collection, [&](const json& item) {
      const json& meta = Metadata(item);
      listed.insert({resource, JsonString(meta, "namespace"), JsonString(meta, "name")});
      Observe(resource, item, false);
      return absl::OkStatus();
    });
    absl::Status status = version.status();
    std::vector<json> vanished;
    // Listed, or its CRD is not installed (yet): nothing to forward from it,
    // and no reason to hold the other resources back.
    if (version.ok() || absl::IsNotFound(status)) {
      absl::MutexLock lock(&mu_);
      if (listed_.insert(resource).second) ++wakeups_;
      for (const auto& [key, known] : known_) {
        if (version.ok() && std::get<0>(key) == resource && !listed.count(key)) {
          vanished.push_back(known.object);  // went while no watch was open
        }
      }
    }
    if (version.ok()) {
      failures = 0;
      for (const json& object : vanished) Observe(resource, object, true);
      status = kube_.Watch(
          collection, "", *version,
          [&](const json& object, WatchEventType type) {
            Observe(resource, object, type == codeco::common::v1::WATCH_EVENT_TYPE_DELETED);
            return absl::OkStatus();
          },
          cancelled);
    }
    if (cancelled && cancelled()) return;
    if (absl::IsOutOfRange(status)) {
      log::Info("kubeapps: list again",
                {{"resource", collection}, {"reason", std::string(status.message())}});
      continue;
    }
    ++failures;
    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      delay = retry_.Delay(std::min(failures, 30));
    }
    log::Warn("kubeapps: cannot follow CodecoApp objects; trying again",
              {{"resource", collection},
               {"error", status.ok() ? "the watch ended"
                         : absl::IsNotFound(status)
                             ? "the CRD is not installed: " + std::string(status.message())
                             : std::string(status.message())},
               {"retry_in", absl::FormatDuration(delay)}});
    if (!kube_.WaitUnlessCancelled(delay, cancelled)) return;
  }
}

bool CodecoAppSync::OwnsName(const Key& key) {
  absl::MutexLock lock(&mu_);
  auto self = known_.find(key);
  if (self == known_.end()) return false;
  auto rank = [](const json& object, const Key& k) {
    return std::make_tuple(JsonString(Metadata(object), "creationTimestamp"),
                           JsonString(Metadata(object), "uid"), k);
  };
  const auto mine = rank(self->second.object, key);
  for (const auto& [other, known] : known_) {
    if (other == key || std::get<2>(other) != std::get<2>(key)) continue;
    if (rank(known.object, other) < mine) return false;
  }
  return true;
}

void CodecoAppSync::ReconcileDue() {
  while (true) {
    Key key;
    json object;
    {
      absl::MutexLock lock(&mu_);
      if (listed_.size() < options_.resources.size()) return;
      const absl::Time now = clock_->Now();
      auto due = std::find_if(pending_.begin(), pending_.end(),
                              [&](const auto& entry) { return entry.second.due <= now; });
      if (due == pending_.end()) break;
      key = due->first;
      object = due->second.object;
      // Known before the reconcile, so a name claim sees every object.
      if (object.is_null()) {
        auto gone = known_.find(key);
        if (gone != known_.end()) {
          // Another object may have waited for this one's name.
          for (const auto& [other, known] : known_) {
            if (other != key && std::get<2>(other) == std::get<2>(key) && !pending_.count(other)) {
              pending_[other] = {known.object, now, 0};
            }
          }
          known_.erase(gone);
        }
      } else {
        known_[key].object = object;
      }
      stats_.objects = static_cast<int64_t>(known_.size());
    }
    absl::Status status = Reconcile(key, object);
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(key);
    if (it == pending_.end()) continue;
    if (it->second.object != object) continue;  // a newer state arrived: due now
    if (status.ok()) {
      pending_.erase(it);
      continue;
    }
    ++stats_.retries;
    it->second.failures = std::min(it->second.failures + 1, 30);
    const absl::Duration delay = retry_.Delay(it->second.failures);
    it->second.due = clock_->Now() + delay;
    log::Warn("kubeapps: reconcile failed; trying again",
              {{"object", Describe(key)},
               {"error", std::string(status.message())},
               {"retry_in", absl::FormatDuration(delay)}});
  }
  bool refresh = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    if (now >= next_refresh_) {
      next_refresh_ = now + options_.status_interval;
      refresh = true;
    }
  }
  if (refresh) RefreshStatuses();
}

void CodecoAppSync::Work(const std::function<bool()>& cancelled) {
  while (!(cancelled && cancelled())) {
    int64_t seen;
    {
      absl::MutexLock lock(&mu_);
      seen = wakeups_;
    }
    ReconcileDue();
    // Wakes for a new object at once, else every 100 ms for retries and
    // status refreshes that came due (they follow the injected clock).
    absl::MutexLock lock(&mu_);
    auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wakeups_ != seen; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(100));
  }
}

CodecoAppSyncStats CodecoAppSync::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status CodecoAppSync::Reconcile(const Key& key, const json& object) {
  if (object.is_null()) {
    // Gone from the API without passing through our finalizer (it was
    // removed by hand, or never added): nothing is left to hold it by.
    return absl::OkStatus();
  }
  if (Deleting(object)) return ReconcileDeleting(key, object);
  return ReconcileLive(key, object);
}

absl::Status CodecoAppSync::ReconcileDeleting(const Key& key, const json& object) {
  if (!HasFinalizer(object)) return absl::OkStatus();
  const std::string name = JsonString(Metadata(object), "name");
  const std::string application = ApplicationOf(object);
  bool owner = OwnsName(key);
  if (owner) {
    absl::Status deleted = acm_->Delete(
        application, name, absl::StrCat(JsonString(Metadata(object), "uid"), "/delete"));
    if (!deleted.ok() && !absl::IsNotFound(deleted)) {
      return Annotate(deleted,
                      absl::StrCat("ACM DeleteApplication ", application, " (", name, ")"));
    }
    absl::MutexLock lock(&mu_);
    ++stats_.deleted;
  }
  json rest = json::array();
  for (const json& f : Finalizers(object)) {
    if (!(f.is_string() && f.get<std::string>() == kFinalizer)) rest.push_back(f);
  }
  RETURN_IF_ERROR(PatchFinalizers(key, object, rest).status());
  log::Info("kubeapps: CodecoApp deleted",
            {{"object", Describe(key)},
             {"application", application},
             {"acm", owner ? "services removed" : "never forwarded"}});
  return absl::OkStatus();
}

absl::Status CodecoAppSync::ReconcileLive(const Key& key, json object) {
  const std::string name = JsonString(Metadata(object), "name");
  const int64_t generation = Generation(object);
  const absl::Time now = clock_->Now();
  if (!OwnsName(key)) {
    json status = StatusOf(object);
    const std::string message = absl::StrCat(
        "another CodecoApp named ", name,
        " (in another namespace or resource, created earlier) is forwarded to ACM, which names "
        "CodecoApps by metadata.name alone; rename this one");
    if (AcceptedReason(object) == "NameConflict" && ObservedGeneration(object) == generation) {
      return absl::OkStatus();  // already said
    }
    status["observedGeneration"] = generation;
    status["conditions"] =
        json::array({Condition(false, "NameConflict", message, generation, now)});
    return WriteStatus(key, std::move(status));
  }
  if (!HasFinalizer(object)) {
    json finalizers = Finalizers(object);
    finalizers.push_back(kFinalizer);
    ASSIGN_OR_RETURN(object, PatchFinalizers(key, object, finalizers));
  }
  bool settled = Settled(object);
  {
    absl::MutexLock lock(&mu_);
    // This process applied this generation and wrote its status; the
    // object seen may be older than that write (an event still on its way).
    settled = settled || (generation != 0 && known_[key].settled_generation == generation);
  }
  if (settled) {
    absl::MutexLock lock(&mu_);
    Known& known = known_[key];
    known.object = object;
    // Applied once (a later generation may have been refused): ACM's state
    // of what it holds keeps flowing into the status.
    const std::string applied = JsonString(JsonMember(object, "status"), "application");
    if (known.application.empty() && !applied.empty()) known.application = applied;
    if (known.status.is_null()) known.status = JsonMember(object, "status");
    return absl::OkStatus();
  }
  const std::string request_id = absl::StrCat(JsonString(Metadata(object), "uid"), "/", generation);
  absl::StatusOr<codeco::acm::v1::ApplyApplicationResponse> applied =
      acm_->Apply(CamOf(object), request_id);
  json status = json::object();
  if (applied.ok()) {
    status = StatusFromApplication(applied->application(), name);
    json warnings = json::array();
    for (const std::string& w : applied->warnings()) warnings.push_back(w);
    status["warnings"] = std::move(warnings);
    status["conditions"] = json::array({Condition(
        true, "Applied",
        absl::StrCat("ACM stored it as spec revision ", applied->application().spec_revision(),
                     " of application ", applied->application().metadata().name()),
        generation, now)});
    {
      absl::MutexLock lock(&mu_);
      ++stats_.applied;
      known_[key].application = applied->application().metadata().name();
    }
    log::Info("kubeapps: CodecoApp applied",
              {{"object", Describe(key)},
               {"application", applied->application().metadata().name()},
               {"spec_revision", absl::StrCat(applied->application().spec_revision())}});
  } else if (Refusal(applied.status())) {
    status = StatusOf(object);
    status["conditions"] = json::array(
        {Condition(false, "Invalid", std::string(applied.status().message()), generation, now)});
    {
      absl::MutexLock lock(&mu_);
      ++stats_.refused;
    }
    log::Warn("kubeapps: ACM refused a CodecoApp",
              {{"object", Describe(key)}, {"error", std::string(applied.status().message())}});
  } else {
    return Annotate(applied.status(), absl::StrCat("ACM ApplyApplication of ", Describe(key)));
  }
  status["observedGeneration"] = generation;
  RETURN_IF_ERROR(WriteStatus(key, std::move(status)));
  absl::MutexLock lock(&mu_);
  known_[key].settled_generation = generation;
  return absl::OkStatus();
}

absl::StatusOr<json> CodecoAppSync::PatchFinalizers(const Key& key, const json& object,
                                                    const json& finalizers) {
  // The resourceVersion makes the patch conditional: a 409 means someone
  // changed the list meanwhile, and the newer object is on its way.
  const json patch = {{"metadata",
                       {{"finalizers", finalizers},
                        {"resourceVersion", JsonString(Metadata(object), "resourceVersion")}}}};
  absl::StatusOr<json> stored = MergePatch(ObjectPath(key), patch);
  if (absl::IsNotFound(stored.status())) return object;  // gone already
  return stored;
}

absl::StatusOr<json> CodecoAppSync::MergePatch(const std::string& path, const json& patch) {
  return kube_.Send("PATCH", path, patch.dump(), kube_.options().call_timeout, "PATCH " + path);
}

absl::Status CodecoAppSync::WriteStatus(const Key& key, json status) {
  {
    absl::MutexLock lock(&mu_);
    auto it = known_.find(key);
    if (it != known_.end() && it->second.status == status) return absl::OkStatus();
  }
  absl::StatusOr<json> stored = MergePatch(ObjectPath(key) + "/status", {{"status", status}});
  if (absl::IsNotFound(stored.status())) return absl::OkStatus();
  RETURN_IF_ERROR(stored.status());
  absl::MutexLock lock(&mu_);
  ++stats_.status_writes;
  auto it = known_.find(key);
  if (it != known_.end()) it->second.status = JsonMember(*stored, "status");
  return absl::OkStatus();
}

void CodecoAppSync::RefreshStatuses() {
  std::vector<std::tuple<Key, std::string, json>> accepted;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, known] : known_) {
      if (known.application.empty() || Deleting(known.object)) continue;
      if (pending_.count(key)) continue;  // its reconcile writes the status
      accepted.emplace_back(key, known.application, known.status);
    }
  }
  std::map<std::string, absl::StatusOr<Application>> apps;
  for (const auto& [key, application, last] : accepted) {
    auto it = apps.find(application);
    if (it == apps.end()) it = apps.emplace(application, acm_->Get(application)).first;
    if (!it->second.ok()) {
      if (!absl::IsNotFound(it->second.status())) {
        log::Warn(
            "kubeapps: cannot read an application from ACM",
            {{"application", application}, {"error", std::string(it->second.status().message())}});
        continue;
      }
    }
    json status = last.is_object() ? last : json::object();
    if (it->second.ok()) {
      const json from_acm = StatusFromApplication(*it->second, std::get<2>(key));
      for (const auto& [field, value] : from_acm.items()) status[field] = value;
    } else {
      status["phase"] = "Deleted";
      status["placements"] = json::array();
      status["errorMsg"] = "ACM has no application " + application;
    }
    absl::Status written = WriteStatus(key, std::move(status));
    if (!written.ok()) {
      log::Warn("kubeapps: cannot write a CodecoApp's status",
                {{"object", Describe(key)}, {"error", std::string(written.message())}});
    }
  }
}

}  // namespace codeco::kubeapps
