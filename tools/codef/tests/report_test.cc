// The experiment report: CSV files read back by column name, the summary
// figures of a small hand-made run, and report.md with its plots.
#include "report.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "xml_check.h"

namespace codeco::codef {
namespace {

// Three samples. Pending: nothing, then 1 of 4 pods (500m of 2000m) waits,
// then none. Cluster a (two nodes of 1 CPU): 0 %, 75 %, 100 % allocated;
// its power 20 W, 40 W, 40 W. Cluster b (one node of 2 CPUs): 0, 0, 50 %.
std::map<std::string, std::string> HandMadeRun() {
  return {
      {"pending_pods.csv",
       "time_s,pending,unplaced,placed,unplaced_cpu_millicores,placed_cpu_millicores\n"
       "0.000,0,0,0,0,0\n"
       "10.000,2,1,3,500,1500\n"
       "20.000,0,0,4,0,2000\n"},
      {"node_usage.csv",
       "time_s,cluster,node,cpu_millicores,memory_bytes,cpu_utilization,cpu_requested_millicores,"
       "cpu_allocatable_millicores\n"
       "0.000,a,n-1,0,0,0.0000,0,1000\n"
       "0.000,a,n-2,0,0,0.0000,0,1000\n"
       "0.000,b,m,0,0,0.0000,0,2000\n"
       "10.000,a,n-1,1000,0,1.0000,1000,1000\n"
       "10.000,a,n-2,500,0,0.5000,500,1000\n"
       "10.000,b,m,0,0,0.0000,0,2000\n"
       "20.000,a,n-1,1000,0,1.0000,1000,1000\n"
       "20.000,a,n-2,1000,0,1.0000,1000,1000\n"
       "20.000,b,m,1000,0,0.5000,1000,2000\n"},
      {"node_energy.csv",
       "time_s,cluster,node,watts\n"
       "0.000,a,n-1,10.00\n0.000,a,n-2,10.00\n0.000,b,m,30.00\n"
       "10.000,a,n-1,20.00\n10.000,a,n-2,20.00\n10.000,b,m,30.00\n"
       "20.000,a,n-1,20.00\n20.000,a,n-2,20.00\n20.000,b,m,30.00\n"},
  };
}

TEST_CASE("a recorded run is summarized per sample and per cluster") {
  auto run = ReadRecordedRun(HandMadeRun());
  INFO(run.status().ToString());
  REQUIRE(run.ok());
  REQUIRE(run->clusters == std::vector<std::string>{"a", "b"});
  RunSummary s = Summarize(*run);
  REQUIRE(s.samples == 3);
  REQUIRE(s.last_time_s == Approx(20));
  REQUIRE(s.pending_share_peak == Approx(0.25));
  REQUIRE(s.pending_share_mean == Approx(0.25 / 3));
  REQUIRE(s.pending_cpu_share_peak == Approx(0.25));
  REQUIRE(s.not_running_share_peak == Approx(0.5));
  REQUIRE(s.unplaced_peak == 1);
  REQUIRE(s.clusters.size() == 2);
  REQUIRE(s.clusters[0].cpu_allocated_mean == Approx((0 + 0.75 + 1) / 3));
  REQUIRE(s.clusters[0].cpu_allocated_peak == Approx(1));
  REQUIRE(s.clusters[1].cpu_allocated_mean == Approx(0.5 / 3));
  // a: (20+40)/2*10 + 40*10 = 700 J; b: 30 W for 20 s = 600 J.
  REQUIRE(s.clusters[0].energy_joules == Approx(700));
  REQUIRE(s.clusters[1].energy_joules == Approx(600));
  REQUIRE(s.clusters[0].watts_mean == Approx(100.0 / 3));
  REQUIRE(s.energy_joules == Approx(1300));
}

TEST_CASE("the report has the summary table the clusters the plots and the events") {
  auto run = ReadRecordedRun(HandMadeRun());
  REQUIRE(run.ok());
  RunSummary summary = Summarize(*run);
  ReportContext context{.scenario = "hand-made",
                        .mode = "simulate",
                        .policy = "codeco",
                        .duration_s = 20,
                        .wall_s = 0.5,
                        .tasks = 4,
                        .events = {"at 10s: node_fail a/n-1: ok"},
                        .notes = {"a note"},
                        .csv_files = {"node_energy.csv", "node_usage.csv", "pending_pods.csv"}};
  auto files = BuildReport(context, *run, summary);
  REQUIRE(files.size() == 4);
  const std::string& md = files.at("report.md");
  INFO(md);
  for (const char* expected : {
           "# CODEF report: hand-made\n",
           "## Summary\n",
           "| scenario | hand-made |\n",
           "| policy | codeco |\n",
           "| duration simulated | 20.0 s |\n",
           "| wall time | 0.50 s |\n",
           "| tasks | 4 |\n",
           "| samples | 3 |\n",
           "| pending pods (waiting for a node), peak / mean | 25.0 % / 8.3 % (at most 1 waiting) "
           "|\n",
           "| pending CPU (requests waiting for a node), peak / mean | 25.0 % / 8.3 % |\n",
           "| energy (all nodes) | 1300 J |\n",
           "## Clusters\n",
           "| a | 58.3 % | 100.0 % | 33.3 W | 700 J |\n",
           "| b | 16.7 % | 50.0 % | 30.0 W | 600 J |\n",
           "![Pending pods over time](pending_pods.svg)",
           "![CPU allocated per cluster over time](cpu_allocation.svg)",
           "![Node power per cluster over time](node_power.svg)",
           "## Events\n\n- at 10s: node_fail a/n-1: ok\n",
           "## Notes\n\n- a note\n",
           "- [pending_pods.csv](pending_pods.csv)\n",
       }) {
    INFO(expected);
    REQUIRE(absl::StrContains(md, expected));
  }
  for (const char* svg : {"pending_pods.svg", "cpu_allocation.svg", "node_power.svg"}) {
    auto check = testing::CheckXml(files.at(svg));
    INFO(svg << ": " << check.error);
    REQUIRE(check.error.empty());
  }
  // One line per cluster in the cluster plots, three in the pending plot.
  REQUIRE(testing::CheckXml(files.at("cpu_allocation.svg")).elements["polyline"] == 2);
  REQUIRE(testing::CheckXml(files.at("pending_pods.svg")).elements["polyline"] == 3);
}

TEST_CASE("a report without recorded series says what is missing") {
  auto run = ReadRecordedRun({});
  REQUIRE(run.ok());
  auto files =
      BuildReport(ReportContext{.scenario = "empty", .mode = "emulate"}, *run, Summarize(*run));
  REQUIRE(files.size() == 1);
  REQUIRE(
      absl::StrContains(files.at("report.md"), "| pending pods | not recorded (pending_pods) |"));
  REQUIRE(absl::StrContains(files.at("report.md"), "| wall time | - |"));
  REQUIRE(absl::StrContains(files.at("report.md"), "| duration recorded |"));
}

TEST_CASE("bad CSV input names the file line and column") {
  auto files = HandMadeRun();
  files["pending_pods.csv"] = "time_s,pending\n0.000,1\n";
  auto missing = ReadRecordedRun(files);
  REQUIRE(absl::IsInvalidArgument(missing.status()));
  REQUIRE(absl::StrContains(missing.status().message(),
                            "pending_pods.csv:1: missing column \"unplaced\""));

  files = HandMadeRun();
  files["node_energy.csv"] = "time_s,cluster,node,watts\n0.000,a,n-1,lots\n";
  auto bad_number = ReadRecordedRun(files);
  REQUIRE(absl::StrContains(bad_number.status().message(),
                            "node_energy.csv:2: column watts: not a number: \"lots\""));

  files = HandMadeRun();
  files["node_usage.csv"] += "30.000,a\n";
  auto short_row = ReadRecordedRun(files);
  REQUIRE(absl::StrContains(short_row.status().message(), "node_usage.csv:11: 2 cells"));
}

TEST_CASE("policies are compared in one table") {
  auto run = ReadRecordedRun(HandMadeRun());
  REQUIRE(run.ok());
  RunSummary s = Summarize(*run);
  std::string table = ComparePolicies({{"kubefed", s}, {"codeco", s}});
  REQUIRE(absl::StrContains(
      table, "| kubefed | 25.0 % / 8.3 % | 25.0 % / 8.3 % | a 58 %, b 17 % | 1300 J |"));
  REQUIRE(absl::StrContains(table, "| codeco |"));
}

}  // namespace
}  // namespace codeco::codef
