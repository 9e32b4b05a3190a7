package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;

/**
 * Best-of-N sampling sent as N separate requests: {@code n} identical prompts arriving at the same instant
 * (siblings of one group), groups arriving at {@code rate} per second. The ideal is to compute the prompt once
 * and serve the other N-1 from cache; spreading siblings over workers computes it up to N times.
 *
 * <p>Options: {@code seed=1 groups=100 n=4 rate=5 arrival=poisson prompt=512..2048 output=64 format=tokens
 * vocab=1000..128000}.
 */
public final class BestOfNWorkload {

  public static final String NAME = "best-of-n";

  private BestOfNWorkload() {}

  public static Workload build(WorkloadOptions o) {
    long seed = o.longValue("seed", 1);
    int groups = o.intValue("groups", 100);
    int n = o.intValue("n", 4);
    double rate = o.doubleValue("rate", 5);
    Arrival arrival = o.arrival();
    IntRange prompt = o.range("prompt", new IntRange(512, 2048));
    IntRange output = o.range("output", IntRange.fixed(64));
    Prompt.Format format = o.format(Prompt.Format.TOKENS);
    TokenSpace space = o.tokenSpace();
    o.rejectUnknown(NAME);
    if (n < 1) {
      throw new IllegalArgumentException(NAME + ": n must be >= 1");
    }
    Rng rng = new Rng(Rng.derive(seed, 0x424F4E));
    List<WorkloadRequest> out = new ArrayList<>(groups * n);
    long t = 0;
    for (int g = 0; g < groups; g++) {
      if (g > 0) {
        t += arrival.nextGapMicros(rng, rate);
      }
      Segment s = new Segment(Rng.derive(seed, 30, g), Math.max(1, prompt.draw(rng)));
      Prompt p = format == Prompt.Format.CHAT ? Prompt.chat(List.of(Message.of("user", s))) : Prompt.tokens(List.of(s));
      int answer = Math.max(1, output.draw(rng));
      for (int k = 0; k < n; k++) {
        out.add(new WorkloadRequest(0, NAME + "-" + g + "-" + k, t, "group-" + g, p, answer));
      }
    }
    return new Workload(NAME, o.effective(), space, out);
  }
}
