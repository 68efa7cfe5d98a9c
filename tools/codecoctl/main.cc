// codecoctl — the command-line client of codeco. `codecoctl help` lists the commands.
#include <cstring>
#include <iostream>
#include <map>
#include <set>

#include "cli.h"
#include "network.h"
#include "metadata.h"
#include "scores.h"

namespace {

constexpr char kUsage[] =
    "usage: codecoctl <command> [args]\n"
    "\n"
    "federation (the CODEF testbed on this machine):\n"
    "  up --scenario FILE [--insecure] [--no-prometheus] [--auction] [--timeout 60s]\n"
    "     [--hub-replicas N]\n"
    "      Start the emulated clusters, the hub's and every cluster's services, and\n"
    "      Prometheus; wait until healthy; print a summary. Later commands find it.\n"
    "      --auction: the hub's SWM runs the PDLC neighborhood auction per placement.\n"
    "      --hub-replicas N (2-3): the hub's ACM and SWM run N replicas each, one\n"
    "      leading, with their state in a three-member etcd cluster on loopback.\n"
    "      --set SERVICE.KEY=VALUE (repeatable): a setting of the hub's SERVICE,\n"
    "      e.g. --set swm.failure_grace=20s --set swm.state_backup_interval=10s.\n"
    "      --set-members SERVICE.KEY=VALUE (repeatable): the same for SERVICE of every\n"
    "      managed cluster, e.g. --set-members swm.hub_away_after=10s.\n"
    "  down\n"
    "      Stop everything `up` started.\n"
    "  restart CLUSTER/SERVICE [--kill] [--down-for 60s]\n"
    "      Stop one of them (SIGKILL with --kill, as a crash), leave it down for\n"
    "      --down-for (default 0s), start it again with the same command line on\n"
    "      the same addresses.\n"
    "  fault link A B [--rtt 50ms | --latency 25ms] [--bandwidth 10Mbps] [--loss 5%] "
    "[--cut|--heal]\n"
    "  fault node CLUSTER/NODE --fail|--recover|--load 90%|1500m [--memory 2Gi]\n"
    "  fault pod CLUSTER/POD --usage-profile '{type: constant, cpu: 800m}'\n"
    "  fault cluster NAME --partition|--heal|--load-factor 3\n"
    "  fault hub --cut|--heal\n"
    "      Change the emulated network, nodes and load at run time (--load: a node's\n"
    "      background load, a step in its usage; --load 0 removes it).\n"
    "\n"
    "workload migration (through the hub SWM; --swm ADDR overrides the federation's):\n"
    "  migrate APP/WORKLOAD [--to CLUSTER [--node NODE]] [--request-id ID]\n"
    "      Move one workload of a placed application: SWM reserves and starts it at the\n"
    "      target (its choice unless --to/--node), then removes the old pod.\n"
    "  get migrations [--app NAME] | get migration ID\n"
    "      The moves SWM made or refused, with their phase, source and target.\n"
    "  get backups [--app NAME]\n"
    "      The hub's newest backup of each stateful workload (what a move off a\n"
    "      failed node restores) and when it was taken.\n"
    "\n"
    "stateful migration (through the source cluster's checkpointer):\n"
    "  migrate POD --from CLUSTER --to CLUSTER --node NODE [--as NAME] [--container NAME]\n"
    "          [--repository REPO] [--request-id ID] [--no-wait] [--checkpointer ADDR]\n"
    "      Checkpoint POD's container, push it as an OCI image, restore and verify it on\n"
    "      NODE, then retire the source; a progress bar, then the time of each phase.\n"
    "\n"
    "applications (through the hub ACM; --acm ADDR overrides the federation's):\n"
    "  apply -f FILE [--dry-run] [--wait]    create or update applications from the CAMs of\n"
    "                                        FILE (each CodecoApp joins its appName's app);\n"
    "                                        --wait follows each operation until done\n"
    "  get apps|clusters                     list applications or registered clusters\n"
    "  get tree                              the clusters as their parents arrange them (with\n"
    "                                        the layered subtrees they report), each with its\n"
    "                                        missions and subtree's clusters, nodes, unreachable\n"
    "  get neighborhoods [--cluster NAME]    list neighborhoods (those containing NAME)\n"
    "  get revisions NAME                    the spec revisions of an application\n"
    "  get operations | operation ID [--wait] [--from acm|swm [--swm ADDR]]\n"
    "                                        ACM's operations (apply, delete, ...) / one;\n"
    "                                        --from swm: the hub SWM's (placements, removals);\n"
    "                                        --wait follows the operation until done\n"
    "  get endpoints SERVICE.APP [--cluster NAME] [--all]\n"
    "                                        a multi-cluster service's replicas in every\n"
    "                                        cluster, NAME's own and its region's first;\n"
    "                                        --all: with those not running yet\n"
    "  describe app NAME                     spec, placement, channel latencies vs bounds\n"
    "  delete app NAME                       delete an application (its pods are released)\n"
    "  delete -f FILE                        take each CodecoApp of FILE out of its application\n"
    "  delete cluster NAME [--force]         move its applications elsewhere, then unregister it\n"

    "  rollback app NAME --to-revision N     make spec revision N current again\n"
    "  watch app NAME [--from-revision N]    one line per change until deleted or Ctrl-C\n"
    "  watch apps [--from-revision N]        changes of every application\n"
    "  -o table|yaml|json                    output of apply, get, describe, rollback, watch\n"
    "\n"
    "missions (a workload for the clusters of a tree, through the hub ACM):\n"
    "  apply -f FILE                         a document of kind Mission creates or changes one\n"
    "                                        (examples/missions/; --dry-run only parses it)\n"
    "  get missions [NAME] [--cluster NAME]  clusters addressed, running, pending, failed; with\n"
    "                                        NAME one row per cluster (phase, pods, last report);\n"
    "                                        --cluster: that cluster's own ACM (what it relays)\n"
    "  delete mission NAME                   its clusters remove its pods\n"
    "\n"
    "network (the hub NetMA's measurements; --cluster NAME asks that cluster's NetMA):\n"
    "  get costmap [--metric delay|bandwidth|loss|energy] [-o json]\n"
    "      The ALTO cost map between clusters (-o json: the RFC 7285 document).\n"
    "  get links [-o json]                   measured links: RTT EMA/p50/p99, loss, age\n"
    "  get scores [--profile latency|greenness|resilience|cost] [--cluster NAME] [-o json]\n"
    "      PDLC's node and cluster scores (0-100, stability 0-1) and breach advisories.\n"
    "\n"
    "metadata (the MDMs' graphs; --mdm ADDR asks one):\n"
    "  get metadata [--type T] [--cluster NAME] [--where EXPR]... [-o yaml|json]\n"
    "      Entities (clusters, namespaces, nodes, pods, ...) with their owner and properties;\n"
    "      --where: P=V, P!=V, P<V, P<=V, P>V, P>=V, 'P in (V1,V2)', 'P contains V', P, !P\n"
    "      (P a property, a.b for nested ones; every --where must hold).\n"
    "  get metadata ID [--depth N]           one entity and what is up to N hops (1-5) away\n"
    "\n"
    "services:\n"
    "  health [ADDRESS] [--all] [--service NAME] [--timeout 5s]\n"
    "      grpc.health.v1.Health/Check of one service (default: the federation's ACM) or\n"
    "      of every service `up` started (--all). Exits 0 only when all are SERVING.\n"
    "\n"
    "connection flags: --insecure (plaintext, loopback only) or --ca F --cert F --key F;\n"
    "without them, the identity `codecoctl up` issued is used.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  using codeco::ctl::Args;
  const std::string command = argv[1];
  const std::set<std::string> connection = {"ca", "cert", "key", "timeout"};
  struct Command {
    int (*run)(const Args&);
    std::set<std::string> switches, valued;
  };
  const std::map<std::string, Command> commands = {
      {"health", {codeco::ctl::RunHealth, {"insecure", "all"}, {"service"}}},
      {"up",
       {codeco::ctl::RunUp,
        {"insecure", "no-prometheus", "auction"},
        {"scenario", "set", "set-members", "hub-replicas"}}},
      {"down", {codeco::ctl::RunDown, {}, {}}},
      {"restart", {codeco::ctl::RunRestart, {"kill"}, {"down-for"}}},
      {"apply",
       {codeco::ctl::RunApply, {"insecure", "dry-run", "wait"}, {"f", "filename", "o", "acm"}}},
      {"get",
       {codeco::ctl::RunGet,
        {"insecure", "wait", "all"},
        {"o", "acm", "cluster", "from", "swm", "app"}}},
      {"describe", {codeco::ctl::RunDescribe, {"insecure"}, {"o", "acm"}}},
      {"delete", {codeco::ctl::RunDelete, {"insecure", "force"}, {"acm", "f", "filename"}}},
      {"rollback", {codeco::ctl::RunRollback, {"insecure"}, {"o", "acm", "to-revision"}}},
      {"watch", {codeco::ctl::RunWatch, {"insecure"}, {"o", "acm", "from-revision"}}},
      {"migrate",
       {codeco::ctl::RunMigrate,
        {"insecure", "no-wait"},
        {"from", "to", "node", "as", "container", "repository", "request-id", "checkpointer",
         "swm"}}},
      {"fault",
       {codeco::ctl::RunFault,
        {"cut", "heal", "fail", "recover", "partition", "succeed"},
        {"rtt", "latency", "bandwidth", "loss", "codef", "load", "memory", "usage-profile",
         "load-factor", "message"}}},
  };
  // `get costmap|links` read NetMA, not ACM.
  const bool network = command == "get" && argc > 2 &&
                       (std::strcmp(argv[2], "costmap") == 0 || std::strcmp(argv[2], "links") == 0);
  const Command get_network = {codeco::ctl::RunGetNetwork,
                               {"insecure"},
                               {"o", "metric", "cluster", "netma", "neighborhood"}};
  // `get scores` reads every cluster's PDLC.
  const bool scores = command == "get" && argc > 2 && std::strcmp(argv[2], "scores") == 0;
  const Command get_scores = {codeco::ctl::RunGetScores, {"insecure"}, {"o", "profile", "cluster", "pdlc"}};
  // `get metadata` reads the MDMs.
  const bool metadata = command == "get" && argc > 2 && std::strcmp(argv[2], "metadata") == 0;
  const Command get_metadata = {
      codeco::ctl::RunGetMetadata, {"insecure"}, {"o", "type", "cluster", "where", "depth", "mdm"}};
  auto it = commands.find(command);
  if (network || scores || metadata) it = commands.end();
  const Command* chosen = scores     ? &get_scores
                          : metadata ? &get_metadata
                          : network  ? &get_network
                          : it == commands.end() ? nullptr : &it->second;
  if (chosen == nullptr) {
    std::cerr << "codecoctl: unknown command \"" << command << "\"\n" << kUsage;
    return 2;
  }
  std::set<std::string> valued = chosen->valued;
  valued.insert(connection.begin(), connection.end());
  auto args = codeco::ctl::ParseArgs(argc, argv, 2, chosen->switches, valued);
  if (!args.ok()) {
    std::cerr << "codecoctl " << command << ": " << args.status().message() << "\n";
    return 2;
  }
  return chosen->run(*args);
}
