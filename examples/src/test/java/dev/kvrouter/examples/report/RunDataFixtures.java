package dev.kvrouter.examples.report;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.HdrHistogram.Histogram;

/** Hand-built runs for summary and rendering tests. */
final class RunDataFixtures {

  private RunDataFixtures() {}

  static RequestRecord ok(int i, String worker, long ttftMs, long e2eMs, int prompt, int cached, int completion) {
    return new RequestRecord(i, "r" + i, null, i * 1000L, i * 1000L + 100, ttftMs * 1000, e2eMs * 1000, 200, null,
        worker, "d" + i, prompt, cached, completion, completion, 5_000);
  }

  /**
   * A run over workers a, b, c where every request's TTFT is {@code ttftMs}, with sim counters and two load
   * ticks.
   */
  static RunData run(String policy, long ttftMs, long cachedPerRequest) {
    List<RequestRecord> r = new ArrayList<>();
    String[] served = {"a", "a", "b", "c", "a", "b"};
    for (int i = 0; i < served.length; i++) {
      r.add(ok(i, served[i], ttftMs, ttftMs * 3, 1000, (int) cachedPerRequest, 11));
    }
    r.add(RequestRecord.unsent(6, "r6", null, 6000, "overflow"));
    Histogram itl = LatencyStats.newMicrosHistogram();
    for (int i = 0; i < 50; i++) {
      itl.recordValue(20_000 + i * 100);
    }
    Map<String, WorkerCounters> counters = new LinkedHashMap<>();
    counters.put("a", new WorkerCounters(3000, 3 * cachedPerRequest, 3000, 33, 3, 3000 - 3 * cachedPerRequest,
        3 * cachedPerRequest));
    counters.put("b", new WorkerCounters(2000, 2 * cachedPerRequest, 2000, 22, 2, 2000 - 2 * cachedPerRequest,
        2 * cachedPerRequest));
    counters.put("c", new WorkerCounters(1000, cachedPerRequest, 1000, 11, 1, 1000 - cachedPerRequest,
        cachedPerRequest));
    List<LoadSample> load = List.of(new LoadSample(0, "a", 3, 1), new LoadSample(0, "b", 0, 0),
        new LoadSample(0, "c", 0, 0), new LoadSample(250_000, "a", 1, 0), new LoadSample(250_000, "b", 1, 0),
        new LoadSample(250_000, "c", 1, 0), new LoadSample(500_000, "a", 0, 0));
    return new RunData(policy, List.of("a", "b", "c"), r, itl, 2_000_000, counters, load, 250_000,
        new RouterSnapshot(1_000_000_000L, 10_000_000, 50_000_000), new RouterSnapshot(1_600_000_000L, 12_000_000,
        60_000_000), 20_000_000, new RoutingOverhead(6, 120, 100, 400, 900, 0), 4, List.of("a note"), null);
  }
}
