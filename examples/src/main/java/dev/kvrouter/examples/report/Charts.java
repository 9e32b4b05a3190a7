package dev.kvrouter.examples.report;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.CategoryAxis;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.axis.ValueAxis;
import org.jfree.chart.plot.CategoryPlot;
import org.jfree.chart.plot.CombinedDomainXYPlot;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.category.BarRenderer;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.chart.renderer.xy.XYStepRenderer;
import org.jfree.data.category.DefaultCategoryDataset;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * PNG charts of a report, rendered headless with JFreeChart: per workload the TTFT distribution (CDF, log
 * time axis) of every policy and every worker's queue over time under each policy, and across workloads the
 * share of prompt tokens served from cache per policy beside the ideal.
 */
public final class Charts {

  private static final int WIDTH = 900;
  /** Tableau-10: distinct, print-safe; a policy or worker keeps its colour across charts. */
  private static final Color[] PALETTE = {new Color(0x1f77b4), new Color(0xff7f0e), new Color(0x2ca02c),
      new Color(0xd62728), new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2), new Color(0x7f7f7f),
      new Color(0xbcbd22), new Color(0x17becf)};
  private static final Color IDEAL = new Color(0x333333);

  static {
    System.setProperty("java.awt.headless", "true");
  }

  private Charts() {}

  /** Writes every chart into {@code dir}; returns the files written. */
  public static List<Path> write(AbReport report, Path dir) throws IOException {
    Files.createDirectories(dir);
    List<Path> out = new ArrayList<>();
    int i = 0;
    for (WorkloadResult w : report.workloads()) {
      String slug = String.format(Locale.ROOT, "%02d-%s", ++i, slug(w.spec()));
      Path cdf = dir.resolve("ttft-cdf-" + slug + ".png");
      ChartUtils.saveChartAsPNG(cdf.toFile(), ttftCdf(w), WIDTH, 520);
      out.add(cdf);
      if (w.results().stream().anyMatch(r -> r.load() != null && hasPoints(r.load()))) {
        Path load = dir.resolve("load-" + slug + ".png");
        ChartUtils.saveChartAsPNG(load.toFile(), load(w), WIDTH, 160 + 170 * w.results().size());
        out.add(load);
      }
    }
    if (!report.workloads().isEmpty()) {
      Path saved = dir.resolve("prefill-saved.png");
      ChartUtils.saveChartAsPNG(saved.toFile(), prefillSaved(report), WIDTH, 520);
      out.add(saved);
    }
    return out;
  }

  static JFreeChart ttftCdf(WorkloadResult w) {
    XYSeriesCollection data = new XYSeriesCollection();
    double min = Double.MAX_VALUE;
    for (PolicyResult r : w.results()) {
      XYSeries s = new XYSeries(r.policy(), false, true);
      for (double[] p : r.ttftCdf()) {
        if (p[0] > 0) {
          s.add(p[0], p[1]);
          min = Math.min(min, p[0]);
        }
      }
      data.addSeries(s);
    }
    ValueAxis x;
    if (min < Double.MAX_VALUE) {
      LogAxis log = new LogAxis("TTFT (ms, log scale)");
      log.setSmallestValue(Math.max(1e-3, min / 2));
      log.setNumberFormatOverride(new java.text.DecimalFormat("#,##0.###"));
      x = log;
    } else {
      x = new NumberAxis("TTFT (ms)");
    }
    NumberAxis y = new NumberAxis("fraction of requests");
    y.setRange(0, 1.0);
    XYLineAndShapeRenderer lines = new XYLineAndShapeRenderer(true, false);
    for (int i = 0; i < data.getSeriesCount(); i++) {
      lines.setSeriesStroke(i, new BasicStroke(2f));
      lines.setSeriesPaint(i, PALETTE[i % PALETTE.length]);
    }
    XYPlot plot = new XYPlot(data, x, y, lines);
    style(plot);
    return chart("TTFT distribution: " + w.spec(), plot);
  }

  static JFreeChart load(WorkloadResult w) {
    NumberAxis time = new NumberAxis("seconds from start");
    CombinedDomainXYPlot combined = new CombinedDomainXYPlot(time);
    combined.setGap(8);
    for (PolicyResult r : w.results()) {
      XYSeriesCollection data = new XYSeriesCollection();
      if (r.load() != null) {
        for (Map.Entry<String, List<double[]>> e : r.load().series().entrySet()) {
          XYSeries s = new XYSeries(e.getKey(), false, true);
          for (double[] p : e.getValue()) {
            s.add(p[0], p[1] + p[2]);
          }
          data.addSeries(s);
        }
      }
      NumberAxis y = new NumberAxis(r.policy());
      y.setAutoRangeIncludesZero(true);
      XYStepRenderer steps = new XYStepRenderer();
      for (int i = 0; i < data.getSeriesCount(); i++) {
        steps.setSeriesPaint(i, PALETTE[i % PALETTE.length]);
      }
      XYPlot sub = new XYPlot(data, null, y, steps);
      style(sub);
      combined.add(sub, 1);
    }
    if (!combined.getSubplots().isEmpty()) { // one legend for all: the workers, same colour in every subplot
      combined.setFixedLegendItems(combined.getSubplots().get(0).getLegendItems());
    }
    return chart("Running + waiting requests per worker: " + w.spec(), combined);
  }

  static JFreeChart prefillSaved(AbReport report) {
    DefaultCategoryDataset data = new DefaultCategoryDataset();
    for (WorkloadResult w : report.workloads()) {
      String col = w.spec().length() > 28 ? w.spec().substring(0, 27) + "~" : w.spec();
      for (PolicyResult r : w.results()) {
        data.addValue(r.cache().servedShare() * 100, r.policy(), col);
      }
      data.addValue(w.idealTokenShare() * 100, "ideal", col);
    }
    NumberAxis y = new NumberAxis("% of prompt tokens served from cache");
    y.setRange(0, 100);
    BarRenderer bars = new BarRenderer();
    bars.setBarPainter(new org.jfree.chart.renderer.category.StandardBarPainter());
    for (int i = 0; i < data.getRowCount(); i++) {
      bars.setSeriesPaint(i, "ideal".equals(data.getRowKey(i)) ? IDEAL : PALETTE[i % PALETTE.length]);
    }
    bars.setShadowVisible(false);
    bars.setDrawBarOutline(false);
    bars.setItemMargin(0.02);
    CategoryPlot plot = new CategoryPlot(data, new CategoryAxis("workload"), y, bars);
    plot.setBackgroundPaint(Color.WHITE);
    plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
    return chart("Prefill tokens saved by the prefix cache", plot);
  }

  private static JFreeChart chart(String title, org.jfree.chart.plot.Plot plot) {
    JFreeChart c = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, plot, true);
    c.setBackgroundPaint(Color.WHITE);
    return c;
  }

  private static void style(XYPlot p) {
    p.setBackgroundPaint(Color.WHITE);
    p.setDomainGridlinePaint(Color.LIGHT_GRAY);
    p.setRangeGridlinePaint(Color.LIGHT_GRAY);
  }

  private static boolean hasPoints(PolicyResult.LoadTimeline t) {
    return t.series().values().stream().anyMatch(l -> !l.isEmpty());
  }

  static String slug(String spec) {
    String s = spec.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9.]+", "-").replaceAll("(^-|-$)", "");
    return s.length() > 60 ? s.substring(0, 60) : s;
  }
}
