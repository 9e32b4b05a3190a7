package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The router refuses a Messages body exactly when vLLM main's {@code AnthropicMessagesRequest} does (pydantic's
 * verdicts in scripts/fixtures/messages_validation.py: a missing or non-positive {@code max_tokens}, a {@code thinking}
 * outside the three configs, a budget not under {@code max_tokens}, fields of the wrong type, ...), naming the field
 * pydantic names; everything pydantic accepts is routed.
 */
class MessagesValidationGoldenTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void refusedExactlyWhenVllmsRequestModelRefuses() throws Exception {
    JsonNode doc = Fixtures.messagesValidation();
    List<String> wrong = new ArrayList<>();
    int refused = 0;
    for (JsonNode c : doc.get("cases")) {
      ObjectNode body = doc.get("base").deepCopy();
      c.path("drop").forEach(k -> body.remove(k.asText()));
      for (var it = c.path("set").fields(); it.hasNext(); ) {
        var e = it.next();
        body.set(e.getKey(), JSON.readTree(e.getValue().asText()));
      }
      byte[] b = JSON.writeValueAsBytes(body);
      String param = null;
      try {
        new RequestBodyParser().parse(Kind.MESSAGES, b, b.length);
      } catch (RequestBodyParser.BadRequest e) {
        param = e.error().param();
        refused++;
      }
      boolean accepted = c.get("accepted").asBoolean();
      String field = c.path("field").asText();
      if (accepted != (param == null)) {
        wrong.add((accepted ? "refused (" + param + ") " : "accepted ") + body);
      } else if (!accepted && !field.isEmpty() && !field.equals(param.split("[.\\[]")[0])) {
        wrong.add("blamed " + param + " instead of " + field + ": " + body);
      }
    }
    assertThat(wrong).isEmpty();
    assertThat(refused).as("the fixture exercises both outcomes").isGreaterThan(50);
  }
}
