#pragma once
// A small SVG line-chart writer for CODEF reports: a frame with axes, "nice"
// ticks (1, 2, 5 times a power of ten) with labels and grid lines, axis
// labels, a title, a legend, and one polyline per series clipped to the
// plot area. Pure: returns the document text; all text is XML-escaped.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace codeco::codef {

/// One line of a chart: (x, y) points in data units, drawn in order.
/// Non-finite points break the line.
struct PlotSeries {
  /// Legend text.
  std::string label;
  /// The points.
  std::vector<std::pair<double, double>> points;
};

/// A line chart.
struct LinePlot {
  /// Title above the chart.
  std::string title;
  /// Label of the x axis.
  std::string x_label;
  /// Label of the y axis.
  std::string y_label;
  /// The lines, drawn in order with a fixed palette.
  std::vector<PlotSeries> series;
  /// Fixed bounds of the axes; unset = from the data (y from 0 when the data
  /// is not negative), rounded out to whole ticks.
  std::optional<double> x_min, x_max, y_min, y_max;
  /// Size of the whole picture, pixels (default 760 x 380).
  int width = 760;
  /// Height, pixels; taller when the legend needs more room.
  int height = 380;
};

/// Where the plot area sits in the picture, pixels (y grows downwards).
struct PlotArea {
  /// Left edge.
  double left = 0;
  /// Top edge.
  double top = 0;
  /// Right edge.
  double right = 0;
  /// Bottom edge.
  double bottom = 0;
};

/// The plot area of `plot` (inside margins for labels and the legend).
PlotArea PlotAreaOf(const LinePlot& plot);

/// `text` with &, <, >, " and ' replaced by entities.
std::string EscapeXml(std::string_view text);

/// Tick values covering [lo, hi] with a 1/2/5 x 10^k step, at most about
/// `max_ticks` of them; the first is <= lo and the last >= hi.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);

/// The SVG document of `plot`.
std::string RenderLinePlot(const LinePlot& plot);

}  // namespace codeco::codef
