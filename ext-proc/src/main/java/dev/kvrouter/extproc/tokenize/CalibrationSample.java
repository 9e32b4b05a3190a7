package dev.kvrouter.extproc.tokenize;

/** A small mixed sample (prose, code, JSON, some non-English) that seeds the characters-per-token estimate. */
final class CalibrationSample {
  static final String TEXT = """
      A KV-cache-aware router sends each request to the worker that already holds the longest prefix of its \
      prompt, so the engine can skip recomputing attention for those tokens. The benefit depends on how often \
      prompts share prefixes: multi-turn conversations resend every earlier turn, agents resend long tool \
      descriptions, and retrieval pipelines put the same documents in front of many questions. When the \
      router guesses wrong, nothing breaks; the request is simply slower than it could have been.

      The weather in Zürich was mild on Tuesday, with 18 °C in the afternoon and light rain after 9 p.m.; \
      forecasters expect 22–25 °C by the weekend. It's the third week in a row that they've been right.

      def route(request, workers):
          blocks = hash_blocks(tokenize(request.prompt), block_size=16)
          best = max(workers, key=lambda w: (w.overlap(blocks), -w.load))
          return best.name

      {"model": "example", "messages": [{"role": "user", "content": "Summarize the report in 3 bullet points."}], \
      "max_tokens": 256, "stream": true}

      日本語の文章も少し含めます。東京は晴れです。 Привет, как дела? ¿Dónde está la estación?
      """;

  private CalibrationSample() {}
}
