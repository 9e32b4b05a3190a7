package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvrouter.examples.workload.ToolCallAnswer;

/** The tool-call answer a test body scripts, read as the worker reads it. */
final class ToolCallAnswerFixture {

  private ToolCallAnswerFixture() {}

  static ToolCallAnswer of(JsonNode body) {
    return ToolCallAnswer.fromXargs(body.get("vllm_xargs"));
  }
}
