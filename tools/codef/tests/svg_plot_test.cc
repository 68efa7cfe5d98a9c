// The SVG writer: well-formed documents, escaped text, nice ticks, and
// series clipped to the plot area.
#include "svg_plot.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "xml_check.h"

namespace codeco::codef {
namespace {

using testing::CheckXml;

// Every "x,y" pair of a polyline's points attribute.
std::vector<std::pair<double, double>> PointsOf(const std::string& points) {
  std::vector<std::pair<double, double>> out;
  for (absl::string_view pair : absl::StrSplit(points, ' ', absl::SkipEmpty())) {
    std::vector<absl::string_view> xy = absl::StrSplit(pair, ',');
    REQUIRE(xy.size() == 2);
    double x = 0, y = 0;
    REQUIRE(absl::SimpleAtod(xy[0], &x));
    REQUIRE(absl::SimpleAtod(xy[1], &y));
    out.push_back({x, y});
  }
  return out;
}

TEST_CASE("the checker catches broken XML") {
  REQUIRE(CheckXml("<a><b/></a>").error.empty());
  REQUIRE_FALSE(CheckXml("<a><b></a>").error.empty());
  REQUIRE_FALSE(CheckXml("<a x=1/>").error.empty());
  REQUIRE_FALSE(CheckXml("<a>x & y</a>").error.empty());
  REQUIRE_FALSE(CheckXml("<a>x < y</a>").error.empty());
  REQUIRE_FALSE(CheckXml("<a/><b/>").error.empty());
}

TEST_CASE("a line plot is well-formed SVG with one polyline and legend entry per series") {
  LinePlot plot{.title = "Pending pods", .x_label = "time (min)", .y_label = "pods"};
  plot.series.push_back({.label = "waiting", .points = {{0, 0}, {1, 3}, {2, 5}, {3, 1}}});
  plot.series.push_back({.label = "bound", .points = {{0, 2}, {1, 4}, {2, 4}, {3, 6}}});
  std::string svg = RenderLinePlot(plot);
  auto check = CheckXml(svg);
  INFO(check.error << "\n" << svg);
  REQUIRE(check.error.empty());
  REQUIRE(check.elements["svg"] == 1);
  REQUIRE(check.elements["polyline"] == 2);
  REQUIRE(absl::StrContains(svg, ">waiting</text>"));
  REQUIRE(absl::StrContains(svg, ">bound</text>"));
  REQUIRE(absl::StrContains(svg, ">Pending pods</text>"));
  REQUIRE(absl::StrContains(svg, ">time (min)</text>"));
  // y ticks 0..6 (data 0-6), x ticks 0..3.
  REQUIRE(absl::StrContains(svg, "text-anchor=\"end\">6</text>"));
  REQUIRE(absl::StrContains(svg, "text-anchor=\"middle\">3</text>"));
  // Each polyline has its four points.
  for (const auto& [tag, attrs] : check.attributes) {
    if (tag == "polyline") REQUIRE(PointsOf(attrs.at("points")).size() == 4);
  }
}

TEST_CASE("text in a plot is escaped") {
  LinePlot plot{.title = "a < b & \"c\" 'd'", .x_label = "x>y", .y_label = "</svg>"};
  plot.series.push_back({.label = "<script>", .points = {{0, 1}, {1, 2}}});
  std::string svg = RenderLinePlot(plot);
  auto check = CheckXml(svg);
  INFO(check.error);
  REQUIRE(check.error.empty());
  REQUIRE(absl::StrContains(svg, "a &lt; b &amp; &quot;c&quot; &apos;d&apos;"));
  REQUIRE(absl::StrContains(svg, "&lt;script&gt;"));
  REQUIRE_FALSE(absl::StrContains(svg, "<script>"));
  REQUIRE(EscapeXml("x\x01y") == "x y");
}

TEST_CASE("series are clipped to the plot area") {
  LinePlot plot{.title = "clip", .x_min = 0, .x_max = 10, .y_min = 0, .y_max = 10};
  // Goes far above the fixed y range, below it, and past the x range.
  plot.series.push_back(
      {.label = "wild", .points = {{-5, 5}, {0, 5}, {2, 100}, {4, 5}, {6, -50}, {8, 5}, {20, 5}}});
  std::string svg = RenderLinePlot(plot);
  auto check = CheckXml(svg);
  INFO(check.error);
  REQUIRE(check.error.empty());
  PlotArea area = PlotAreaOf(plot);
  int polylines = 0;
  for (const auto& [tag, attrs] : check.attributes) {
    if (tag != "polyline") continue;
    ++polylines;
    for (const auto& [x, y] : PointsOf(attrs.at("points"))) {
      INFO(x << "," << y);
      REQUIRE(x >= area.left - 0.01);
      REQUIRE(x <= area.right + 0.01);
      REQUIRE(y >= area.top - 0.01);
      REQUIRE(y <= area.bottom + 0.01);
    }
  }
  // The line leaves the area twice (above, below): three visible pieces.
  REQUIRE(polylines == 3);
}

TEST_CASE("a long legend makes the picture taller and stays inside it") {
  LinePlot plot{.title = "many"};
  for (int i = 0; i < 30; ++i) {
    plot.series.push_back({.label = "cluster-" + std::to_string(i), .points = {{0, 1}, {1, i}}});
  }
  std::string svg = RenderLinePlot(plot);
  auto check = CheckXml(svg);
  REQUIRE(check.error.empty());
  double height = 0;
  for (const auto& [tag, attrs] : check.attributes) {
    if (tag == "svg") REQUIRE(absl::SimpleAtod(attrs.at("height"), &height));
  }
  REQUIRE(height > plot.height);
  int legend_entries = 0;
  for (const auto& [tag, attrs] : check.attributes) {
    if (tag != "text" || attrs.count("class") == 0 || attrs.at("class") != "legend") continue;
    ++legend_entries;
    double y = 0;
    REQUIRE(absl::SimpleAtod(attrs.at("y"), &y));
    REQUIRE(y < height);
    REQUIRE(y <= PlotAreaOf(plot).bottom + 4);
  }
  REQUIRE(legend_entries == 30);
}

TEST_CASE("an empty plot still has axes and says there is no data") {
  LinePlot plot{.title = "nothing"};
  plot.series.push_back({.label = "empty"});
  std::string svg = RenderLinePlot(plot);
  auto check = CheckXml(svg);
  REQUIRE(check.error.empty());
  REQUIRE(check.elements["polyline"] == 0);
  REQUIRE(absl::StrContains(svg, ">no data</text>"));
}

TEST_CASE("nice ticks step by 1 2 or 5 times a power of ten and cover the range") {
  REQUIRE(NiceTicks(0, 97, 6) == std::vector<double>{0, 20, 40, 60, 80, 100});
  std::vector<double> fifths = NiceTicks(0, 1, 6);
  REQUIRE(fifths.size() == 6);
  for (size_t i = 0; i < fifths.size(); ++i) REQUIRE(fifths[i] == Approx(0.2 * i).margin(1e-12));
  // (7.9 - 3.2) / 4 = 1.175 rounds up to a step of 2.
  REQUIRE(NiceTicks(3.2, 7.9, 5) == std::vector<double>{2, 4, 6, 8});
  std::vector<double> small = NiceTicks(-0.03, 0.07, 6);
  REQUIRE(small.size() == 7);
  for (size_t i = 0; i < small.size(); ++i) {
    REQUIRE(small[i] == Approx(-0.04 + 0.02 * i).margin(1e-12));
  }
}

}  // namespace
}  // namespace codeco::codef
