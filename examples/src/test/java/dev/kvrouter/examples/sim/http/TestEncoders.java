package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvrouter.examples.sim.testing.Fixtures;
import dev.kvrouter.extproc.tokenize.SegmentCache;
import java.util.HashMap;
import java.util.Map;

/** The simulated worker's encoders over the real tokenizers, each loaded once per test class (one thread). */
final class TestEncoders implements AutoCloseable {

  private final Map<String, PipelinePromptEncoder> byName = new HashMap<>();

  /** The encoder of {@code .cache/tokenizers/<name>}, served as model {@code test/<name>}. */
  PipelinePromptEncoder get(String name) {
    return byName.computeIfAbsent(name, n -> {
      try {
        return PipelinePromptEncoder.load("test/" + n, Fixtures.tokenizer(n), null,
            SegmentCache.create(SegmentCache.DEFAULT_MAX_TOKENS));
      } catch (java.io.IOException e) {
        throw new AssertionError(e);
      }
    });
  }

  @Override
  public void close() {
    byName.values().forEach(PipelinePromptEncoder::close);
  }

  /** A JSON array of token ids. */
  static int[] ids(JsonNode array) {
    int[] out = new int[array.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = array.get(i).asInt();
    }
    return out;
  }
}
