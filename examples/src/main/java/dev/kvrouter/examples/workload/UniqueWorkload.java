package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;

/**
 * The no-sharing control: every prompt unique, so a cache-aware router can only win by balancing load and must
 * not lose to a load-only one.
 *
 * <p>Options: {@code seed=1 count=400 rate=20 arrival=poisson prompt=512..2048 output=64 format=tokens
 * vocab=1000..128000}.
 */
public final class UniqueWorkload {

  public static final String NAME = "unique";

  private UniqueWorkload() {}

  public static Workload build(WorkloadOptions o) {
    long seed = o.longValue("seed", 1);
    int count = o.intValue("count", 400);
    double rate = o.doubleValue("rate", 20);
    Arrival arrival = o.arrival();
    IntRange prompt = o.range("prompt", new IntRange(512, 2048));
    IntRange output = o.range("output", IntRange.fixed(64));
    Prompt.Format format = o.format(Prompt.Format.TOKENS);
    TokenSpace space = o.tokenSpace();
    o.rejectUnknown(NAME);
    Rng rng = new Rng(Rng.derive(seed, 0x554E51));
    List<WorkloadRequest> out = new ArrayList<>(count);
    long t = 0;
    for (int i = 0; i < count; i++) {
      if (i > 0) {
        t += arrival.nextGapMicros(rng, rate);
      }
      Segment s = new Segment(Rng.derive(seed, 40, i), Math.max(1, prompt.draw(rng)));
      Prompt p = format == Prompt.Format.CHAT ? Prompt.chat(List.of(Message.of("user", s))) : Prompt.tokens(List.of(s));
      out.add(new WorkloadRequest(i, NAME + "-" + i, t, null, p, Math.max(1, output.draw(rng))));
    }
    return new Workload(NAME, o.effective(), space, out);
  }
}
