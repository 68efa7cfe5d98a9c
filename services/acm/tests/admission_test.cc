// The admission chain (acm/core/admission.h): the policy bundle's format,
// its signature, the built-in policies, and ApplicationManager admitting
// through them.
#include "acm/core/admission.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "acm/core/application_manager.h"
#include "acm/core/bundle_signature.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/proto_util.h"
#include "ed25519_signer.h"

namespace codeco::acm {
namespace {

const char* kBundle = R"(apiVersion: codeco.io/v1
kind: PolicyBundle
version: "VERSION"
regions:
  - {name: fr, country: FR}
  - {name: de, country: DE}
  - {name: gb, country: GB}
  - {name: us-east, country: US}
latencyMs:
  fr: {de: 9, gb: 8, us-east: 80}
  de: {gb: 14, us-east: 90}
  gb: {us-east: 75}
policies:
  residency:
    rules:
      - name: gdpr
        selector: {codeco.io/data-class: personal}
        countries: [DE, FR]
)";

std::string Bundle(const std::string& version) {
  return absl::StrReplaceAll(kBundle, {{"VERSION", version}});
}

PolicyBundle Parsed(const std::string& version) {
  absl::StatusOr<PolicyBundle> b = ParsePolicyBundle(Bundle(version));
  INFO(b.status().ToString());
  REQUIRE(b.ok());
  return *b;
}

google::protobuf::Map<std::string, std::string> Labels(
    std::initializer_list<std::pair<const std::string, std::string>> kv) {
  google::protobuf::Map<std::string, std::string> m;
  for (const auto& [k, v] : kv) m[k] = v;
  return m;
}

v1::ApplicationSpec Spec() {
  v1::ApplicationSpec spec;
  spec.set_app_name("shop");
  return spec;
}

using testing::Ed25519Signer;

TEST_CASE("A policy bundle parses and a bad one names every wrong field", "[admission]") {
  PolicyBundle b = Parsed("7");
  CHECK(b.version == "7");
  REQUIRE(b.regions.size() == 4);
  CHECK(b.latency_ms.at("gb").at("fr") == 8);  // written once, holds both ways
  CHECK(b.latency_ms.at("us-east").at("de") == 90);
  REQUIRE(b.residency.size() == 1);
  CHECK(b.residency[0].countries == std::vector<std::string>{"DE", "FR"});

  auto bad = ParsePolicyBundle(R"(apiVersion: codeco.io/v1
kind: PolicyBundle
regions:
  - {name: fr, country: France}
latencyMs:
  fr: {de: -3}
policies:
  residency:
    rules:
      - {name: gdpr, countries: [de]}
  speed: {}
)");
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string m(bad.status().message());
  CHECK(absl::StrContains(m, "version: required"));
  CHECK(absl::StrContains(m, "regions[0].country: must be an ISO 3166"));
  CHECK(absl::StrContains(m, "latencyMs.fr.de: must be a latency"));
  CHECK(absl::StrContains(m, "policies.residency.rules[0].countries[0]"));
  CHECK(absl::StrContains(m, "policies.speed: unknown field"));
  CHECK(absl::StrContains(ParsePolicyBundle("[1, 2").status().message(), "bundle: not valid YAML"));
  // Aliases that would expand to millions of nodes are refused unexpanded.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    bomb += absl::StrCat(
        std::string(1, c), ": &", std::string(1, c), " [*", std::string(1, c - 1), ", *",
        std::string(1, c - 1), ", *", std::string(1, c - 1), ", *", std::string(1, c - 1), ", *",
        std::string(1, c - 1), ", *", std::string(1, c - 1), ", *", std::string(1, c - 1), ", *",
        std::string(1, c - 1), ", *", std::string(1, c - 1), ", *", std::string(1, c - 1), "]\n");
  }
  CHECK(absl::StrContains(ParsePolicyBundle(bomb).status().message(),
                          "bundle: more than 400000 YAML nodes once aliases are expanded"));
  CHECK(absl::StrContains(ParsePolicyBundle(std::string(5u << 20, ' ')).status().message(),
                          "over the limit"));
}

TEST_CASE("The example bundle for the five-site scenario parses", "[admission]") {
  std::ifstream in(std::string(ACM_EXAMPLES_DIR) + "/../policies/grid5000-bundle.yaml");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<PolicyBundle> b = ParsePolicyBundle(text.str());
  INFO(b.status().ToString());
  REQUIRE(b.ok());
  CHECK(b->regions.size() == 5);
  CHECK(b->latency_ms.at("lu").at("fr-west") == Approx(27.41));
  REQUIRE(b->residency.size() == 1);
  // Personal data from lille stays in France: within 12.5 ms, Luxembourg
  // (12 ms away) is left out.
  AdmissionChain chain([] { return std::vector<RegisteredCluster>{{"lille", "fr-north", "FR"}}; });
  chain.Install(*b);
  v1::ApplicationSpec spec = Spec();
  spec.mutable_intents()->set_origin("lille");
  spec.mutable_intents()->set_max_latency_to_origin_ns(12'500'000);
  auto admitted = chain.Admit(spec, Labels({{"codeco.io/data-class", "personal"}}));
  REQUIRE(admitted.ok());
  const auto& regions = admitted->spec.intents().allowed_regions();
  CHECK(std::vector<std::string>(regions.begin(), regions.end()) ==
        std::vector<std::string>{"fr-north", "fr-north-east", "fr-south-east"});
  CHECK(admitted->spec.intents().allowed_countries(0) == "FR");
}

TEST_CASE("Mutated policy bundles parse or are refused and never crash", "[admission]") {
  const std::string seed = Bundle("fuzz");
  const std::string alphabet = "{}[]:,-&*!|>'\"#%@ \n\tab01eE.mMsT";
  std::mt19937 rng(20261127);
  int parsed = 0, refused = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string doc = seed;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !doc.empty(); ++e) {
      const size_t at = rng() % doc.size();
      if (rng() % 2) {
        doc[at] = alphabet[rng() % alphabet.size()];
      } else {
        doc.erase(at, 1 + rng() % 16);
      }
    }
    absl::StatusOr<PolicyBundle> b = ParsePolicyBundle(doc);
    if (b.ok()) {
      ++parsed;
    } else {
      REQUIRE(b.status().code() == absl::StatusCode::kInvalidArgument);
      ++refused;
    }
  }
  CHECK(parsed > 0);
  CHECK(refused > 0);
}

TEST_CASE("Residency sets the countries of a selected application and refuses others",
          "[admission]") {
  AdmissionChain chain;
  chain.Install(Parsed("v1"));
  const auto personal = Labels({{"codeco.io/data-class", "personal"}});

  auto set = chain.Admit(Spec(), personal);
  REQUIRE(set.ok());
  CHECK(set->bundle_version == "v1");
  CHECK(set->spec.intents().allowed_countries_size() == 2);
  CHECK(set->json_patch ==
        R"([{"op":"add","path":"/intents","value":{"allowedCountries":["DE","FR"]}}])");
  REQUIRE(set->warnings.size() == 1);
  CHECK(absl::StrContains(set->warnings[0], "spec.intents.allowedCountries set to DE, FR"));

  v1::ApplicationSpec abroad = Spec();
  abroad.mutable_intents()->add_allowed_countries("FR");
  abroad.mutable_intents()->add_allowed_countries("US");
  auto refused = chain.Admit(abroad, personal);
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(refused.status().message(),
                          "admission policy \"residency\": spec.intents.allowedCountries[1]: "
                          "\"US\" is outside rule \"gdpr\""));

  // Not selected: nothing to do.
  auto other = chain.Admit(abroad, Labels({{"tier", "web"}}));
  REQUIRE(other.ok());
  CHECK(other->json_patch.empty());
  CHECK(other->warnings.empty());
}

TEST_CASE("Latency narrows the regions to those near the origin or refuses", "[admission]") {
  AdmissionChain chain([] {
    return std::vector<RegisteredCluster>{{"paris-1", "fr", "FR"}, {"berlin-1", "de", "DE"}};
  });
  chain.Install(Parsed("v2"));
  v1::ApplicationSpec spec = Spec();
  spec.mutable_intents()->set_origin("paris-1");
  spec.mutable_intents()->set_max_latency_to_origin_ns(10'000'000);  // 10 ms
  auto near = chain.Admit(spec, {});
  REQUIRE(near.ok());
  const auto& regions = near->spec.intents().allowed_regions();
  CHECK(std::vector<std::string>(regions.begin(), regions.end()) ==
        std::vector<std::string>{"fr", "gb", "de"});  // by latency: 0, 8, 9 ms
  CHECK(absl::StrContains(near->json_patch, R"("path":"/intents/allowedRegions")"));

  spec.mutable_intents()->add_allowed_regions("us-east");
  auto far = chain.Admit(spec, {});
  REQUIRE(far.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(far.status().message(),
                          "admission policy \"latency\": spec.intents.maxLatencyToOrigin: no "
                          "allowed region lies within 10 ms of fr"));
  CHECK(
      absl::StrContains(far.status().message(), "the nearest allowed region is us-east at 80 ms"));

  // An origin nobody knows narrows nothing, and says so.
  spec.mutable_intents()->clear_allowed_regions();
  spec.mutable_intents()->set_origin("atlantis");
  auto unknown = chain.Admit(spec, {});
  REQUIRE(unknown.ok());
  CHECK(unknown->spec.intents().allowed_regions().empty());
  REQUIRE(unknown->warnings.size() == 1);
  CHECK(absl::StrContains(unknown->warnings[0], "spec.intents.origin: \"atlantis\""));
}

TEST_CASE("A spec no known region satisfies is refused naming the field", "[admission]") {
  // Built-in defaults: the registered clusters are what is known (one
  // without a region label stands for a region of its own).
  AdmissionChain chain([] { return std::vector<RegisteredCluster>{{"tokyo-1", "", "JP"}}; });
  v1::ApplicationSpec spec = Spec();
  spec.mutable_intents()->add_allowed_countries("JP");
  CHECK(chain.Admit(spec, {}).ok());
  spec.mutable_intents()->set_allowed_countries(0, "CN");
  auto china = chain.Admit(spec, {});
  REQUIRE(china.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(china.status().message(),
                          "admission policy \"placeable\": spec.intents.allowedCountries: no "
                          "known region satisfies"));
  CHECK(absl::StrContains(china.status().message(), "known regions: tokyo-1 (JP)"));

  chain.Install(Parsed("v3"));
  CHECK(absl::StrContains(chain.Admit(spec, {}).status().message(), "fr (FR)"));

  v1::ApplicationSpec mismatch = Spec();
  mismatch.mutable_intents()->add_allowed_countries("DE");
  mismatch.mutable_intents()->add_allowed_regions("fr");
  auto none = chain.Admit(mismatch, {});
  CHECK(absl::StrContains(none.status().message(),
                          "\"placeable\": spec.intents.allowedRegions: no known region"));

  mismatch.mutable_intents()->add_allowed_regions("de");
  CHECK(chain.Admit(mismatch, {}).ok());
  // Nothing known at all: nothing to check against.
  AdmissionChain empty;
  CHECK(empty.Admit(spec, {}).ok());
}

TEST_CASE("Only a bundle signed with the configured key is installed", "[admission]") {
  Ed25519Signer signer, stranger;
  const std::string key = signer.PublicPem();
  AdmissionChain chain;
  const std::string v1 = Bundle("v1");
  REQUIRE(InstallSignedBundle(chain, v1, signer.Sign(v1), key).ok());
  CHECK(chain.version() == "v1");

  const std::string v2 = Bundle("v2");
  auto forged = InstallSignedBundle(chain, v2, stranger.Sign(v2), key);
  CHECK(absl::StrContains(forged.message(), "signature: does not verify"));
  auto tampered = InstallSignedBundle(chain, v2, signer.Sign(v1), key);
  CHECK(absl::StrContains(tampered.message(), "signature: does not verify"));
  CHECK(absl::StrContains(InstallSignedBundle(chain, v2, "%%%", key).message(),
                          "signature: is not base64"));
  CHECK(absl::StrContains(InstallSignedBundle(chain, v2, signer.Sign(v2), "nope").message(),
                          "public_key: is not a PEM public key"));
  const std::string broken = "apiVersion: codeco.io/v1\nkind: PolicyBundle\n";
  CHECK(absl::StrContains(InstallSignedBundle(chain, broken, signer.Sign(broken), key).message(),
                          "version: required"));
  CHECK(chain.version() == "v1");  // every refusal left v1 in force

  REQUIRE(InstallSignedBundle(chain, v2, signer.Sign(v2), key).ok());
  CHECK(chain.version() == "v2");
  CHECK(VerifyBundleSignature(v2, "  " + signer.Sign(v2) + "\n", key).ok());
}

TEST_CASE("Applying through the chain keeps the patch and refuses without storing", "[admission]") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store{*kv, {.max_events = 100}};
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  AdmissionChain chain;
  chain.Install(Parsed("2026-11-27.1"));
  ApplicationManager manager{store, scheduler, clock, {}, nullptr, &chain};

  const std::string cam = R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: shop
  labels: {codeco.io/data-class: personal}
spec:
  appName: shop
  COUNTRIES
  codecoapp-msspec:
    - serviceName: web
      podspec:
        containers:
          - name: web
            image: registry.example.org/web:1
)";
  v1::ApplyApplicationRequest request;
  request.set_cam_yaml(absl::StrReplaceAll(cam, {{"COUNTRIES", ""}}));
  auto applied = manager.Apply(request);
  INFO(applied.status().ToString());
  REQUIRE(applied.ok());
  CHECK(applied->application().spec().intents().allowed_countries_size() == 2);
  bool warned = false;
  for (const auto& w : applied->warnings()) warned |= absl::StrContains(w, "\"residency\"");
  CHECK(warned);
  v1::ListApplicationRevisionsRequest revisions;
  revisions.set_name("shop");
  auto listed = manager.ListRevisions(revisions);
  REQUIRE(listed.ok());
  REQUIRE(listed->revisions_size() == 1);
  CHECK(listed->revisions(0).policy_bundle_version() == "2026-11-27.1");
  CHECK(absl::StrContains(listed->revisions(0).admission_patch(), "allowedCountries"));

  // The same CAM again changes nothing: the admitted spec is what is stored.
  auto again = manager.Apply(request);
  REQUIRE(again.ok());
  CHECK(again->application().spec_revision() == 1);

  v1::ApplyApplicationRequest refused_request;
  refused_request.set_cam_yaml(absl::StrReplaceAll(
      absl::StrReplaceAll(cam,
                          {{"name: shop", "name: shop2"}, {"appName: shop", "appName: shop2"}}),
      {{"COUNTRIES", "intents: {allowedCountries: [US]}"}}));
  auto refused = manager.Apply(refused_request);
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(refused.status().message(), "spec.intents.allowedCountries[0]"));
  v1::GetApplicationRequest get;
  get.set_name("shop2");
  CHECK(absl::IsNotFound(manager.Get(get).status()));
  CHECK(scheduler.requests().size() == 1);
}

}  // namespace
}  // namespace codeco::acm

namespace codeco::acm {
namespace {

// A bundle with 9 days of half-hourly carbon series up to `now` for fr and
// de: fr is cleanest from 02:00 to 05:00 each day, de is dirtier throughout.
std::string CarbonBundle(absl::Time now) {
  const absl::Time start = now - absl::Hours(24 * 9);
  std::string fr, de;
  for (int i = 0; i < 9 * 48; ++i) {
    const int64_t seconds = absl::ToUnixSeconds(start + absl::Minutes(30) * i);
    const int64_t half_hour = (seconds % 86400) / 1800;
    const bool clean = half_hour >= 4 && half_hour < 10;
    absl::StrAppend(&fr, i ? ", " : "", clean ? 20 : 80);
    absl::StrAppend(&de, i ? ", " : "", clean ? 200 : 300);
  }
  return absl::StrCat(R"(apiVersion: codeco.io/v1
kind: PolicyBundle
version: carbon-1
regions:
  - {name: fr, country: FR}
  - {name: de, country: DE}
carbon:
  regions:
    fr: {start: ")",
                      absl::FormatTime(absl::RFC3339_sec, start, absl::UTCTimeZone()),
                      R"(", step: 30m, gPerKwh: [)", fr, R"(]}
    de: {start: ")",
                      absl::FormatTime(absl::RFC3339_sec, start, absl::UTCTimeZone()),
                      R"(", step: 30m, gPerKwh: [)", de, "]}\n");
}

absl::Time Midnight() {
  absl::Time t;
  std::string err;
  REQUIRE(absl::ParseTime(absl::RFC3339_sec, "2026-11-27T00:00:00Z", &t, &err));
  return t;
}

TEST_CASE("The carbon policy schedules a delay-tolerant spec in the cleanest window",
          "[admission][carbon]") {
  SimulatedClock clock{Midnight() + absl::Hours(22)};  // 22:00; fr is clean from 02:00
  auto bundle = ParsePolicyBundle(CarbonBundle(clock.Now()));
  INFO(bundle.status().ToString());
  REQUIRE(bundle.ok());
  AdmissionChain chain({}, &clock);
  chain.Install(*bundle);

  v1::ApplicationSpec spec = Spec();
  spec.mutable_intents()->set_expected_duration_ns(absl::ToInt64Nanoseconds(absl::Hours(2)));
  *spec.mutable_intents()->mutable_deadline() = ToProtoTimestamp(clock.Now() + absl::Hours(12));
  auto admitted = chain.Admit(spec, {});
  INFO(admitted.status().ToString());
  REQUIRE(admitted.ok());
  const v1::Intents& intents = admitted->spec.intents();
  REQUIRE(intents.allowed_regions_size() == 1);
  CHECK(intents.allowed_regions(0) == "fr");
  const absl::Time start = FromProtoTimestamp(intents.earliest_start_time());
  CHECK(start >= Midnight() + absl::Hours(26));                   // 02:00 the next day, or later
  CHECK(start + absl::Hours(2) <= Midnight() + absl::Hours(29));  // ends by 05:00
  CHECK(absl::StrContains(admitted->json_patch, R"("path":"/intents/earliestStartTime")"));
  REQUIRE(admitted->warnings.size() == 1);
  CHECK(absl::StrContains(admitted->warnings[0], "admission policy \"carbon\": runs in fr from"));

  // Kept to Germany by residency, it runs there at its cleanest.
  spec.mutable_intents()->add_allowed_countries("DE");
  auto germany = chain.Admit(spec, {});
  REQUIRE(germany.ok());
  CHECK(germany->spec.intents().allowed_regions(0) == "de");

  // A deadline the run cannot meet is refused; a deadline alone is reported.
  *spec.mutable_intents()->mutable_deadline() = ToProtoTimestamp(clock.Now() + absl::Hours(1));
  auto late = chain.Admit(spec, {});
  CHECK(absl::StrContains(late.status().message(),
                          "admission policy \"carbon\": spec.intents.deadline: a 2h run started "
                          "now"));
  spec.mutable_intents()->set_expected_duration_ns(0);
  auto alone = chain.Admit(spec, {});
  REQUIRE(alone.ok());
  REQUIRE(alone->warnings.size() == 1);
  CHECK(absl::StrContains(alone->warnings[0],
                          "spec.intents.deadline: not acted on (no intents.duration)"));
}

TEST_CASE("An application held for its start time is placed only from then on",
          "[admission][carbon]") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store{*kv, {.max_events = 100}};
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock{Midnight() + absl::Hours(22)};
  auto bundle = ParsePolicyBundle(CarbonBundle(clock.Now()));
  REQUIRE(bundle.ok());
  AdmissionChain chain({}, &clock);
  chain.Install(*bundle);
  ApplicationManager manager{store, scheduler, clock, {}, nullptr, &chain};

  v1::ApplyApplicationRequest request;
  request.set_cam_yaml(R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata: {name: nightly}
spec:
  appName: nightly
  intents: {duration: 2h, deadline: "2026-11-28T10:00:00Z"}
  codecoapp-msspec:
    - serviceName: batch
      podspec:
        containers: [{name: batch, image: "registry.example.org/batch:1"}]
)");
  auto applied = manager.Apply(request);
  INFO(applied.status().ToString());
  REQUIRE(applied.ok());
  const absl::Time start =
      FromProtoTimestamp(applied->application().spec().intents().earliest_start_time());
  CHECK(start > clock.Now());
  CHECK(
      absl::StrContains(applied->application().status().error_msg(), "waiting for its start time"));
  CHECK(scheduler.requests().empty());
  REQUIRE(manager.Reconcile().ok());
  CHECK(scheduler.requests().empty());

  // Day 2: a new bundle in which Germany is now the cleaner; the waiting
  // application is admitted again, as submitted, and moves there.
  std::string greener_de = absl::StrReplaceAll(
      CarbonBundle(clock.Now()),
      {{"version: carbon-1", "version: carbon-2"}, {"200", "5"}, {"300", "10"}});
  auto second = ParsePolicyBundle(greener_de);
  REQUIRE(second.ok());
  chain.Install(*second);
  auto readmitted = manager.ReadmitWaiting();
  REQUIRE(readmitted.ok());
  CHECK(readmitted->changed == std::vector<std::string>{"nightly"});
  CHECK(readmitted->refused.empty());
  v1::GetApplicationRequest get;
  get.set_name("nightly");
  auto now_app = manager.Get(get);
  REQUIRE(now_app.ok());
  CHECK(now_app->application().spec_revision() == 2);
  CHECK(now_app->application().spec().intents().allowed_regions(0) == "de");
  v1::ListApplicationRevisionsRequest revisions;
  revisions.set_name("nightly");
  auto listed = manager.ListRevisions(revisions);
  REQUIRE(listed.ok());
  CHECK(listed->revisions(0).change_cause() == "re-admitted under policy bundle carbon-2");
  CHECK(listed->revisions(0).submitted_spec().intents().allowed_regions().empty());
  // Nothing changed since: a second pass leaves it.
  CHECK(manager.ReadmitWaiting()->changed.empty());
  CHECK(scheduler.requests().empty());

  const absl::Time new_start =
      FromProtoTimestamp(now_app->application().spec().intents().earliest_start_time());
  clock.SetTime(new_start);
  REQUIRE(manager.Reconcile().ok());
  REQUIRE(scheduler.requests().size() == 1);
  CHECK(scheduler.requests()[0].metadata().name() == "nightly");
  CHECK(scheduler.requests()[0].spec_revision() == 2);
}

}  // namespace
}  // namespace codeco::acm

namespace codeco::acm {
namespace {

// A decision endpoint that answers what the test sets, and keeps what it
// was asked (the HTTP one is exercised against a live endpoint in
// acm_policy_bundle_test).
class ScriptedDecisions final : public PolicyDecisionPort {
 public:
  std::string Name() const override { return "http://127.0.0.1:8181/v1/data/codeco/admit"; }
  absl::StatusOr<std::string> Query(const std::string& request_json) const override {
    asked.push_back(request_json);
    return answer;
  }
  absl::StatusOr<std::string> answer = std::string(R"({"result": true})");
  mutable std::vector<std::string> asked;
};

TEST_CASE("An external decision endpoint allows refuses or patches a spec before the built-ins",
          "[admission]") {
  auto port = std::make_shared<ScriptedDecisions>();
  AdmissionChain chain({}, nullptr, ExternalPolicy{port, true});
  chain.Install(Parsed("v7"));
  v1::ApplicationSpec spec = Spec();
  spec.set_qos_class(v1::QOS_CLASS_GOLD);
  v1::ServiceSpec* web = spec.add_services();
  web->set_name("web");
  web->set_image("registry.example.org/web:1");
  web->set_replicas(1);

  // Allowed: asked with the spec, its labels and the bundle's version.
  auto allowed = chain.Admit(spec, Labels({{"team", "shop"}}));
  REQUIRE(allowed.ok());
  CHECK(allowed->json_patch.empty());
  REQUIRE(port->asked.size() == 1);
  const nlohmann::json asked = nlohmann::json::parse(port->asked[0]);
  CHECK(asked["input"]["spec"]["appName"] == "shop");
  CHECK(asked["input"]["labels"]["team"] == "shop");
  CHECK(asked["input"]["policyBundleVersion"] == "v7");

  // Refused, naming the field it gives.
  port->answer = std::string(
      R"({"result": {"allow": false, "reasons": [{"field": "spec.qosClass",
          "message": "Gold needs a cost centre"}, "and a second reason"]}})");
  auto refused = chain.Admit(spec, {});
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(refused.status().message(),
                          "admission policy \"webhook\": spec.qosClass: Gold needs a cost centre; "
                          "spec: and a second reason (decided by http://127.0.0.1:8181"));
  port->answer = std::string(R"({"result": false})");
  CHECK_THAT(std::string(chain.Admit(spec, {}).status().message()),
             Catch::Contains("admission policy \"webhook\": spec: refused by http://"));

  // Patched: the change is recorded and the built-ins see it (residency
  // refuses a country outside its rule that the endpoint added).
  port->answer = std::string(
      R"({"result": {"allow": true, "owner": "x", "warnings": ["checked by rego"],
          "patch": [{"op": "add", "path": "/intents",
                     "value": {"allowedCountries": ["FR"]}}]}})");
  auto patched = chain.Admit(spec, Labels({{"codeco.io/data-class", "personal"}}));
  INFO(patched.status().ToString());
  REQUIRE(patched.ok());
  REQUIRE(patched->spec.intents().allowed_countries_size() == 1);
  CHECK(patched->json_patch ==
        R"([{"op":"add","path":"/intents","value":{"allowedCountries":["FR"]}}])");
  std::string warnings = absl::StrJoin(patched->warnings, "\n");
  CHECK_THAT(warnings, Catch::Contains("result.owner: not a decision field; ignored") &&
                           Catch::Contains("checked by rego") &&
                           Catch::Contains("changed /intents"));
  port->answer = std::string(
      R"({"result": {"allow": true, "patch": [{"op": "add", "path": "/intents",
          "value": {"allowedCountries": ["US"]}}]}})");
  CHECK_THAT(
      std::string(
          chain.Admit(spec, Labels({{"codeco.io/data-class", "personal"}})).status().message()),
      Catch::Contains("admission policy \"residency\": spec.intents.allowedCountries[0]"));

  // No decision: an error, an undefined result, or a patch that breaks the
  // spec refuses (UNAVAILABLE: the client may retry) naming why.
  const std::vector<std::pair<absl::StatusOr<std::string>, std::string>> undecided = {
      {absl::UnavailableError("cannot connect"), "cannot connect"},
      {std::string("{}"), "result: is missing"},
      {std::string("not json"), "answer: is not JSON"},
      {std::string(R"({"result": {"allow": "yes"}})"), "result.allow: is required"},
      {std::string(R"({"result": {"allow": true, "reasons": [3]}})"), "result.reasons[0]"},
      {std::string(R"({"result": {"allow": true, "patch": [{"op": "add"}]}})"), "result.patch[0]"},
      {std::string(R"({"result": {"allow": true, "patch": [{"op": "remove", "path": "/x"}]}})"),
       "result.patch: does not apply"},
      {std::string(
           R"({"result": {"allow": true, "patch": [{"op": "add", "path": "/noSuchField",
               "value": 1}]}})"),
       "result.patch: makes a spec that does not read"},
      {std::string(R"({"result": {"allow": true, "patch": [{"op": "replace", "path": "/appName",
           "value": "other"}]}})"),
       "result.patch: must not change appName"},
  };
  for (const auto& [answer, why] : undecided) {
    port->answer = answer;
    auto status = chain.Admit(spec, {}).status();
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(status.message()),
               Catch::Contains("admission policy \"webhook\": no decision from http://") &&
                   Catch::Contains(why));
  }

  // Told to admit without a decision: admitted, with a warning.
  AdmissionChain lenient({}, nullptr, ExternalPolicy{port, false});
  port->answer = absl::UnavailableError("cannot connect");
  auto admitted = lenient.Admit(spec, {});
  REQUIRE(admitted.ok());
  REQUIRE(admitted->warnings.size() == 1);
  CHECK_THAT(admitted->warnings[0],
             Catch::Contains("no decision from http://") && Catch::Contains("admitted without it"));
}

}  // namespace
}  // namespace codeco::acm
