package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The parser's value semantics against the reference implementations, from
 * {@code scripts/fixtures/request_semantics.py}: pydantic's lax booleans, vLLM's tool dump, Python's json module,
 * and the media content hash.
 */
class RequestSemanticsGoldenTest {

  static final JsonNode FIXTURE = Fixtures.requestSemantics();
  final RequestBodyParser parser = new RequestBodyParser();

  static Object python(String json) throws Exception {
    try (JsonParser p = RequestBodyParser.JSON.createParser(json)) {
      return JsonValues.read(p, p.nextToken());
    }
  }

  InferenceRequest chat(String extra, String messages) throws Exception {
    byte[] b = ("{\"model\":\"m\",\"messages\":" + messages + extra + "}").getBytes(StandardCharsets.UTF_8);
    return parser.parse(Kind.CHAT, b, b.length);
  }

  @Test
  void laxBooleansMatchPydantic() throws Exception {
    assertThat(FIXTURE.path("lax_bool").size()).isGreaterThanOrEqualTo(30);
    for (JsonNode c : FIXTURE.path("lax_bool")) {
      String json = c.path("json").asText();
      Boolean expected = c.path("result").isBoolean() ? c.path("result").asBoolean() : null;
      assertThat(PythonValues.laxBool(python(json))).as(json).isEqualTo(expected);
      // and through the parser: add_generation_prompt accepts exactly pydantic's values
      String msgs = "[{\"role\":\"user\",\"content\":\"x\"}]";
      if (expected != null) {
        assertThat(chat(",\"add_generation_prompt\":" + json, msgs).chat().addGenerationPrompt()).as(json)
            .isEqualTo(expected);
      } else {
        assertThat(org.assertj.core.api.Assertions.catchThrowable(
            () -> chat(",\"add_generation_prompt\":" + json, msgs))).as(json)
            .isInstanceOf(RequestBodyParser.BadRequest.class);
      }
    }
  }

  @Test
  void toolsAreDumpedExactlyAsVllmsPydanticModels() throws Exception {
    assertThat(FIXTURE.path("tools").size()).isGreaterThanOrEqualTo(4);
    for (JsonNode c : FIXTURE.path("tools")) {
      ChatPrompt p = chat(",\"tools\":" + c.path("tools").asText(), "[]").chat();
      Object expected = python(c.path("dumped").asText());
      assertThat((Object) p.tools()).isEqualTo(expected);
      assertThat(keyOrder(p.tools())).isEqualTo(keyOrder(expected));
    }
  }

  @Test
  void messagesDecodeAsPythonsJsonModuleDecodesThem() throws Exception {
    assertThat(FIXTURE.path("json_values").size()).isGreaterThanOrEqualTo(9);
    for (JsonNode c : FIXTURE.path("json_values")) {
      String message = c.path("message").asText();
      Map<String, Object> parsed = chat("", "[" + message + "]").chat().messages().get(0);
      Object expected = python(c.path("python").asText());
      assertThat((Object) parsed).as(message).isEqualTo(expected);
      assertThat(keyOrder(parsed)).as(message).isEqualTo(keyOrder(expected));
    }
  }

  /**
   * Python reads floats and keys of any length and ints of up to 4,300 digits; a body it reads must not get a 400
   * from the router for a length limit of Jackson's (1,000-character numbers), and one it refuses gets the router's
   * 400 at tokenizing, before any long integer is converted.
   */
  @Test
  void numbersAndKeysAreAsLongAsPythonsJsonModuleAccepts() throws Exception {
    assertThat(FIXTURE.path("long_tokens").size()).isGreaterThanOrEqualTo(9);
    for (JsonNode c : FIXTURE.path("long_tokens")) {
      String prefix = c.path("prefix").asText();
      byte[] body = (prefix + c.path("fill").asText().repeat(c.path("count").asInt()) + c.path("suffix").asText())
          .getBytes(StandardCharsets.UTF_8);
      Kind kind = prefix.contains("\"messages\"") ? Kind.CHAT : Kind.COMPLETIONS;
      String as = prefix + " x" + c.path("count").asInt();
      if (c.path("python").asText().equals("ok")) {
        assertThat(parser.parse(kind, body, body.length)).as(as).isNotNull();
      } else {
        assertThat(org.assertj.core.api.Assertions.catchThrowableOfType(RequestBodyParser.BadRequest.class,
            () -> parser.parse(kind, body, body.length))).as(as).isNotNull()
            .extracting(e -> e.error().message()).asString()
            .contains("integer of " + c.path("count").asInt() + " digits").contains("4300");
      }
    }
  }

  @Test
  void mediaContentHashesAreXxh3OfTheUtf8BytesWhetherTheBodyEscapesThemOrNot() throws Exception {
    assertThat(FIXTURE.path("content_hashes").size()).isGreaterThanOrEqualTo(10);
    for (JsonNode c : FIXTURE.path("content_hashes")) {
      String payload = c.path("payload").asText();
      String hex = c.path("hash").asText();
      assertThat(String.format("%016x", MediaParts.contentHash(payload))).isEqualTo(hex);
      // through the parser: hashed in place when unescaped, decoded first when escaped; the same identifier
      String json = c.path("json").asText();
      InferenceRequest r = chat("", "[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
          + "{\"url\":" + json + "}},{\"type\":\"audio_url\",\"audio_url\":" + json + "}]}]");
      assertThat(r.multimodal()).extracting(MultimodalItem::identifier).as(json)
          .containsExactly("kvr1-mm:image:" + hex, "kvr1-mm:audio:" + hex);
    }
  }

  /** Key order of every map, depth first, so that equal maps in another order are told apart. */
  static String keyOrder(Object v) {
    StringBuilder sb = new StringBuilder();
    walk(v, sb);
    return sb.toString();
  }

  private static void walk(Object v, StringBuilder sb) {
    if (v instanceof Map<?, ?> m) {
      sb.append('{');
      m.forEach((k, x) -> {
        sb.append(k).append(':');
        walk(x, sb);
      });
      sb.append('}');
    } else if (v instanceof List<?> l) {
      sb.append('[');
      l.forEach(x -> walk(x, sb));
      sb.append(']');
    }
  }
}
