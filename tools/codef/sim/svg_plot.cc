#include "svg_plot.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace codeco::codef {
namespace {

// Margins around the plot area: room for tick labels, axis labels, the
// title and the legend (right).
constexpr double kMarginLeft = 72;
constexpr double kMarginRight = 180;
constexpr double kMarginTop = 36;
constexpr double kMarginBottom = 52;
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// Vertical distance between two legend entries.
constexpr double kLegendRow = 16;

std::string Px(double v) { return absl::StrFormat("%.2f", v); }

// The picture's height: as asked, or taller when the legend needs it.
int EffectiveHeight(const LinePlot& plot) {
  double legend_bottom = kMarginTop + 8 + kLegendRow * static_cast<double>(plot.series.size());
  return std::max(plot.height, static_cast<int>(std::ceil(legend_bottom + kMarginBottom)));
}

// Decimals that show a tick step exactly enough.
int DecimalsFor(double step) {
  if (step <= 0 || !std::isfinite(step)) return 0;
  int decimals = static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  return std::clamp(decimals, 0, 6);
}

std::string TickLabel(double value, int decimals) {
  if (std::fabs(value) < 1e-12) value = 0;  // no "-0"
  return absl::StrFormat("%.*f", decimals, value);
}

// Liang-Barsky: clips the segment (x0,y0)-(x1,y1) to the area. False when
// nothing is left; otherwise the ends are moved inside.
bool ClipSegment(const PlotArea& a, double& x0, double& y0, double& x1, double& y1) {
  double t0 = 0, t1 = 1;
  const double dx = x1 - x0, dy = y1 - y0;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {x0 - a.left, a.right - x0, y0 - a.top, a.bottom - y0};
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return false;
      continue;
    }
    double r = q[i] / p[i];
    if (p[i] < 0) {
      t0 = std::max(t0, r);
    } else {
      t1 = std::min(t1, r);
    }
    if (t0 > t1) return false;
  }
  const double nx0 = x0 + t0 * dx, ny0 = y0 + t0 * dy;
  const double nx1 = x0 + t1 * dx, ny1 = y0 + t1 * dy;
  x0 = nx0;
  y0 = ny0;
  x1 = nx1;
  y1 = ny1;
  return true;
}

struct Range {
  double lo = 0;
  double hi = 1;
};

// The axis range: fixed bounds where given, else the data's, rounded out to
// whole ticks; never empty.
Range AxisRange(std::optional<double> fixed_lo, std::optional<double> fixed_hi, double data_lo,
                double data_hi, bool from_zero, std::vector<double>* ticks) {
  bool have_data = data_lo <= data_hi;
  double lo = fixed_lo.value_or(have_data ? data_lo : 0);
  double hi = fixed_hi.value_or(have_data ? data_hi : 1);
  if (!fixed_lo.has_value() && from_zero && lo > 0) lo = 0;
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  *ticks = NiceTicks(lo, hi, 6);
  if (!fixed_lo.has_value()) lo = ticks->front();
  if (!fixed_hi.has_value()) hi = ticks->back();
  // Only the ticks inside the final range are drawn.
  std::vector<double> inside;
  for (double t : *ticks) {
    if (t >= lo - 1e-9 * (hi - lo) && t <= hi + 1e-9 * (hi - lo)) inside.push_back(t);
  }
  *ticks = std::move(inside);
  return {lo, hi};
}

}  // namespace

PlotArea PlotAreaOf(const LinePlot& plot) {
  return PlotArea{.left = kMarginLeft,
                  .top = kMarginTop,
                  .right = std::max(kMarginLeft + 10, plot.width - kMarginRight),
                  .bottom = std::max(kMarginTop + 10, EffectiveHeight(plot) - kMarginBottom)};
}

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab and newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) hi = lo + 1;
  max_ticks = std::max(max_ticks, 2);
  const double raw = (hi - lo) / (max_ticks - 1);
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  const double first = std::floor(lo / step + 1e-9) * step;
  const double last = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    double t = first + i * step;
    ticks.push_back(t);
    if (t >= last - step * 1e-9 || i > 1000) break;
  }
  return ticks;
}

std::string RenderLinePlot(const LinePlot& plot) {
  const PlotArea area = PlotAreaOf(plot);
  const int height = EffectiveHeight(plot);
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const PlotSeries& s : plot.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
  const bool has_points = x_lo <= x_hi;
  std::vector<double> x_ticks, y_ticks;
  Range xr = AxisRange(plot.x_min, plot.x_max, x_lo, x_hi, false, &x_ticks);
  Range yr = AxisRange(plot.y_min, plot.y_max, y_lo, y_hi, true, &y_ticks);
  auto to_x = [&](double x) {
    return area.left + (x - xr.lo) / (xr.hi - xr.lo) * (area.right - area.left);
  };
  auto to_y = [&](double y) {
    return area.bottom - (y - yr.lo) / (yr.hi - yr.lo) * (area.bottom - area.top);
  };

  std::string svg = absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", plot.width,
                                 "\" height=\"", height, "\" viewBox=\"0 0 ", plot.width, " ",
                                 height, "\" font-family=\"sans-serif\" font-size=\"12\">\n");
  absl::StrAppend(&svg, "<rect x=\"0\" y=\"0\" width=\"", plot.width, "\" height=\"", height,
                  "\" fill=\"white\"/>\n");
  absl::StrAppend(&svg, "<text x=\"", Px((area.left + area.right) / 2), "\" y=\"22\"",
                  " text-anchor=\"middle\" font-size=\"15\">", EscapeXml(plot.title), "</text>\n");

  // Grid and ticks.
  const int x_decimals = x_ticks.size() > 1 ? DecimalsFor(x_ticks[1] - x_ticks[0]) : 0;
  const int y_decimals = y_ticks.size() > 1 ? DecimalsFor(y_ticks[1] - y_ticks[0]) : 0;
  for (double t : x_ticks) {
    std::string x = Px(to_x(t));
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", x, "\" y1=\"", Px(area.top), "\" x2=\"", x,
                    "\" y2=\"", Px(area.bottom), "\" stroke=\"#e0e0e0\"/>\n");
    absl::StrAppend(&svg, "<text class=\"tick\" x=\"", x, "\" y=\"", Px(area.bottom + 16),
                    "\" text-anchor=\"middle\">", EscapeXml(TickLabel(t, x_decimals)), "</text>\n");
  }
  for (double t : y_ticks) {
    std::string y = Px(to_y(t));
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Px(area.left), "\" y1=\"", y, "\" x2=\"",
                    Px(area.right), "\" y2=\"", y, "\" stroke=\"#e0e0e0\"/>\n");
    absl::StrAppend(&svg, "<text class=\"tick\" x=\"", Px(area.left - 6), "\" y=\"",
                    Px(to_y(t) + 4), "\" text-anchor=\"end\">", EscapeXml(TickLabel(t, y_decimals)),
                    "</text>\n");
  }
  // Axes.
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Px(area.left), "\" y1=\"", Px(area.bottom),
                  "\" x2=\"", Px(area.right), "\" y2=\"", Px(area.bottom),
                  "\" stroke=\"black\"/>\n");
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Px(area.left), "\" y1=\"", Px(area.top),
                  "\" x2=\"", Px(area.left), "\" y2=\"", Px(area.bottom),
                  "\" stroke=\"black\"/>\n");
  absl::StrAppend(&svg, "<text x=\"", Px((area.left + area.right) / 2), "\" y=\"",
                  Px(height - 12.0), "\" text-anchor=\"middle\">", EscapeXml(plot.x_label),
                  "</text>\n");
  const double y_mid = (area.top + area.bottom) / 2;
  absl::StrAppend(&svg, "<text x=\"16\" y=\"", Px(y_mid),
                  "\" text-anchor=\"middle\" transform=\"rotate(-90 16 ", Px(y_mid), ")\">",
                  EscapeXml(plot.y_label), "</text>\n");
  if (!has_points) {
    absl::StrAppend(&svg, "<text x=\"", Px((area.left + area.right) / 2), "\" y=\"", Px(y_mid),
                    "\" text-anchor=\"middle\" fill=\"#888888\">no data</text>\n");
  }

  // Series: each visible run of segments becomes one polyline.
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& s = plot.series[i];
    const char* color = kPalette[i % std::size(kPalette)];
    std::vector<std::vector<std::pair<double, double>>> runs;
    std::vector<std::pair<double, double>> run;
    auto flush = [&] {
      if (run.size() >= 2) runs.push_back(run);
      if (run.size() == 1) runs.push_back({run[0], run[0]});  // a lone point: a dot-sized line
      run.clear();
    };
    std::optional<std::pair<double, double>> prev;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        flush();
        prev.reset();
        continue;
      }
      std::pair<double, double> p{to_x(x), to_y(y)};
      if (!prev.has_value()) {
        if (p.first >= area.left && p.first <= area.right && p.second >= area.top &&
            p.second <= area.bottom) {
          run.push_back(p);
        }
        prev = p;
        continue;
      }
      double x0 = prev->first, y0 = prev->second, x1 = p.first, y1 = p.second;
      prev = p;
      if (!ClipSegment(area, x0, y0, x1, y1)) {
        flush();
        continue;
      }
      bool continues = !run.empty() && std::fabs(run.back().first - x0) < 1e-6 &&
                       std::fabs(run.back().second - y0) < 1e-6;
      if (!continues) {
        flush();
        run.push_back({x0, y0});
      }
      run.push_back({x1, y1});
      // The segment left the area: the run ends here.
      if (x1 != p.first || y1 != p.second) flush();
    }
    flush();
    for (const auto& r : runs) {
      std::string points;
      for (const auto& [x, y] : r)
        absl::StrAppend(&points, points.empty() ? "" : " ", Px(x), ",", Px(y));
      absl::StrAppend(&svg, "<polyline class=\"series\" fill=\"none\" stroke=\"", color,
                      "\" stroke-width=\"1.6\" points=\"", points, "\"/>\n");
    }
    // Legend entry.
    double ly = area.top + 8 + kLegendRow * static_cast<double>(i);
    absl::StrAppend(&svg, "<line class=\"legend\" x1=\"", Px(area.right + 12), "\" y1=\"", Px(ly),
                    "\" x2=\"", Px(area.right + 34), "\" y2=\"", Px(ly), "\" stroke=\"", color,
                    "\" stroke-width=\"3\"/>\n");
    absl::StrAppend(&svg, "<text class=\"legend\" x=\"", Px(area.right + 40), "\" y=\"", Px(ly + 4),
                    "\">", EscapeXml(s.label), "</text>\n");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace codeco::codef
