package dev.kvrouter.index;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** A trivially correct model of {@link KvIndex}: maps of maps, no bounds, no concurrency. */
final class ReferenceIndex {

  /** One worker's answer: {matched, gpu, cpu, disk, predicted, stale}. */
  record Match(WorkerId worker, int matched, int gpu, int cpu, int disk, int predicted, boolean stale) {}

  private final Map<WorkerId, Map<Long, Long>> handles = new HashMap<>();
  private final Map<WorkerId, Map<Long, int[]>> counts = new HashMap<>();
  private final Map<WorkerId, Map<Long, Long>> predicted = new HashMap<>();
  private final Map<WorkerId, Boolean> stale = new HashMap<>();
  private final Map<WorkerId, Boolean> eventStream = new HashMap<>();

  void register(WorkerId w) {
    handles.computeIfAbsent(w, k -> new HashMap<>());
    counts.computeIfAbsent(w, k -> new HashMap<>());
    predicted.computeIfAbsent(w, k -> new HashMap<>());
    stale.putIfAbsent(w, false);
    eventStream.putIfAbsent(w, false);
  }

  boolean registered(WorkerId w) {
    return handles.containsKey(w);
  }

  /** Whether {@code w} holds {@code our} in any tier. */
  boolean holds(WorkerId w, long our) {
    Map<Long, int[]> c = counts.get(w);
    return c != null && c.containsKey(our);
  }

  void remove(WorkerId w) {
    handles.remove(w);
    counts.remove(w);
    predicted.remove(w);
    stale.remove(w);
    eventStream.remove(w);
  }

  void store(WorkerId w, long engine, long our, Tier tier) {
    register(w);
    handles.get(w).put(engine, our);
    counts.get(w).computeIfAbsent(our, k -> new int[3])[tier.ordinal()]++;
  }

  void remove(WorkerId w, long engine, Tier tier) {
    Map<Long, Long> hs = handles.get(w);
    if (hs == null || !hs.containsKey(engine)) {
      return;
    }
    long our = hs.get(engine);
    int[] c = counts.get(w).get(our);
    if (c != null && c[tier.ordinal()] > 0) {
      c[tier.ordinal()]--;
    }
    if (c == null || c[0] + c[1] + c[2] == 0) {
      counts.get(w).remove(our);
      hs.remove(engine);
    }
  }

  void clear(WorkerId w) {
    if (handles.containsKey(w)) {
      handles.get(w).clear();
      counts.get(w).clear();
    }
  }

  void setStale(WorkerId w, boolean s) {
    stale.put(w, s);
  }

  void setEventStream(WorkerId w, boolean s) {
    eventStream.put(w, s);
  }

  void predict(WorkerId w, long[] hashes, int n, long now, long shortTtl, long longTtl) {
    register(w);
    long expiry = now + (eventStream.get(w) ? shortTtl : longTtl);
    for (int i = 0; i < n; i++) {
      predicted.get(w).merge(hashes[i], expiry, Math::max);
    }
  }

  void expire(long now) {
    predicted.values().forEach(m -> m.values().removeIf(e -> e <= now));
  }

  int size(WorkerId w) {
    return handles.containsKey(w) ? handles.get(w).size() : 0;
  }

  /** The answer per worker, sorted by worker, for workers holding block 0 really or predictedly. */
  List<Match> lookup(long[] hashes, int n) {
    Map<WorkerId, Match> out = new TreeMap<>();
    for (WorkerId w : handles.keySet()) {
      int m = 0;
      int cpu = 0;
      int disk = 0;
      while (m < n) {
        int[] c = counts.get(w).get(hashes[m]);
        if (c == null || c[0] + c[1] + c[2] == 0) {
          break;
        }
        if (c[0] == 0) {
          if (c[1] > 0) {
            cpu++;
          } else {
            disk++;
          }
        }
        m++;
      }
      int p = 0;
      while (p < n && predicted.get(w).containsKey(hashes[p])) {
        p++;
      }
      if (m > 0 || p > 0) {
        out.put(w, new Match(w, m, m - cpu - disk, cpu, disk, p, stale.get(w)));
      }
    }
    return new ArrayList<>(out.values());
  }

  static List<Match> of(PrefixMatches pm) {
    Map<WorkerId, Match> out = new TreeMap<>();
    for (int i = 0; i < pm.size(); i++) {
      out.put(pm.worker(i), new Match(pm.worker(i), pm.matchedBlocks(i), pm.gpuBlocks(i), pm.cpuBlocks(i),
          pm.diskBlocks(i), pm.predictedBlocks(i), pm.stale(i)));
    }
    return new ArrayList<>(out.values());
  }
}
