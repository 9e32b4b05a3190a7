package dev.kvrouter.examples.loadgen;

import java.util.HashMap;
import java.util.Map;

/**
 * Just enough of the Prometheus text format to read engine counters: every sample line
 * {@code name{labels} value [timestamp]}, summed over label sets per sample name (a worker with several
 * engines or data-parallel ranks reports one series each). Comments and malformed lines are skipped.
 */
final class PrometheusText {

  private PrometheusText() {}

  static Map<String, Double> sums(String text) {
    Map<String, Double> out = new HashMap<>();
    int pos = 0;
    int len = text.length();
    while (pos < len) {
      int eol = text.indexOf('\n', pos);
      if (eol < 0) {
        eol = len;
      }
      sample(text, pos, eol, out);
      pos = eol + 1;
    }
    return out;
  }

  private static void sample(String text, int start, int end, Map<String, Double> out) {
    int i = start;
    while (i < end && text.charAt(i) == ' ') {
      i++;
    }
    if (i >= end || text.charAt(i) == '#') {
      return;
    }
    int nameStart = i;
    while (i < end && text.charAt(i) != '{' && text.charAt(i) != ' ') {
      i++;
    }
    String name = text.substring(nameStart, i);
    if (i < end && text.charAt(i) == '{') {
      boolean quoted = false;
      for (i++; i < end; i++) {
        char c = text.charAt(i);
        if (quoted && c == '\\') {
          i++;
        } else if (c == '"') {
          quoted = !quoted;
        } else if (c == '}' && !quoted) {
          break;
        }
      }
      i++;
    }
    String rest = i < end ? text.substring(i, end).trim() : "";
    int sp = rest.indexOf(' ');
    String v = sp < 0 ? rest : rest.substring(0, sp);
    double value;
    try {
      value = switch (v) {
        case "+Inf" -> Double.POSITIVE_INFINITY;
        case "-Inf" -> Double.NEGATIVE_INFINITY;
        default -> Double.parseDouble(v);
      };
    } catch (NumberFormatException e) {
      return;
    }
    if (!name.isEmpty()) {
      out.merge(name, value, Double::sum);
    }
  }
}
