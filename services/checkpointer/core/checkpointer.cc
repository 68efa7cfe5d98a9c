#include "checkpointer/core/checkpointer.h"

#include <algorithm>
#include <system_error>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpointer/core/stream_pipe.h"
#include "checkpointer/image/registry_client.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/util/json_util.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using common::v1::Operation;

constexpr char kOperationPrefix[] = "op/";
constexpr char kJobPrefix[] = "job/";
constexpr char kRequestPrefix[] = "req/";

// The steps an operation goes through, in order; an operation's phase text
// starts with its step's name, which is how a restart finds where it was.
enum class Step { kPending, kCheckpointing, kBuilding, kPushing, kRestoring, kCuttingOver };

constexpr struct {
  Step step;
  const char* name;
} kSteps[] = {{Step::kCheckpointing, "checkpointing"}, {Step::kBuilding, "building"},
              {Step::kPushing, "pushing"},             {Step::kRestoring, "pulling"},
              {Step::kRestoring, "restoring"},         {Step::kRestoring, "verifying"},
              {Step::kCuttingOver, "cutting over"}};

Step StepOf(const std::string& phase) {
  for (const auto& s : kSteps) {
    if (absl::StartsWith(phase, s.name)) return s.step;
  }
  return Step::kPending;
}

// How the phase of a restore into an existing pod ends while it waits for
// that pod to run.
constexpr char kAwaitingPodPhase[] = ": waiting for it to run";

// True when an operation stored in `phase` may have begun loading state
// into its restored pod: from "restoring" on, except while it awaited the pod.
bool MayHaveLoaded(const std::string& phase) {
  const Step step = StepOf(phase);
  if (step < Step::kRestoring) return false;
  return !absl::StartsWith(phase, "pulling") && !absl::EndsWith(phase, kAwaitingPodPhase);
}

google::protobuf::Timestamp Stamp(absl::Time t) { return ToProtoTimestamp(t); }

void SetError(const absl::Status& status, common::v1::Error* error) {
  error->set_code(static_cast<common::v1::ErrorCode>(status.code()));
  error->set_message(std::string(status.message()));
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    const std::string message(status.message());
    const size_t colon = message.find(": ");
    if (colon != std::string::npos && message.find(' ') > colon) {
      error->set_field_path(message.substr(0, colon));
    }
  }
}

// An image tag or checkpoint id: [a-z0-9][a-z0-9._-]*, at most 128.
bool IsTag(const std::string& tag) {
  if (tag.empty() || tag.size() > 128) return false;
  for (size_t i = 0; i < tag.size(); ++i) {
    const char c = tag[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || (i > 0 && (c == '.' || c == '-'));
    if (!ok) return false;
  }
  return true;
}

// Adds to `errors` what is wrong with `value` as a Kubernetes object name
// (a lowercase DNS subdomain of at most 253 characters) at `field`.
void CheckName(const std::string& value, const std::string& field, bool required,
               FieldErrors& errors) {
  if (value.empty()) {
    if (required) errors.Add(field, "is required");
    return;
  }
  if (value.size() > 253) return errors.Add(field, "is longer than 253 characters");
  for (char c : value) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
      return errors.Add(field, absl::StrCat("\"", value.substr(0, 64),
                                            "\" is not a lowercase DNS name"));
    }
  }
}

// Adds to `errors` what is wrong with `repository` ("registry/path", no tag)
// as target_repository; empty is fine when there is a default.
void CheckRepository(const std::string& repository, const std::string& default_repository,
                     FieldErrors& errors) {
  if (repository.empty()) {
    if (default_repository.empty()) {
      errors.Add("target_repository", "is required (no checkpointer.repository is configured)");
    }
    return;
  }
  absl::StatusOr<ImageReference> parsed =
      ParseImageReference(repository, "target_repository", /*repository_only=*/true);
  if (!parsed.ok()) {
    errors.Add("target_repository", std::string(parsed.status().message()));
  } else if (!parsed->tag.empty() || !parsed->digest.empty()) {
    errors.Add("target_repository", "names a repository, without a tag or digest");
  }
}

// Bytes a streamed restore buffers between the pull and the driver.
constexpr size_t kStreamBufferBytes = size_t{64} << 20;

// Pod annotations of a restore: the image it came from and the operation
// that made it (a resumed operation deletes only a pod it made itself).
constexpr char kRestoredFromAnnotation[] = "checkpointer.codeco.io/restored-from";
constexpr char kRestoredByAnnotation[] = "checkpointer.codeco.io/restored-by";

int64_t Nanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

// One step's timing in PhaseTimings.
struct TimingField {
  int64_t (v1::PhaseTimings::*get)() const;
  void (v1::PhaseTimings::*set)(int64_t);
};
constexpr TimingField kCheckpointTime{&v1::PhaseTimings::checkpoint_ns,
                                      &v1::PhaseTimings::set_checkpoint_ns};
constexpr TimingField kBuildTime{&v1::PhaseTimings::build_ns, &v1::PhaseTimings::set_build_ns};
constexpr TimingField kPushTime{&v1::PhaseTimings::push_ns, &v1::PhaseTimings::set_push_ns};
constexpr TimingField kPullTime{&v1::PhaseTimings::pull_ns, &v1::PhaseTimings::set_pull_ns};
constexpr TimingField kRestoreTime{&v1::PhaseTimings::restore_ns,
                                   &v1::PhaseTimings::set_restore_ns};
constexpr TimingField kVerifyTime{&v1::PhaseTimings::verify_ns, &v1::PhaseTimings::set_verify_ns};
constexpr TimingField kCutoverTime{&v1::PhaseTimings::cutover_ns,
                                   &v1::PhaseTimings::set_cutover_ns};

}  // namespace

// One accepted operation on its way through the workers.
struct Checkpointer::Job {
  std::string operation_id;
  std::string kind;
  google::protobuf::Any request;
  bool resumed = false;
};

// The state of one operation while it runs: its stored records, kept in
// step with the store after every change.
class Checkpointer::Run {
 public:
  Run(Checkpointer& owner, Job& job, Operation op, v1::Checkpoint checkpoint)
      : owner_(owner), job_(job), op_(std::move(op)), ck_(std::move(checkpoint)),
        started_(owner.clock_.Now()),
        work_(owner.options_.work_directory / ck_.id()),
        resumed_phase_(job.resumed ? op_.phase() : "") {}

  absl::Status Create(const v1::CreateCheckpointRequest& request);
  absl::Status Restore(const v1::RestoreCheckpointRequest& request);
  absl::Status Migrate(const v1::MigrateContainerRequest& request);
  void Finish(const absl::Status& status);

 private:
  // Records `phase` and `percent` (never going back) and stores both records.
  void Phase(const std::string& phase, int percent) {
    op_.set_phase(phase);
    op_.set_progress_percent(std::max(op_.progress_percent(), percent));
    Store();
  }
  void Store() {
    const absl::Time now = owner_.clock_.Now();
    *op_.mutable_update_time() = Stamp(now);
    *ck_.mutable_update_time() = Stamp(now);
    absl::Status saved = owner_.Save(op_, ck_);
    if (!saved.ok()) {
      log::Warn("checkpointer: storing an operation failed",
                {{"operation", op_.id()}, {"error", saved.ToString()}});
    }
  }
  // Runs `work`, adding the time it took to the timing `field`.
  template <typename F>
  auto Timed(const TimingField& field, F work) {
    const absl::Time start = owner_.clock_.Now();
    auto result = work();
    v1::PhaseTimings& t = *ck_.mutable_timings();
    (t.*field.set)((t.*field.get)() + Nanos(owner_.clock_.Now() - start));
    return result;
  }

  // The source's pod; INVALID_ARGUMENT naming source.pod or source.node
  // when there is none or it runs elsewhere.
  absl::StatusOr<lms::v1::Pod> SourcePod(const v1::ContainerRef& ref);
  // FAILED_PRECONDITION unless `pod` runs.
  static absl::Status CheckRunning(const lms::v1::Pod& pod);
  absl::StatusOr<StateDump> TakeState(const ContainerTarget& source, StateDriver& driver);
  // Packs `dump` into an image and pushes it under `tag` of the record's
  // repository; with `restore`, runs it as soon as the first layer is
  // published, alongside the rest of the push (the push gives up when the
  // restore fails). Records timings, size and the image's digest.
  absl::Status PushImage(StateDump& dump, const ContainerTarget& source,
                         const lms::v1::Pod& pod, const std::string& tag,
                         const std::function<absl::Status()>& restore);
  // The pod a restore of `request` creates, from the image's pod template;
  // sets `container` to the container restored.
  absl::StatusOr<lms::v1::Pod> PodToRestore(const CheckpointMetadata& metadata,
                                            const v1::RestoreCheckpointRequest& request,
                                            std::string& container);
  // Restores the image of `request` on this cluster: into a pod it creates,
  // or, with restore_into_existing, into the pod named there (`pod_field` is
  // that name's field in the caller's request: pod or target_pod).
  absl::StatusOr<v1::Checkpoint> RestoreHere(const v1::RestoreCheckpointRequest& request,
                                             const std::string& pod_field, int from_percent,
                                             int to_percent);
  // The pod `name` a restore_into_existing loads into, once it runs on
  // `node` (polled for at most options.existing_pod_timeout): it must exist
  // (FAILED_PRECONDITION naming `pod_field`), be bound to `node`
  // (INVALID_ARGUMENT naming target_node) and carry `container`.
  absl::StatusOr<lms::v1::Pod> AwaitPodToRestoreInto(const std::string& name,
                                                     const std::string& pod_field,
                                                     const std::string& node,
                                                     const std::string& container);
  absl::Status CutOver(const ContainerTarget& source, StateDriver& driver);
  void ResumeSource(const ContainerTarget& source, StateDriver& driver);
  void RemoveWork() {
    std::error_code error;
    fs::remove_all(work_, error);
  }

  Checkpointer& owner_;
  Job& job_;
  Operation op_;
  v1::Checkpoint ck_;
  const absl::Time started_;
  const fs::path work_;
  // The phase the run a restart resumes had got to ("" for a first run).
  const std::string resumed_phase_;
  std::atomic<bool> push_done_{false};  // set by the push thread once the image is complete
};

absl::StatusOr<lms::v1::Pod> Checkpointer::Run::SourcePod(const v1::ContainerRef& ref) {
  absl::StatusOr<lms::v1::Pod> pod = owner_.lms_.GetPod(ref.pod());
  if (absl::IsNotFound(pod.status())) {
    return InvalidFieldError("source.pod", absl::StrCat("no pod \"", ref.pod(), "\" in cluster ",
                                                        owner_.options_.cluster));
  }
  RETURN_IF_ERROR(pod.status());
  if (!ref.node().empty() && ref.node() != pod->node_name()) {
    return InvalidFieldError("source.node", absl::StrCat("pod ", ref.pod(), " runs on ",
                                                         pod->node_name(), ", not ", ref.node()));
  }
  return pod;
}

absl::Status Checkpointer::Run::CheckRunning(const lms::v1::Pod& pod) {
  if (pod.phase() == lms::v1::POD_PHASE_RUNNING) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("pod ", pod.name(), " is not running (",
                                                    lms::v1::PodPhase_Name(pod.phase()), ")"));
}

absl::StatusOr<StateDump> Checkpointer::Run::TakeState(const ContainerTarget& source,
                                                       StateDriver& driver) {
  ck_.set_driver(driver.name());
  ck_.mutable_source()->set_node(source.node);
  ck_.mutable_source()->set_container(source.container);
  ck_.set_phase(v1::CHECKPOINT_PHASE_CHECKPOINTING);
  Phase(absl::StrCat("checkpointing ", source.pod, "/", source.container, " (", driver.name(),
                     ")"),
        5);
  RemoveWork();
  absl::StatusOr<StateDump> dump = Timed(kCheckpointTime, [&] {
    return driver.Checkpoint(source, work_ / "state");
  });
  if (!dump.ok()) {
    return absl::Status(dump.status().code(),
                        absl::StrCat("checkpointing ", source.pod, "/", source.container, " with ",
                                     driver.name(), ": ", dump.status().message()));
  }
  ck_.set_state_bytes(dump->bytes);
  ck_.mutable_facts()->clear();
  for (const auto& [name, value] : dump->facts) (*ck_.mutable_facts())[name] = value;
  if (dump->fence_expires != absl::InfiniteFuture()) {
    *ck_.mutable_fence_expire_time() = Stamp(dump->fence_expires);
  }
  Store();
  return dump;
}

absl::Status Checkpointer::Run::PushImage(StateDump& dump, const ContainerTarget& source,
                                          const lms::v1::Pod& pod, const std::string& tag,
                                          const std::function<absl::Status()>& restore) {
  CheckpointMetadata metadata;
  metadata.container = source.container;
  metadata.pod = source.pod;
  metadata.pod_namespace = source.pod_namespace;
  metadata.rootfs_image = source.image;
  metadata.runtime = ck_.driver();
  metadata.created = owner_.clock_.Now();
  metadata.facts = dump.facts;
  // The pod as declared, so that a restore needs only the image.
  lms::v1::Pod declared;
  declared.set_name(pod.name());
  *declared.mutable_labels() = pod.labels();
  *declared.mutable_annotations() = pod.annotations();
  declared.mutable_annotations()->erase(kEndpointAnnotation);
  *declared.mutable_containers() = pod.containers();
  std::string pod_json;
  if (!google::protobuf::util::MessageToJsonString(declared, &pod_json).ok()) {
    return absl::InternalError("encoding the pod template");
  }
  metadata.facts[kPodTemplateFact] = pod_json;

  const std::string tagged = absl::StrCat(ck_.target_repository(), ":", tag);
  ck_.set_image_tag(tag);
  ck_.set_image_reference(tagged);
  ck_.set_phase(v1::CHECKPOINT_PHASE_PUSHING);
  Phase(absl::StrCat("pushing ", tagged), 20);

  // The push runs on its own thread; the restore, when there is one, starts
  // on this one as soon as the first layer is published (or the push is
  // done) and follows the push layer by layer.
  std::atomic<bool> give_up{false};
  struct Progress {
    bool published = false;  // a first (incomplete) image is up
    bool done = false;       // the push ended
    bool Started() const { return published || done; }
  };
  absl::Mutex mu;
  Progress progress;
  absl::StatusOr<PushedImage> pushed = absl::UnknownError("not pushed");
  std::thread pusher([&] {
    absl::StatusOr<PushedImage> result = owner_.images_.Push(
        dump, metadata, tagged,
        [&] {
          absl::MutexLock lock(&mu);
          progress.published = true;
        },
        give_up);
    push_done_.store(result.ok());
    absl::MutexLock lock(&mu);
    pushed = std::move(result);
    progress.done = true;
  });
  absl::Status restored = absl::OkStatus();
  if (restore) {
    bool start_restore = false;
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&progress, &Progress::Started));
      start_restore = progress.published || pushed.ok();
    }
    if (start_restore) {
      restored = restore();
      if (!restored.ok()) give_up.store(true);
    }
  }
  pusher.join();
  if (pushed.ok()) {
    ck_.mutable_timings()->set_build_ns(Nanos(pushed->build_time));
    ck_.mutable_timings()->set_push_ns(Nanos(pushed->push_time));
  }
  if (!pushed.ok() && !(absl::IsCancelled(pushed.status()) && !restored.ok())) {
    return absl::Status(pushed.status().code(), absl::StrCat("pushing ", tagged, ": ",
                                                             pushed.status().message()));
  }
  RETURN_IF_ERROR(restored);
  ck_.set_image_reference(absl::StrCat(ck_.target_repository(), "@", pushed->manifest_digest));
  ck_.set_image_digest(pushed->manifest_digest);
  ck_.set_size_bytes(pushed->size_bytes);
  ck_.set_layers(pushed->layers);
  ck_.set_state_bytes(pushed->state_bytes);
  if (!restore) Phase("pushed", 50);
  return absl::OkStatus();
}

absl::StatusOr<lms::v1::Pod> Checkpointer::Run::PodToRestore(
    const CheckpointMetadata& metadata, const v1::RestoreCheckpointRequest& request,
    std::string& container) {
  lms::v1::Pod pod;
  auto template_fact = metadata.facts.find(kPodTemplateFact);
  if (template_fact == metadata.facts.end() ||
      !google::protobuf::util::JsonStringToMessage(template_fact->second, &pod).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the image has no readable ", kPodTemplateFact, " annotation: not a codeco checkpoint"));
  }
  pod.set_name(request.pod().empty() ? metadata.pod : request.pod());
  pod.set_node_name(request.target_node());
  container = request.container().empty() ? metadata.container : request.container();
  const bool listed = std::any_of(pod.containers().begin(), pod.containers().end(),
                                  [&](const lms::v1::Container& c) { return c.name() == container; });
  if (!listed) {
    return InvalidFieldError("container", absl::StrCat("the checkpointed pod has no container \"",
                                                       container, "\""));
  }
  (*pod.mutable_annotations())[kRestoredFromAnnotation] = request.image_reference();
  (*pod.mutable_annotations())[kRestoredByAnnotation] = op_.id();
  return pod;
}

absl::StatusOr<lms::v1::Pod> Checkpointer::Run::AwaitPodToRestoreInto(
    const std::string& name, const std::string& pod_field, const std::string& node,
    const std::string& container) {
  const absl::Duration timeout = owner_.options_.existing_pod_timeout;
  const absl::Duration interval =
      std::max(owner_.options_.pod_poll_interval, absl::Milliseconds(1));
  const absl::Time deadline = owner_.clock_.Now() + timeout;
  // The injected clock may be virtual and stand still while this sleeps:
  // the reads are counted too, so the wait ends either way.
  const int64_t max_reads = std::max<int64_t>(1, timeout / interval);
  for (int64_t read = 1;; ++read) {
    absl::StatusOr<lms::v1::Pod> pod = owner_.lms_.GetPod(name);
    if (absl::IsNotFound(pod.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(pod_field, ": no pod \"", name, "\" in cluster ", owner_.options_.cluster,
                       " to restore into (restore_into_existing: its creator starts it first)"));
    }
    if (!pod.ok()) {
      return absl::Status(
          pod.status().code(),
          absl::StrCat("reading the pod ", name, " to restore into: ", pod.status().message()));
    }
    if (!pod->node_name().empty() && pod->node_name() != node) {
      return InvalidFieldError("target_node",
                               absl::StrCat("the pod ", name, " to restore into is bound to ",
                                            pod->node_name(), ", not ", node));
    }
    const bool listed =
        std::any_of(pod->containers().begin(), pod->containers().end(),
                    [&](const lms::v1::Container& c) { return c.name() == container; });
    if (!listed) {
      return absl::FailedPreconditionError(
          absl::StrCat("the pod ", name, " to restore into has no container \"", container,
                       "\" (the checkpointed container): nothing was loaded into it"));
    }
    if (pod->phase() == lms::v1::POD_PHASE_RUNNING) {
      if (pod->node_name() != node) {
        return InvalidFieldError("target_node", absl::StrCat("the pod ", name,
                                                             " to restore into runs bound to no "
                                                             "node, not to ", node));
      }
      return pod;
    }
    if (pod->phase() == lms::v1::POD_PHASE_FAILED || pod->phase() == lms::v1::POD_PHASE_SUCCEEDED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the pod ", name, " to restore into is ", lms::v1::PodPhase_Name(pod->phase()),
          pod->message().empty() ? "" : ": ", pod->message()));
    }
    if (owner_.clock_.Now() >= deadline || read >= max_reads) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the pod ", name, " to restore into did not run within ", absl::FormatDuration(timeout),
          " (", lms::v1::PodPhase_Name(pod->phase()), ")"));
    }
    absl::SleepFor(interval);
  }
}

absl::StatusOr<v1::Checkpoint> Checkpointer::Run::RestoreHere(
    const v1::RestoreCheckpointRequest& request, const std::string& pod_field, int from_percent,
    int to_percent) {
  const int span = to_percent - from_percent;
  const std::string& reference = request.image_reference();
  const bool existing = request.restore_into_existing();
  auto pulling = [&](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("pulling ", reference, ": ", status.message()));
  };
  const fs::path pulled_dir = work_ / "image";
  std::error_code error;
  fs::remove_all(pulled_dir, error);
  ck_.set_phase(v1::CHECKPOINT_PHASE_RESTORING);
  Phase(absl::StrCat("pulling ", reference), from_percent);
  absl::StatusOr<CheckpointMetadata> inspected = owner_.images_.Inspect(reference);
  if (!inspected.ok()) return pulling(inspected.status());
  ck_.set_driver(inspected->runtime);
  StateDriver* driver = owner_.DriverNamed(inspected->runtime);
  if (driver == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the image was taken by driver \"", inspected->runtime,
        "\", which this checkpointer does not run: nothing can verify its restore"));
  }
  const std::string streamed = driver->StreamedFile();
  if (existing && streamed.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("driver ", driver->name(),
                     " restores only into a pod it creates; "
                     "restore_into_existing needs a streaming driver (redis-hook)"));
  }
  std::string container;
  ASSIGN_OR_RETURN(lms::v1::Pod pod, PodToRestore(*inspected, request, container));
  std::string lms_request = op_.id() + "/lms";
  if (existing && job_.resumed && MayHaveLoaded(resumed_phase_)) {
    // The previous run may have loaded part of the state: the driver cannot
    // load into a half-loaded container, and the pod is not ours to delete.
    return absl::AbortedError(absl::StrCat(
        "the restore into the existing pod ", pod.name(), " was interrupted (", op_.id(),
        " restarted while ", resumed_phase_, "): it cannot start over into a half-loaded ",
        driver->name(), " container; the pod is left to its creator, which rolls back"));
  }
  if (job_.resumed && !existing) {
    // A previous run may have left its pod half-restored: it starts over.
    absl::StatusOr<lms::v1::Pod> left = owner_.lms_.GetPod(pod.name());
    if (left.ok() && left->annotations().count(kRestoredByAnnotation) &&
        left->annotations().at(kRestoredByAnnotation) == op_.id()) {
      RETURN_IF_ERROR(owner_.lms_.DeletePod(pod.name()));
    }
    lms_request = absl::StrCat(lms_request, "/", absl::ToUnixMillis(owner_.clock_.Now()));
  }
  // What a failure after the pod was made (or, when it existed, loaded
  // into) does with it: a pod this restore created goes; one that existed
  // is its creator's. Returns what to add to the error.
  auto undo = [&]() -> std::string {
    if (existing) return absl::StrCat(" (the pod ", pod.name(), " was left to its creator)");
    // The LMS leaves nothing on failure; a pod it may have made anyway goes.
    owner_.lms_.DeletePod(pod.name()).IgnoreError();
    return "";
  };
  auto restoring = [&](const absl::Status& status) {
    const std::string left = undo();
    return absl::Status(status.code(),
                        absl::StrCat("restoring ", pod.name(), " on ", request.target_node(), ": ",
                                     status.message(), left));
  };

  absl::StatusOr<PulledImage> pulled = absl::UnknownError("not pulled");
  absl::StatusOr<lms::v1::Pod> restored = absl::UnknownError("not restored");
  if (streamed.empty()) {
    // The LMS restores from the complete, unpacked image.
    pulled = Timed(kPullTime, [&] { return owner_.images_.Pull(reference, pulled_dir, {}); });
    if (!pulled.ok()) return pulling(pulled.status());
    Phase(absl::StrCat("restoring ", pod.name(), " on ", request.target_node()),
          from_percent + span * 2 / 5);
    lms::v1::RestoreContainerRequest restore;
    *restore.mutable_pod() = pod;
    restore.set_container(container);
    restore.set_archive_path(pulled->directory.string());
    restore.set_request_id(lms_request);
    restored = Timed(kRestoreTime, [&] { return owner_.lms_.RestoreContainer(restore); });
    if (!restored.ok()) return restoring(restored.status());
  } else {
    // The pod starts empty (or, restoring into an existing pod, was started
    // empty by its creator) and the driver loads the state into it while the
    // image is pulled (and, in a migration, while later layers are pushed).
    const absl::Time start = owner_.clock_.Now();
    if (existing) {
      Phase(absl::StrCat("restoring into the existing ", pod.name(), " on ", request.target_node(),
                         kAwaitingPodPhase),
            from_percent + span / 10);
      restored = AwaitPodToRestoreInto(pod.name(), pod_field, request.target_node(), container);
      if (!restored.ok()) return restored.status();
      Phase(absl::StrCat("restoring into the existing ", pod.name(), " on ", request.target_node(),
                         " while pulling"),
            from_percent + span / 5);
    } else {
      Phase(absl::StrCat("restoring ", pod.name(), " on ", request.target_node(), " while pulling"),
            from_percent + span / 5);
      restored = owner_.lms_.CreatePod(pod, lms_request);
      if (!restored.ok()) return restoring(restored.status());
    }
    absl::StatusOr<ContainerTarget> target = owner_.TargetOf(*restored, container);
    if (!target.ok()) return restoring(target.status());
    StreamPipe pipe(kStreamBufferBytes);
    absl::Duration pull_time;
    std::thread puller([&] {
      const absl::Time pull_start = owner_.clock_.Now();
      pulled = owner_.images_.Pull(
          reference, pulled_dir,
          StreamedFile{.name = streamed,
                       .write = [&pipe](absl::string_view bytes) { return pipe.Write(bytes); }});
      pull_time = owner_.clock_.Now() - pull_start;
      pipe.Close(pulled.ok() ? absl::OkStatus() : pulled.status());
    });
    absl::Status loaded = driver->RestoreInto(*target, pipe);
    if (!loaded.ok()) pipe.Stop(loaded);
    puller.join();
    ck_.mutable_timings()->set_pull_ns(Nanos(pull_time));
    ck_.mutable_timings()->set_restore_ns(Nanos(owner_.clock_.Now() - start));
    if (!pulled.ok()) {
      const std::string left = undo();
      absl::Status failed = pulling(pulled.status());
      return absl::Status(failed.code(), absl::StrCat(failed.message(), left));
    }
    if (!loaded.ok()) return restoring(loaded);
  }
  const CheckpointMetadata& metadata = pulled->metadata;
  for (const auto& [name, value] : metadata.facts) {
    if (name != kPodTemplateFact) (*ck_.mutable_facts())[name] = value;
  }
  Phase(absl::StrCat("verifying ", pod.name(), "/", container), from_percent + span * 4 / 5);
  absl::Status verified = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(ContainerTarget target, owner_.TargetOf(*restored, container));
    return Timed(kVerifyTime, [&] { return driver->Verify(target, metadata.facts); });
  }();
  if (!verified.ok()) {
    const std::string left = undo();
    return absl::Status(
        verified.code(),
        absl::StrCat("verifying the restored ", pod.name(), ": ", verified.message(),
                     existing ? left : " (the restored pod was deleted)"));
  }
  fs::remove_all(pulled_dir, error);
  v1::ContainerRef* where = ck_.mutable_restored();
  where->set_cluster(owner_.options_.cluster);
  where->set_node(restored->node_name());
  where->set_pod(restored->name());
  where->set_container(container);
  ck_.set_phase(v1::CHECKPOINT_PHASE_RESTORED);
  return ck_;
}

void Checkpointer::Run::ResumeSource(const ContainerTarget& source, StateDriver& driver) {
  absl::Status resumed = driver.Resume(source);
  if (!resumed.ok()) {
    log::Warn("checkpointer: resuming the source failed",
              {{"pod", source.pod}, {"container", source.container}, {"error", resumed.ToString()}});
  }
}

absl::Status Checkpointer::Run::CutOver(const ContainerTarget& source, StateDriver& driver) {
  Phase(absl::StrCat("cutting over: retiring ", source.pod), 95);
  return Timed(kCutoverTime, [&]() -> absl::Status {
    // The source ends without taking another write, then its pod goes (which
    // also ends a source the driver could not reach).
    absl::Status retired = driver.Retire(source);
    if (!retired.ok()) {
      log::Warn("checkpointer: retiring the source failed; deleting its pod ends it",
                {{"pod", source.pod}, {"error", retired.ToString()}});
    }
    absl::Status deleted = owner_.lms_.DeletePod(source.pod);
    if (!deleted.ok()) {
      return absl::Status(deleted.code(), absl::StrCat("deleting the source pod ", source.pod,
                                                       ": ", deleted.message()));
    }
    return absl::OkStatus();
  });
}

absl::Status Checkpointer::Run::Create(const v1::CreateCheckpointRequest& request) {
  ASSIGN_OR_RETURN(lms::v1::Pod pod, SourcePod(request.source()));
  ASSIGN_OR_RETURN(ContainerTarget source, owner_.TargetOf(pod, request.source().container()));
  source.keeps_running = !request.stop_after_checkpoint();
  if (job_.resumed && !ck_.driver().empty()) {
    // A previous run dumped and may have left the source fenced: lift it and start over.
    if (StateDriver* previous = owner_.DriverNamed(ck_.driver())) ResumeSource(source, *previous);
    *ck_.mutable_timings() = v1::PhaseTimings();
  }
  RETURN_IF_ERROR(CheckRunning(pod));
  ASSIGN_OR_RETURN(StateDriver * driver, owner_.DriverFor(source));
  ASSIGN_OR_RETURN(StateDump dump, TakeState(source, *driver));
  // A checkpoint alone holds the source's writes no longer than the dump
  // (a streamed dump's snapshot is fixed already). A source that stops
  // after it stops once its state is read: a streamed dump reads from it.
  const bool stop_after_push = request.stop_after_checkpoint() && dump.stream != nullptr;
  if (request.stop_after_checkpoint() && !stop_after_push) {
    RETURN_IF_ERROR(CutOver(source, *driver));
  } else if (!request.stop_after_checkpoint()) {
    ResumeSource(source, *driver);
  }
  absl::Status pushed = PushImage(dump, source, pod,
                                  request.tag().empty() ? ck_.id() : request.tag(), nullptr);
  if (stop_after_push) {
    // The source serves on if its state could not be pushed.
    if (!pushed.ok()) {
      ResumeSource(source, *driver);
      return pushed;
    }
    RETURN_IF_ERROR(CutOver(source, *driver));
  }
  RETURN_IF_ERROR(pushed);
  ck_.set_phase(v1::CHECKPOINT_PHASE_READY);
  return absl::OkStatus();
}

absl::Status Checkpointer::Run::Restore(const v1::RestoreCheckpointRequest& request) {
  return RestoreHere(request, "pod", 5, 95).status();
}

absl::Status Checkpointer::Run::Migrate(const v1::MigrateContainerRequest& request) {
  const Step from = job_.resumed ? StepOf(op_.phase()) : Step::kPending;
  const std::string target_cluster =
      request.target_cluster().empty() ? owner_.options_.cluster : request.target_cluster();
  if (from == Step::kCuttingOver &&
      absl::IsNotFound(owner_.lms_.GetPod(request.source().pod()).status())) {
    return absl::OkStatus();  // the cut-over had deleted the source already
  }
  ASSIGN_OR_RETURN(lms::v1::Pod pod, SourcePod(request.source()));
  ASSIGN_OR_RETURN(ContainerTarget source, owner_.TargetOf(pod, request.source().container()));
  // A resumed migration keeps the driver that took (or may have fenced) the state.
  StateDriver* driver = owner_.DriverNamed(ck_.driver());
  if (ck_.driver().empty()) {
    ASSIGN_OR_RETURN(driver, owner_.DriverFor(source));
  } else if (driver == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("the state was taken by driver \"",
                                                      ck_.driver(),
                                                      "\", which this checkpointer does not run"));
  }
  const bool remote = target_cluster != owner_.options_.cluster;
  // The restore of the image pushed under `tag`: here, or at the target's
  // checkpointer (re-attached by its request_id after a restart).
  auto restore_at_target = [&](const std::string& tag) -> absl::Status {
    v1::RestoreCheckpointRequest restore;
    restore.set_checkpoint_id(ck_.id());
    restore.set_image_reference(absl::StrCat(ck_.target_repository(), ":", tag));
    restore.set_target_node(request.target_node());
    restore.set_pod(request.target_pod().empty() ? pod.name() : request.target_pod());
    restore.set_container(source.container);
    restore.set_request_id(absl::StrCat(op_.id(), "/restore/", tag));
    restore.set_restore_into_existing(request.restore_into_existing());
    if (!remote) return RestoreHere(restore, "target_pod", 25, 90).status();
    // The phase says "pushing" while the push still runs beside the restore.
    auto phase = [&](const std::string& remote_phase) {
      return absl::StrCat(push_done_.load() ? "" : "pushing; ", "restoring at ", target_cluster,
                          remote_phase.empty() ? "" : ": ", remote_phase);
    };
    Phase(phase(""), 25);
    absl::StatusOr<v1::Checkpoint> restored = owner_.peers_.Restore(
        target_cluster, restore, [&](const Operation& remote_op) {
          op_.set_phase(phase(remote_op.phase()));
          op_.set_progress_percent(
              std::max(op_.progress_percent(), 25 + remote_op.progress_percent() * 65 / 100));
          Store();
        });
    if (!restored.ok()) {
      if (!request.restore_into_existing()) return restored.status();
      return absl::Status(restored.status().code(),
                          absl::StrCat("restoring into the existing target_pod ", restore.pod(),
                                       " at ", target_cluster, ": ", restored.status().message()));
    }
    ck_.mutable_timings()->set_pull_ns(restored->timings().pull_ns());
    ck_.mutable_timings()->set_restore_ns(restored->timings().restore_ns());
    ck_.mutable_timings()->set_verify_ns(restored->timings().verify_ns());
    *ck_.mutable_restored() = restored->restored();
    return absl::OkStatus();
  };
  bool restored = false;
  if (job_.resumed && from < Step::kCuttingOver && !ck_.image_tag().empty()) {
    // The previous run pushed (part of) an image and may have restored it.
    // Marking an unfinished image abandoned stops a restore still following
    // it; then the restore is re-attached by its request_id: it either
    // finished (cut over now, if the fence still holds) or fails, and the
    // migration starts over.
    owner_.images_.Abandon(absl::StrCat(ck_.target_repository(), ":", ck_.image_tag()))
        .IgnoreError();
    if (remote) {
      push_done_.store(true);
      absl::Status again = restore_at_target(ck_.image_tag());
      restored = again.ok();
      if (!restored) {
        log::Info("checkpointer: the previous run's restore did not finish; starting over",
                  {{"operation", op_.id()}, {"error", again.ToString()}});
        push_done_.store(false);
      }
    }
  }
  if (!restored && from < Step::kCuttingOver) {
    if (job_.resumed && !ck_.driver().empty()) ResumeSource(source, *driver);
    *ck_.mutable_timings() = v1::PhaseTimings();
    RETURN_IF_ERROR(CheckRunning(pod));
    ASSIGN_OR_RETURN(StateDump dump, TakeState(source, *driver));
    // Each attempt pushes under its own tag: a restore still following an
    // earlier attempt's image never mixes the two.
    const std::string tag =
        job_.resumed ? absl::StrCat(ck_.id(), "-", absl::ToUnixMillis(owner_.clock_.Now()))
                     : ck_.id();
    absl::Status moved =
        PushImage(dump, source, pod, tag, [&] { return restore_at_target(tag); });
    if (!moved.ok()) {
      ResumeSource(source, *driver);
      return absl::Status(moved.code(), absl::StrCat(moved.message(), "; ", source.pod,
                                                     " serves on"));
    }
  }
  if (from < Step::kCuttingOver) {
    if (ck_.has_fence_expire_time() &&
        owner_.clock_.Now() >= FromProtoTimestamp(ck_.fence_expire_time())) {
      // The fence lifted by itself while the restore ran: the copy may lack writes.
      ResumeSource(source, *driver);
      return absl::AbortedError(absl::StrCat(
          "the source's write fence expired before the cut-over; ", source.pod,
          " serves on and the restored copy ", ck_.restored().pod(), " in ",
          ck_.restored().cluster(), " is stale: ",
          request.restore_into_existing() ? "it is left to its creator" : "delete it"));
    }
  }
  RETURN_IF_ERROR(CutOver(source, *driver));
  ck_.set_phase(v1::CHECKPOINT_PHASE_RESTORED);
  return absl::OkStatus();
}

void Checkpointer::Run::Finish(const absl::Status& status) {
  const absl::Time now = owner_.clock_.Now();
  ck_.mutable_timings()->set_total_ns(ck_.timings().total_ns() + Nanos(now - started_));
  op_.set_done(true);
  if (status.ok()) {
    op_.set_progress_percent(100);
    op_.set_phase("done");
    op_.mutable_result()->PackFrom(ck_);
  } else {
    ck_.set_phase(v1::CHECKPOINT_PHASE_FAILED);
    SetError(status, ck_.mutable_error());
    SetError(status, op_.mutable_error());
    op_.set_phase(absl::StrCat("failed: ", op_.phase()));
  }
  RemoveWork();
  Store();
  if (owner_.options_.on_finished) owner_.options_.on_finished(op_, ck_);
}

Checkpointer::Checkpointer(CheckpointerOptions options, KvStore& store, const Clock& clock,
                           LmsPort& lms, ImageStore& images, PeerCheckpointers& peers,
                           std::vector<StateDriver*> drivers)
    : options_(std::move(options)), store_(store), clock_(clock), lms_(lms), images_(images),
      peers_(peers), drivers_(std::move(drivers)),
      workers_(std::make_unique<BoundedExecutor>(std::max(1, options_.parallelism),
                                                 static_cast<size_t>(std::max(1, options_.max_pending)))) {}

Checkpointer::~Checkpointer() { workers_.reset(); }

absl::StatusOr<ContainerTarget> Checkpointer::TargetOf(const lms::v1::Pod& pod,
                                                       const std::string& container) const {
  ContainerTarget target;
  target.cluster = options_.cluster;
  target.node = pod.node_name();
  target.pod = pod.name();
  const lms::v1::Container* found = nullptr;
  for (const lms::v1::Container& c : pod.containers()) {
    if (c.name() == container || (container.empty() && pod.containers_size() == 1)) found = &c;
  }
  if (found == nullptr) {
    return InvalidFieldError("source.container",
                             absl::StrCat("pod ", pod.name(), " has no container \"", container,
                                          "\""));
  }
  target.container = found->name();
  target.image = found->image();
  auto endpoint = pod.annotations().find(kEndpointAnnotation);
  if (endpoint != pod.annotations().end()) {
    target.endpoint = endpoint->second;
  } else if (!pod.pod_ip().empty() && found->ports_size() > 0) {
    target.endpoint = absl::StrCat(pod.pod_ip(), ":", found->ports(0).port());
  }
  return target;
}

absl::StatusOr<StateDriver*> Checkpointer::DriverFor(const ContainerTarget& target) const {
  for (StateDriver* driver : drivers_) {
    if (driver->Handles(target)) return driver;
  }
  return absl::FailedPreconditionError(absl::StrCat("no checkpoint driver handles ", target.pod,
                                                    "/", target.container, " (image ",
                                                    target.image, ")"));
}

StateDriver* Checkpointer::DriverNamed(const std::string& name) const {
  for (StateDriver* driver : drivers_) {
    if (driver->name() == name) return driver;
  }
  return nullptr;
}

absl::Status Checkpointer::Save(const Operation& op, const v1::Checkpoint& checkpoint) {
  KvWriteBatch batch;
  batch.Put(kOperationsFamily, kOperationPrefix + op.id(), op.SerializeAsString());
  batch.Put(kCheckpointsFamily, checkpoint.id(), checkpoint.SerializeAsString());
  RETURN_IF_ERROR(store_.Write(batch));
  listeners_.Notify();
  return absl::OkStatus();
}

absl::StatusOr<Operation> Checkpointer::Accept(const std::string& kind,
                                               const std::string& request_id,
                                               const google::protobuf::Message& request,
                                               v1::Checkpoint checkpoint) {
  if (request_id.size() > 128) return InvalidFieldError("request_id", "at most 128 characters");
  std::shared_ptr<Job> job;
  Operation op;
  {
    absl::MutexLock lock(&mu_);
    if (!request_id.empty()) {
      absl::StatusOr<std::string> seen = store_.Get(kOperationsFamily, kRequestPrefix + request_id);
      if (seen.ok()) {
        absl::StatusOr<std::string> bytes = store_.Get(kOperationsFamily, kOperationPrefix + *seen);
        if (bytes.ok() && op.ParseFromString(*bytes)) {
          if (op.kind() != kind) {
            return absl::AlreadyExistsError(absl::StrCat("request_id ", request_id,
                                                         " started ", op.id(), " (", op.kind(),
                                                         ")"));
          }
          return op;
        }
      } else if (!absl::IsNotFound(seen.status())) {
        return seen.status();
      }
    }
    if (pending_.load() >= options_.max_pending) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "checkpointer: ", options_.max_pending, " operations already pending; retry later"));
    }
    ++sequence_;
    const absl::Time now = clock_.Now();
    // Sortable by time, unique within this checkpointer, a valid image tag.
    checkpoint.set_id(absl::StrCat("ck-", absl::FormatTime("%Y%m%d-%H%M%S", now,
                                                           absl::UTCTimeZone()),
                                   "-", sequence_, "-", absl::ToUnixMicros(now) % 1000000));
    checkpoint.set_phase(v1::CHECKPOINT_PHASE_PENDING);
    *checkpoint.mutable_create_time() = Stamp(now);
    *checkpoint.mutable_update_time() = Stamp(now);
    const char* verb = kind == kCreateCheckpointKind  ? "checkpoint/"
                       : kind == kRestoreCheckpointKind ? "restore/"
                                                         : "migrate/";
    op.set_id(absl::StrCat(verb, checkpoint.id()));
    op.set_kind(kind);
    op.set_resource(absl::StrCat("checkpoints/", checkpoint.id()));
    op.set_request_id(request_id);
    op.set_phase("pending");
    *op.mutable_create_time() = Stamp(now);
    *op.mutable_update_time() = Stamp(now);
    job = std::make_shared<Job>();
    job->operation_id = op.id();
    job->kind = kind;
    job->request.PackFrom(request);
    KvWriteBatch batch;
    batch.Put(kOperationsFamily, kOperationPrefix + op.id(), op.SerializeAsString());
    batch.Put(kOperationsFamily, kJobPrefix + op.id(), job->request.SerializeAsString());
    if (!request_id.empty()) batch.Put(kOperationsFamily, kRequestPrefix + request_id, op.id());
    batch.Put(kCheckpointsFamily, checkpoint.id(), checkpoint.SerializeAsString());
    RETURN_IF_ERROR(store_.Write(batch));
    pending_.fetch_add(1);
  }
  listeners_.Notify();
  Submit(std::move(job));
  return op;
}

void Checkpointer::Submit(std::shared_ptr<Job> job) {
  // The queue holds max_pending, and at most that many are pending: it never refuses.
  const bool queued = workers_->Submit([this, job] { Execute(*job); });
  if (!queued) {
    log::Error("checkpointer: the worker queue refused an operation",
               {{"operation", job->operation_id}});
    pending_.fetch_sub(1);
  }
}

void Checkpointer::Execute(Job& job) {
  Operation op;
  v1::Checkpoint ck;
  absl::StatusOr<std::string> op_bytes =
      store_.Get(kOperationsFamily, kOperationPrefix + job.operation_id);
  const std::string ck_id = job.operation_id.substr(job.operation_id.find('/') + 1);
  absl::StatusOr<std::string> ck_bytes = store_.Get(kCheckpointsFamily, ck_id);
  if (!op_bytes.ok() || !op.ParseFromString(*op_bytes) || !ck_bytes.ok() ||
      !ck.ParseFromString(*ck_bytes)) {
    log::Error("checkpointer: an operation has no readable record",
               {{"operation", job.operation_id}});
    pending_.fetch_sub(1);
    listeners_.Notify();
    return;
  }
  Run run(*this, job, std::move(op), std::move(ck));
  absl::Status status;
  if (v1::CreateCheckpointRequest create; job.request.UnpackTo(&create)) {
    status = run.Create(create);
  } else if (v1::RestoreCheckpointRequest restore; job.request.UnpackTo(&restore)) {
    status = run.Restore(restore);
  } else if (v1::MigrateContainerRequest migrate; job.request.UnpackTo(&migrate)) {
    status = run.Migrate(migrate);
  } else {
    status = absl::InternalError(absl::StrCat("unknown request type ", job.request.type_url()));
  }
  run.Finish(status);
  pending_.fetch_sub(1);
  listeners_.Notify();
}

absl::StatusOr<int> Checkpointer::Recover() {
  std::vector<std::shared_ptr<Job>> unfinished;
  absl::Status scanned = store_.Scan(
      kOperationsFamily, KvScanOptions{.prefix = kOperationPrefix},
      [&](std::string_view /*key*/, std::string_view value) {
        Operation op;
        if (op.ParseFromArray(value.data(), static_cast<int>(value.size())) && !op.done()) {
          auto job = std::make_shared<Job>();
          job->operation_id = op.id();
          job->kind = op.kind();
          job->resumed = true;
          unfinished.push_back(std::move(job));
        }
        return true;
      });
  RETURN_IF_ERROR(scanned);
  for (auto& job : unfinished) {
    absl::StatusOr<std::string> request = store_.Get(kOperationsFamily, kJobPrefix + job->operation_id);
    if (!request.ok() || !job->request.ParseFromString(*request)) {
      log::Error("checkpointer: an operation has no stored request; left unfinished",
                 {{"operation", job->operation_id}});
      continue;
    }
    log::Info("checkpointer: resuming an operation a previous run left",
              {{"operation", job->operation_id}, {"kind", job->kind}});
    pending_.fetch_add(1);
    Submit(job);
  }
  return static_cast<int>(unfinished.size());
}

void Checkpointer::CheckSource(const v1::ContainerRef& source, FieldErrors& errors) const {
  if (!source.cluster().empty() && source.cluster() != options_.cluster) {
    errors.Add("source.cluster", absl::StrCat("this checkpointer serves cluster ", options_.cluster,
                                              ", not ", source.cluster()));
  }
  CheckName(source.pod(), "source.pod", true, errors);
}

v1::Checkpoint Checkpointer::SourceRecord(const v1::ContainerRef& source,
                                          const std::string& repository) const {
  v1::Checkpoint checkpoint;
  *checkpoint.mutable_source() = source;
  checkpoint.mutable_source()->set_cluster(options_.cluster);
  checkpoint.set_target_repository(repository.empty() ? options_.default_repository : repository);
  return checkpoint;
}

absl::StatusOr<Operation> Checkpointer::CreateCheckpoint(const v1::CreateCheckpointRequest& request) {
  FieldErrors errors;
  CheckSource(request.source(), errors);
  CheckRepository(request.target_repository(), options_.default_repository, errors);
  if (!request.tag().empty() && !IsTag(request.tag())) {
    errors.Add("tag", "must be [A-Za-z0-9_][A-Za-z0-9._-]*, at most 128 characters");
  }
  RETURN_IF_ERROR(errors.ToStatus());
  v1::Checkpoint checkpoint = SourceRecord(request.source(), request.target_repository());
  return Accept(kCreateCheckpointKind, request.request_id(), request, std::move(checkpoint));
}

absl::StatusOr<Operation> Checkpointer::RestoreCheckpoint(
    const v1::RestoreCheckpointRequest& request) {
  FieldErrors errors;
  if (request.image_reference().empty()) {
    errors.Add("image_reference", "is required");
  } else if (request.image_reference().size() > 512) {
    errors.Add("image_reference", "is longer than 512 characters");
  } else if (absl::Status parsed =
                 ParseImageReference(request.image_reference(), "image_reference").status();
             !parsed.ok()) {
    errors.Add("image_reference", std::string(parsed.message()));
  }
  CheckName(request.target_node(), "target_node", true, errors);
  if (request.restore_into_existing() && request.pod().empty()) {
    errors.Add("pod", "is required with restore_into_existing (the pod to restore into)");
  }
  CheckName(request.pod(), "pod", false, errors);
  RETURN_IF_ERROR(errors.ToStatus());
  v1::Checkpoint checkpoint;
  checkpoint.set_image_reference(request.image_reference());
  return Accept(kRestoreCheckpointKind, request.request_id(), request, std::move(checkpoint));
}

absl::StatusOr<Operation> Checkpointer::MigrateContainer(
    const v1::MigrateContainerRequest& request) {
  FieldErrors errors;
  CheckSource(request.source(), errors);
  CheckName(request.target_node(), "target_node", true, errors);
  CheckName(request.target_pod(), "target_pod", false, errors);
  const std::string target_cluster =
      request.target_cluster().empty() ? options_.cluster : request.target_cluster();
  if (request.restore_into_existing() && request.target_pod().empty()) {
    errors.Add("target_pod", "is required with restore_into_existing (the pod to restore into)");
  } else if (target_cluster == options_.cluster &&
             (request.target_pod().empty() || request.target_pod() == request.source().pod())) {
    // Pod names are unique in a cluster: the copy runs beside the source until the cut-over.
    errors.Add("target_pod", "must name the copy (not the source's name) for a move inside cluster " +
                                 options_.cluster);
  }
  CheckRepository(request.target_repository(), options_.default_repository, errors);
  RETURN_IF_ERROR(errors.ToStatus());
  v1::Checkpoint checkpoint = SourceRecord(request.source(), request.target_repository());
  return Accept(kMigrateContainerKind, request.request_id(), request, std::move(checkpoint));
}

absl::StatusOr<v1::Checkpoint> Checkpointer::GetCheckpoint(const std::string& id) const {
  if (id.empty()) return InvalidFieldError("id", "is required");
  absl::StatusOr<std::string> bytes = store_.Get(kCheckpointsFamily, id);
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("no checkpoint ", id));
  }
  RETURN_IF_ERROR(bytes.status());
  v1::Checkpoint checkpoint;
  if (!checkpoint.ParseFromString(*bytes)) return absl::DataLossError("checkpoint " + id);
  return checkpoint;
}

absl::StatusOr<v1::ListCheckpointsResponse> Checkpointer::ListCheckpoints(
    const v1::ListCheckpointsRequest& request) const {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  const int size = request.page_size() == 0 ? 100 : std::min(request.page_size(),
                                                              options_.max_page_size);
  int64_t offset = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &offset) || offset < 0)) {
    return InvalidFieldError("page_token", "is not a token this service returned");
  }
  std::vector<v1::Checkpoint> all;
  RETURN_IF_ERROR(store_.Scan(kCheckpointsFamily, {}, [&](std::string_view, std::string_view v) {
    v1::Checkpoint c;
    if (!c.ParseFromArray(v.data(), static_cast<int>(v.size()))) return true;
    if (!request.pod().empty() && c.source().pod() != request.pod() &&
        c.restored().pod() != request.pod()) {
      return true;
    }
    if (request.phase() != v1::CHECKPOINT_PHASE_UNSPECIFIED && c.phase() != request.phase()) {
      return true;
    }
    all.push_back(std::move(c));
    return true;
  }));
  std::sort(all.begin(), all.end(), [](const v1::Checkpoint& a, const v1::Checkpoint& b) {
    if (a.create_time().seconds() != b.create_time().seconds()) {
      return a.create_time().seconds() > b.create_time().seconds();
    }
    if (a.create_time().nanos() != b.create_time().nanos()) {
      return a.create_time().nanos() > b.create_time().nanos();
    }
    return a.id() > b.id();
  });
  if (offset > static_cast<int64_t>(all.size())) {
    return absl::OutOfRangeError("page_token: past the end of the list");
  }
  v1::ListCheckpointsResponse page;
  for (int64_t i = offset; i < static_cast<int64_t>(all.size()) && i < offset + size; ++i) {
    *page.add_checkpoints() = std::move(all[i]);
  }
  if (offset + size < static_cast<int64_t>(all.size())) {
    page.set_next_page_token(absl::StrCat(offset + size));
  }
  return page;
}

absl::Status Checkpointer::DeleteCheckpoint(const v1::DeleteCheckpointRequest& request) {
  ASSIGN_OR_RETURN(v1::Checkpoint checkpoint, GetCheckpoint(request.id()));
  const v1::CheckpointPhase phase = checkpoint.phase();
  if (phase != v1::CHECKPOINT_PHASE_READY && phase != v1::CHECKPOINT_PHASE_FAILED &&
      phase != v1::CHECKPOINT_PHASE_RESTORED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", request.id(), " is ", v1::CheckpointPhase_Name(phase),
        ": its operation is still running"));
  }
  if (request.delete_image() && !checkpoint.image_reference().empty()) {
    RETURN_IF_ERROR(images_.Delete(checkpoint.image_reference()));
  }
  RETURN_IF_ERROR(store_.Delete(kCheckpointsFamily, request.id()));
  listeners_.Notify();
  return absl::OkStatus();
}

absl::StatusOr<Operation> Checkpointer::GetOperation(const std::string& id) const {
  if (id.empty()) return InvalidFieldError("id", "is required");
  absl::StatusOr<std::string> bytes = store_.Get(kOperationsFamily, kOperationPrefix + id);
  if (absl::IsNotFound(bytes.status())) return absl::NotFoundError("no operation " + id);
  RETURN_IF_ERROR(bytes.status());
  Operation op;
  if (!op.ParseFromString(*bytes)) return absl::DataLossError("operation " + id);
  return op;
}

}  // namespace codeco::checkpointer
