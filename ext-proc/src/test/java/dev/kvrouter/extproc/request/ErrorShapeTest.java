package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The router's own errors, in the shape each API's clients parse. */
class ErrorShapeTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  /** Every kind of error the router answers, with the {@code error.type} vLLM's Anthropic handlers write for it. */
  private static final List<Object[]> KINDS = List.of(
      new Object[] {OpenAiError.badRequest("`messages` is required", "messages"), "BadRequestError"},
      new Object[] {OpenAiError.tooLarge(100), "Request Entity Too Large"},
      new Object[] {OpenAiError.modelNotFound("m"), "NotFoundError"},
      new Object[] {OpenAiError.unknownUrl("POST", "/v1/messages"), "NotFoundError"},
      new Object[] {OpenAiError.overloaded("m"), "Too Many Requests"},
      new Object[] {OpenAiError.noEligibleWorker("m", "all draining"), "Service Unavailable"},
      new Object[] {OpenAiError.bodiesOverBudget(), "Service Unavailable"},
      new Object[] {OpenAiError.internal("boom"), "internal_error"});

  @Test
  void anthropicShapeIsVllmsAnthropicErrorResponse() throws Exception {
    for (Object[] k : KINDS) {
      OpenAiError e = (OpenAiError) k[0];
      JsonNode body = JSON.readTree(ErrorShape.ANTHROPIC.body(e));
      // exactly {"type": "error", "error": {"type", "message"}}: what AnthropicErrorResponse.model_dump() writes
      assertThat(body.path("type").asText()).as(e.code()).isEqualTo("error");
      assertThat(body.path("error").path("type").asText()).as(e.code()).isEqualTo(k[1]);
      assertThat(body.path("error").path("message").asText()).as(e.code()).isEqualTo(e.message());
      assertThat(body.size()).as(e.code()).isEqualTo(2);
      assertThat(body.path("error").size()).as(e.code()).isEqualTo(2);
    }
  }

  @Test
  void openAiShapeIsUnchanged() throws Exception {
    for (Object[] k : KINDS) {
      OpenAiError e = (OpenAiError) k[0];
      assertThat(ErrorShape.OPENAI.body(e)).isEqualTo(e.toJson());
      JsonNode error = JSON.readTree(ErrorShape.OPENAI.body(e)).path("error");
      assertThat(error.path("type").asText()).isEqualTo(e.type());
      assertThat(error.path("code").asText()).isEqualTo(e.code());
    }
  }

  @Test
  void theShapeFollowsTheApiOfThePath() {
    assertThat(ErrorShape.forPath("/v1/messages")).isEqualTo(ErrorShape.ANTHROPIC);
    assertThat(ErrorShape.forPath("/v1/messages/count_tokens")).isEqualTo(ErrorShape.ANTHROPIC);
    for (String p : new String[] {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messagesx",
        "/v1/messages/batches", "/tokenize", null}) {
      assertThat(ErrorShape.forPath(p)).as(String.valueOf(p)).isEqualTo(ErrorShape.OPENAI);
    }
  }

  @Test
  void messagesNeverQuoteMoreThanTheRouterWrote() throws Exception {
    // a quote or a newline in a model name must stay inside the JSON string
    OpenAiError e = OpenAiError.modelNotFound("a\"b\nc");
    assertThat(JSON.readTree(ErrorShape.ANTHROPIC.body(e)).path("error").path("message").asText())
        .contains("a\"b\nc");
  }
}
