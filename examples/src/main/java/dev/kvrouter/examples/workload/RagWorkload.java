package dev.kvrouter.examples.workload;

import java.util.ArrayList;
import java.util.List;

/**
 * Retrieval-augmented generation over a shared corpus: each prompt is a short shared instruction, one of
 * {@code documents} documents (Zipf popularity with exponent {@code zipf}, lengths fixed per document) and a
 * unique question. {@code sharing} is the probability that the document comes from the shared corpus; the
 * rest get a fresh document of the same length distribution, so 0 removes all reuse but the instruction.
 *
 * <p>Options: {@code seed=1 count=400 rate=20 arrival=poisson documents=32 document=1024..3072 zipf=1.1
 * instruction=64 question=16..96 sharing=1 output=64 format=tokens vocab=1000..128000}.
 */
public final class RagWorkload {

  public static final String NAME = "rag";

  private RagWorkload() {}

  public static Workload build(WorkloadOptions o) {
    long seed = o.longValue("seed", 1);
    int count = o.intValue("count", 400);
    double rate = o.doubleValue("rate", 20);
    Arrival arrival = o.arrival();
    int documents = o.intValue("documents", 32);
    IntRange documentLength = o.range("document", new IntRange(1024, 3072));
    double zipfExponent = o.doubleValue("zipf", 1.1);
    int instruction = o.intValue("instruction", 64);
    IntRange question = o.range("question", new IntRange(16, 96));
    double sharing = o.fraction("sharing", 1.0, 0, 1);
    IntRange output = o.range("output", IntRange.fixed(64));
    Prompt.Format format = o.format(Prompt.Format.TOKENS);
    TokenSpace space = o.tokenSpace();
    o.rejectUnknown(NAME);
    Rng docRng = new Rng(Rng.derive(seed, 0x444F43));
    int[] docLength = new int[documents];
    for (int d = 0; d < documents; d++) {
      docLength[d] = documentLength.draw(docRng);
    }
    Zipf popularity = new Zipf(documents, zipfExponent);
    Segment instr = new Segment(Rng.derive(seed, 20), instruction);
    Rng rng = new Rng(Rng.derive(seed, 0x524147));
    List<WorkloadRequest> out = new ArrayList<>(count);
    long t = 0;
    for (int i = 0; i < count; i++) {
      if (i > 0) {
        t += arrival.nextGapMicros(rng, rate);
      }
      Segment doc;
      String group;
      if (rng.nextDouble() < sharing) {
        int d = popularity.sample(rng);
        doc = new Segment(Rng.derive(seed, 21, d), docLength[d]);
        group = "doc-" + d;
      } else {
        doc = new Segment(Rng.derive(seed, 22, i), documentLength.draw(rng));
        group = "unique-" + i;
      }
      Segment q = new Segment(Rng.derive(seed, 23, i), Math.max(1, question.draw(rng)));
      Prompt p = format == Prompt.Format.CHAT
          ? Prompt.chat(List.of(Message.of("system", instr), Message.of("user", doc, q)))
          : Prompt.tokens(List.of(instr, doc, q));
      out.add(new WorkloadRequest(i, NAME + "-" + i, t, group, p, Math.max(1, output.draw(rng))));
    }
    return new Workload(NAME, o.effective(), space, out);
  }
}
