package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;

/**
 * Many users behind a few long system prompts: each request is one of {@code prefixes} shared prefixes
 * (chosen uniformly) followed by a unique suffix. {@code sharing} is the prefix's share of the prompt, the knob
 * of the break-even sweep: 0 makes every prompt unique, 0.9 makes nine tenths of every prompt shared.
 *
 * <p>{@code questions} 0 (the default) gives every request its own suffix. {@code questions=q} gives each prefix
 * q fixed questions and draws one uniformly per request, so whole prompts repeat: the shape of inference-perf's
 * {@code shared_prefix} generator, which llm-d's published prefix-scheduling benchmark uses (150 groups x 5
 * prompts, a 6,000-token system prompt, a 1,200-token question, 1,000 output tokens; anchors 2.3). That
 * generator cycles through its shuffled prompts; drawing them uniformly gives the same mix.
 *
 * <p>Options: {@code seed=1 count=400 rate=20 arrival=poisson prompt=2048 sharing=0.8 prefixes=8 questions=0
 * output=64 format=chat vocab=1000..128000}.
 */
public final class SharedPrefixWorkload {

  public static final String NAME = "system-prompt";

  private SharedPrefixWorkload() {}

  public static Workload build(WorkloadOptions o) {
    long seed = o.longValue("seed", 1);
    int count = o.intValue("count", 400);
    double rate = o.doubleValue("rate", 20);
    Arrival arrival = o.arrival();
    int length = o.intValue("prompt", 2048);
    double sharing = o.fraction("sharing", 0.8, 0, 1);
    int prefixes = o.intValue("prefixes", 8);
    int questions = o.intValue("questions", 0);
    IntRange output = o.range("output", IntRange.fixed(64));
    Prompt.Format format = o.format(Prompt.Format.CHAT);
    TokenSpace space = o.tokenSpace();
    o.rejectUnknown(NAME);
    if (length < 1 || prefixes < 1 || count < 0 || questions < 0) {
      throw new IllegalArgumentException(NAME + ": prompt and prefixes must be >= 1, count and questions >= 0");
    }
    int prefixLength = (int) Math.round(sharing * length);
    int suffixLength = length - prefixLength;
    Rng rng = new Rng(Rng.derive(seed, 0x5157));
    List<WorkloadRequest> out = new ArrayList<>(count);
    long t = 0;
    for (int i = 0; i < count; i++) {
      if (i > 0) {
        t += arrival.nextGapMicros(rng, rate);
      }
      int group = rng.nextInt(prefixes);
      Segment prefix = new Segment(Rng.derive(seed, 1, group), prefixLength);
      // A fixed question is keyed by (prefix, question), never by i, so it repeats with its prefix.
      Segment suffix = questions == 0
          ? new Segment(Rng.derive(seed, 2, i), suffixLength)
          : new Segment(Rng.derive(seed, 3, group, rng.nextInt(questions)), suffixLength);
      Prompt p;
      if (format == Prompt.Format.CHAT) {
        List<Message> m = new ArrayList<>(2);
        if (prefixLength > 0) {
          m.add(Message.of("system", prefix));
        }
        m.add(Message.of("user", suffix));
        p = Prompt.chat(m);
      } else {
        p = Prompt.tokens(List.of(prefix, suffix));
      }
      out.add(new WorkloadRequest(i, NAME + "-" + i, t, "prefix-" + group, p, Math.max(1, output.draw(rng))));
    }
    return new Workload(NAME, o.effective(), space, out);
  }
}
