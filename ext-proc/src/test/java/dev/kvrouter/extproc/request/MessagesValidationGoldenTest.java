package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
    // the workers' VLLM_MAX_STOP_STRINGS, as the fixture's transcription caps stop_sequences
    RequestBodyParser parser = new RequestBodyParser(doc.get("max_stop_strings").asInt());
    List<String> wrong = new ArrayList<>();
    int refused = 0;
    for (JsonNode c : doc.get("cases")) {
      // spliced as text: values such as NaN or a 400-digit integer would not survive a Jackson tree
      Map<String, String> fields = new LinkedHashMap<>();
      doc.get("base").fields().forEachRemaining(e -> fields.put(e.getKey(), e.getValue().toString()));
      c.path("drop").forEach(k -> fields.remove(k.asText()));
      c.path("set").fields().forEachRemaining(e -> fields.put(e.getKey(), e.getValue().asText()));
      StringBuilder text = new StringBuilder("{");
      for (Map.Entry<String, String> e : fields.entrySet()) {
        text.append(text.length() > 1 ? ", " : "").append(JSON.writeValueAsString(e.getKey())).append(": ")
            .append(e.getValue());
      }
      String body = text.append('}').toString();
      byte[] b = body.getBytes(StandardCharsets.UTF_8);
      String param = null;
      try {
        parser.parse(Kind.MESSAGES, b, b.length);
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
