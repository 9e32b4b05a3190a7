package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;

/**
 * Multi-turn chat sessions: each turn resends the whole conversation so far (a system prompt shared by every
 * session, then alternating user and assistant messages) plus a new user message, so turn k+1 extends turn k's
 * prompt. Sessions start at {@code rate} per second; the next turn of a session arrives an exponential think
 * time after the previous one (open loop: it does not wait for the answer, so keep {@code think} well above
 * the expected latency). The assistant message resent in later turns has the length the turn asked for, as a
 * client that keeps the model's answer would.
 *
 * <p>Options: {@code seed=1 sessions=60 rate=2 arrival=poisson turns=2..8 think=8 system=256 user=32..256
 * output=32..256 format=chat vocab=1000..128000}.
 */
public final class MultiTurnChatWorkload {

  public static final String NAME = "multi-turn";

  private MultiTurnChatWorkload() {}

  public static Workload build(WorkloadOptions o) {
    long seed = o.longValue("seed", 1);
    int sessions = o.intValue("sessions", 60);
    double rate = o.doubleValue("rate", 2);
    Arrival arrival = o.arrival();
    IntRange turns = o.range("turns", new IntRange(2, 8));
    double think = o.doubleValue("think", 8);
    int system = o.intValue("system", 256);
    IntRange user = o.range("user", new IntRange(32, 256));
    IntRange output = o.range("output", new IntRange(32, 256));
    Prompt.Format format = o.format(Prompt.Format.CHAT);
    TokenSpace space = o.tokenSpace();
    o.rejectUnknown(NAME);
    if (turns.min() < 1 || think < 0) {
      throw new IllegalArgumentException(NAME + ": turns must be >= 1 and think >= 0");
    }
    Rng rng = new Rng(Rng.derive(seed, 0x4D54));
    Segment systemPrompt = new Segment(Rng.derive(seed, 10), system);
    List<WorkloadRequest> out = new ArrayList<>();
    long start = 0;
    for (int s = 0; s < sessions; s++) {
      if (s > 0) {
        start += arrival.nextGapMicros(rng, rate);
      }
      int n = turns.draw(rng);
      List<Message> history = new ArrayList<>();
      if (system > 0) {
        history.add(Message.of("system", systemPrompt));
      }
      long t = start;
      for (int k = 0; k < n; k++) {
        if (k > 0) {
          t += Math.round(rng.nextExponential(think * 1e6));
        }
        history.add(Message.of("user", new Segment(Rng.derive(seed, 11, s, k), Math.max(1, user.draw(rng)))));
        int answer = Math.max(1, output.draw(rng));
        Prompt p = format == Prompt.Format.CHAT ? Prompt.chat(history) : Prompt.tokens(flatten(history));
        out.add(new WorkloadRequest(0, NAME + "-" + s + "-" + k, t, "session-" + s, p, answer));
        history.add(Message.of("assistant", new Segment(Rng.derive(seed, 12, s, k), answer)));
      }
    }
    return new Workload(NAME, o.effective(), space, out);
  }

  private static List<Segment> flatten(List<Message> history) {
    List<Segment> segs = new ArrayList<>();
    for (Message m : history) {
      segs.addAll(m.segments());
    }
    return segs;
  }
}
