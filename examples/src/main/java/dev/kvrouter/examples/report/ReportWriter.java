package dev.kvrouter.examples.report;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Writes a report as {@code report.json}, {@code report.md} and {@code charts/*.png} under one directory. */
public final class ReportWriter {

  private ReportWriter() {}

  /** Writes everything; returns the files written. */
  public static List<Path> writeAll(AbReport report, Path dir) throws IOException {
    Files.createDirectories(dir);
    List<Path> out = new ArrayList<>();
    Path json = dir.resolve("report.json");
    ReportJson.write(report, json);
    out.add(json);
    Path md = dir.resolve("report.md");
    Files.writeString(md, MarkdownReport.render(report));
    out.add(md);
    out.addAll(Charts.write(report, dir.resolve("charts")));
    return out;
  }
}
