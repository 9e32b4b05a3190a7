package dev.kvrouter.examples.ab;

/** Reads sums out of the router's Prometheus text ({@code /metrics} on its admin port). */
public final class RouterMetrics {

  private RouterMetrics() {}

  /**
   * Sum of the samples named {@code name} whose label set contains {@code labelFilter} (e.g.
   * {@code outcome="within_block"}; empty for all).
   */
  public static double sum(String text, String name, String labelFilter) {
    double total = 0;
    for (String line : text.split("\n")) {
      if (line.isEmpty() || line.charAt(0) == '#' || !line.startsWith(name)) {
        continue;
      }
      int end = name.length();
      if (end < line.length() && line.charAt(end) != '{' && line.charAt(end) != ' ') {
        continue; // another metric sharing the prefix
      }
      int space = line.lastIndexOf(' ');
      String labels = line.charAt(end) == '{' ? line.substring(end, line.indexOf('}', end) + 1) : "";
      if (!labelFilter.isEmpty() && !labels.contains(labelFilter)) {
        continue;
      }
      try {
        total += Double.parseDouble(line.substring(space + 1).trim());
      } catch (NumberFormatException e) {
        // a malformed sample counts for nothing
      }
    }
    return total;
  }
}
