package dev.kvrouter.extproc.template;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;

/** Locates and reads the golden fixtures written by scripts/fixtures/chat_templates*.py. */
final class GoldenFixtures {
  static final ObjectMapper JSON = new ObjectMapper();

  /** The instant the Python generators freeze {@code datetime.now()} at. */
  static final LocalDateTime FROZEN_NOW = LocalDateTime.of(2025, 3, 7, 9, 5, 3, 123_456_000);

  static final TemplateEnvironment ENV = new TemplateEnvironment(
      Clock.fixed(FROZEN_NOW.toInstant(ZoneOffset.UTC), ZoneOffset.UTC), RenderLimits.DEFAULT);

  private GoldenFixtures() {}

  static Path root() {
    String root = System.getProperty("kvrouter.root");
    if (root == null) {
      throw new IllegalStateException("system property kvrouter.root is not set (surefire sets it)");
    }
    return Path.of(root);
  }

  static Path fixture(String name) {
    Path p = root().resolve("ext-proc/src/test/resources/fixtures/templates").resolve(name);
    if (!Files.isRegularFile(p)) {
      throw new IllegalStateException("missing golden fixture " + p
          + " (regenerate with .venv/bin/python scripts/fixtures/chat_templates.py)");
    }
    return p;
  }

  static JsonNode read(String name) {
    try {
      return JSON.readTree(fixture(name).toFile());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static String readString(Path p) {
    try {
      return Files.readString(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> toMap(JsonNode node) {
    return JSON.convertValue(node, Map.class);
  }

  @SuppressWarnings("unchecked")
  static List<Object> toList(JsonNode node) {
    return node == null || node.isNull() ? null : JSON.convertValue(node, List.class);
  }

  /** Where two strings first differ, with a little context: never the whole prompt. */
  static String firstDifference(String expected, String actual) {
    int n = Math.min(expected.length(), actual.length());
    int i = 0;
    while (i < n && expected.charAt(i) == actual.charAt(i)) {
      i++;
    }
    if (i == n && expected.length() == actual.length()) {
      return "equal";
    }
    int line = 1;
    int col = 1;
    for (int k = 0; k < i; k++) {
      if (expected.charAt(k) == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    return "first difference at char " + i + " (line " + line + ", col " + col + "; lengths " + expected.length()
        + " vs " + actual.length() + "): expected " + excerpt(expected, i) + " but got " + excerpt(actual, i);
  }

  private static String excerpt(String s, int i) {
    int from = Math.max(0, i - 15);
    int to = Math.min(s.length(), i + 25);
    return "\u00ab" + s.substring(from, to).replace("\n", "\\n").replace("\t", "\\t") + "\u00bb";
  }
}
