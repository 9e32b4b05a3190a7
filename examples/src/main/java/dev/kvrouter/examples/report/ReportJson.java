package dev.kvrouter.examples.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Reads and writes {@link AbReport} as JSON (records as objects, nulls kept so every field is present). */
public final class ReportJson {

  private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private ReportJson() {}

  public static String render(AbReport report) {
    try {
      return JSON.writeValueAsString(report);
    } catch (IOException e) {
      throw new IllegalStateException("report not serializable", e);
    }
  }

  /** Writes atomically (temp file, then move), so a report being rewritten after each run is never half. */
  public static void write(AbReport report, Path file) throws IOException {
    Path dir = file.toAbsolutePath().getParent();
    Files.createDirectories(dir);
    Path tmp = Files.createTempFile(dir, ".report", ".json.tmp");
    try {
      Files.writeString(tmp, render(report));
      Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
          java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  public static AbReport read(Path file) throws IOException {
    return JSON.readValue(file.toFile(), AbReport.class);
  }
}
