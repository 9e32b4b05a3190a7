package dev.kvrouter.examples.report;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * What one worker's (or the router's) crash and restart did to a run, from the client's records: the requests sent
 * before the crash, while it was down and after it came back, how many of each failed, how much of their prompts the
 * workers served from cache, how many the router did not route (no decision id: Envoy's pool took them), and how soon
 * the router sent a restarted worker traffic again. In-flight requests the crash killed were sent before it, so they
 * count as failures "before".
 *
 * @param worker the worker that crashed, or {@link #ROUTER}
 * @param atSeconds the crash, from the run's start
 * @param downSeconds how long it stayed down
 * @param before requests sent before the crash
 * @param during requests sent while it was down
 * @param after requests sent once it was back
 * @param failedOnCrashed failed requests the router had sent to that worker (by {@code x-kvrouter-served-by})
 * @param servedByCrashedAfter requests that worker served successfully once back
 * @param firstServedAfterSeconds from its restart to the send of the first request it then served; null if none
 * @param firstRoutedAfterSeconds from the restart to the send of the first request the router routed (a decision
 *     id) among those that succeeded: after a router crash, when the new router took over from Envoy's pool; null
 *     if none
 * @param failureKinds failed requests by {@link RequestRecord#error()} kind
 */
public record CrashWindow(String worker, double atSeconds, double downSeconds, Phase before, Phase during,
    Phase after, int failedOnCrashed, int servedByCrashedAfter, Double firstServedAfterSeconds,
    Double firstRoutedAfterSeconds, Map<String, Integer> failureKinds) {

  /** The {@code worker} of a router crash. */
  public static final String ROUTER = "router";

  /**
   * @param sent requests sent in the phase
   * @param failed of them, failed
   * @param ttftP50Ms median TTFT of the successful ones, null if none
   * @param ttftP99Ms their 99th percentile, null if none
   * @param servedShare of the successful ones' prompt tokens, the share the workers reported cached (0 if none)
   * @param withoutDecision successful ones without the router's decision id: not routed by it
   */
  public record Phase(int sent, int failed, Double ttftP50Ms, Double ttftP99Ms, double servedShare,
      int withoutDecision) {}

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
    long firstRouted = Long.MAX_VALUE;
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
      } else if (r.sentMicros() >= back) {
        if (worker.equals(r.servedBy())) {
          servedAfter++;
          firstAfter = Math.min(firstAfter, r.sentMicros());
        }
        if (r.decisionId() != null) {
          firstRouted = Math.min(firstRouted, r.sentMicros());
        }
      }
    }
    return new CrashWindow(worker, atSeconds, downSeconds, phase(b), phase(d), phase(a), failedOnCrashed, servedAfter,
        firstAfter == Long.MAX_VALUE ? null : (firstAfter - back) / 1e6,
        firstRouted == Long.MAX_VALUE ? null : (firstRouted - back) / 1e6, kinds);
  }

  private static Phase phase(List<RequestRecord> rs) {
    List<Long> ttft = new ArrayList<>();
    int failed = 0;
    int undecided = 0;
    long prompt = 0;
    long cached = 0;
    for (RequestRecord r : rs) {
      if (!r.ok()) {
        failed++;
        continue;
      }
      if (r.ttftMicros() >= 0) {
        ttft.add(r.ttftMicros());
      }
      if (r.decisionId() == null) {
        undecided++;
      }
      if (r.promptTokens() > 0 && r.cachedTokens() >= 0) {
        prompt += r.promptTokens();
        cached += r.cachedTokens();
      }
    }
    Collections.sort(ttft);
    double share = prompt == 0 ? 0 : Math.round(cached * 1e4 / prompt) / 1e4;
    return new Phase(rs.size(), failed, quantileMs(ttft, 0.5), quantileMs(ttft, 0.99), share, undecided);
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
