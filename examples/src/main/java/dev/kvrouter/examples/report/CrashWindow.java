package dev.kvrouter.examples.report;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * What one worker's crash and restart did to a run, from the client's records: the requests sent before the crash,
 * while the worker was down and after it came back, how many of each failed, and how soon the router sent the
 * restarted worker traffic again. In-flight requests the crash killed were sent before it, so they count as failures
 * "before".
 *
 * @param worker the worker that crashed
 * @param atSeconds the crash, from the run's start
 * @param downSeconds how long it stayed down
 * @param before requests sent before the crash
 * @param during requests sent while it was down
 * @param after requests sent once it was back
 * @param failedOnCrashed failed requests the router had sent to that worker (by {@code x-kvrouter-served-by})
 * @param servedByCrashedAfter requests that worker served successfully once back
 * @param firstServedAfterSeconds from its restart to the send of the first request it then served; null if none
 * @param failureKinds failed requests by {@link RequestRecord#error()} kind
 */
public record CrashWindow(String worker, double atSeconds, double downSeconds, Phase before, Phase during,
    Phase after, int failedOnCrashed, int servedByCrashedAfter, Double firstServedAfterSeconds,
    Map<String, Integer> failureKinds) {

  /**
   * @param sent requests sent in the phase
   * @param failed of them, failed
   * @param ttftP50Ms median TTFT of the successful ones, null if none
   * @param ttftP99Ms their 99th percentile, null if none
   */
  public record Phase(int sent, int failed, Double ttftP50Ms, Double ttftP99Ms) {}

  public CrashWindow {
    Objects.requireNonNull(worker, "worker");
    failureKinds = Map.copyOf(failureKinds);
  }

  /** The crash of {@code worker} at {@code atSeconds} for {@code downSeconds}, read from {@code records}. */
  public static CrashWindow of(String worker, double atSeconds, double downSeconds, List<RequestRecord> records) {
    long crash = Math.round(atSeconds * 1e6);
    long back = crash + Math.round(downSeconds * 1e6);
    List<RequestRecord> b = new ArrayList<>();
    List<RequestRecord> d = new ArrayList<>();
    List<RequestRecord> a = new ArrayList<>();
    Map<String, Integer> kinds = new TreeMap<>();
    int failedOnCrashed = 0;
    int servedAfter = 0;
    long firstAfter = Long.MAX_VALUE;
    for (RequestRecord r : records) {
      if (r.sentMicros() < 0) {
        continue; // never sent: not the crash's doing
      }
      (r.sentMicros() < crash ? b : r.sentMicros() < back ? d : a).add(r);
      if (!r.ok()) {
        kinds.merge(r.error(), 1, Integer::sum);
        if (worker.equals(r.servedBy())) {
          failedOnCrashed++;
        }
      } else if (worker.equals(r.servedBy()) && r.sentMicros() >= back) {
        servedAfter++;
        firstAfter = Math.min(firstAfter, r.sentMicros());
      }
    }
    return new CrashWindow(worker, atSeconds, downSeconds, phase(b), phase(d), phase(a), failedOnCrashed, servedAfter,
        firstAfter == Long.MAX_VALUE ? null : (firstAfter - back) / 1e6, kinds);
  }

  private static Phase phase(List<RequestRecord> rs) {
    List<Long> ttft = new ArrayList<>();
    int failed = 0;
    for (RequestRecord r : rs) {
      if (!r.ok()) {
        failed++;
      } else if (r.ttftMicros() >= 0) {
        ttft.add(r.ttftMicros());
      }
    }
    Collections.sort(ttft);
    return new Phase(rs.size(), failed, quantileMs(ttft, 0.5), quantileMs(ttft, 0.99));
  }

  /** Nearest rank: exact, and a window holds a few hundred requests at most. */
  private static Double quantileMs(List<Long> sorted, double q) {
    if (sorted.isEmpty()) {
      return null;
    }
    int rank = (int) Math.ceil(q * sorted.size());
    return sorted.get(Math.max(0, rank - 1)) / 1000.0;
  }

  /** Failed requests over the whole run. */
  public int failed() {
    return before.failed + during.failed + after.failed;
  }
}
