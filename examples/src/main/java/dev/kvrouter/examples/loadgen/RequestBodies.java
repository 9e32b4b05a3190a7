package dev.kvrouter.examples.loadgen;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import dev.kvrouter.examples.workload.ChatMessage;
import dev.kvrouter.examples.workload.ImagePart;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;

/**
 * OpenAI request bodies for workload requests: token prompts as {@code /v1/completions} with a token-id
 * {@code prompt}, chat prompts as {@code /v1/chat/completions}. Always streaming with usage in the last chunk;
 * {@code ignore_eos} (a vLLM extension) makes the engine generate exactly {@code max_tokens}, as the trace
 * asks; temperature 0 keeps real engines deterministic. A chat message with images is sent as content parts: each
 * image an {@code image_url} part (with the client's {@code uuid} beside it when it has one), then the text.
 */
public final class RequestBodies {

  static final String COMPLETIONS = "/v1/completions";
  static final String CHAT = "/v1/chat/completions";

  private static final JsonFactory JSON = new JsonFactory();

  private RequestBodies() {}

  static String path(WorkloadRequest r) {
    return r.prompt().format() == Prompt.Format.CHAT ? CHAT : COMPLETIONS;
  }

  /** The JSON body the load generator sends for {@code r} (also what the virtual-time A/B parses). */
  public static byte[] body(Workload w, WorkloadRequest r, String model) {
    return body(w, r, r.prompt(), model);
  }

  /**
   * The body for {@code r} with {@code prompt} in place of its own, e.g. its prompt with earlier answers cut to what
   * the client received ({@link Prompt#withAnswersCut}; for chat, the words received). A chat workload that sets
   * {@code enable_thinking} sends it as {@code chat_template_kwargs}. A request that scripts its answer carries the
   * answer's seed as the OpenAI {@code seed}: a worker started with {@code --output-tokens workload} generates
   * exactly the script from it.
   */
  public static byte[] body(Workload w, WorkloadRequest r, Prompt prompt, String model) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(256 + prompt.contentLength() * 7);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("model", model);
      if (prompt.format() == Prompt.Format.CHAT) {
        g.writeArrayFieldStart("messages");
        for (ChatMessage m : w.chatMessages(prompt)) {
          g.writeStartObject();
          g.writeStringField("role", m.role());
          if (m.images().isEmpty()) {
            g.writeStringField("content", m.content());
          } else {
            // vLLM's image part with its optional uuid beside image_url; the images first, then the text
            g.writeArrayFieldStart("content");
            for (ImagePart image : m.images()) {
              g.writeStartObject();
              g.writeStringField("type", "image_url");
              g.writeObjectFieldStart("image_url");
              g.writeStringField("url", image.url());
              g.writeEndObject();
              if (image.uuid() != null) {
                g.writeStringField("uuid", image.uuid());
              }
              g.writeEndObject();
            }
            if (!m.content().isEmpty()) {
              g.writeStartObject();
              g.writeStringField("type", "text");
              g.writeStringField("text", m.content());
              g.writeEndObject();
            }
            g.writeEndArray();
          }
          g.writeEndObject();
        }
        g.writeEndArray();
        if (!w.chatTemplateKwargs().isEmpty()) {
          g.writeObjectFieldStart("chat_template_kwargs");
          for (Map.Entry<String, Object> e : w.chatTemplateKwargs().entrySet()) {
            g.writeObjectField(e.getKey(), e.getValue());
          }
          g.writeEndObject();
        }
      } else {
        int[] t = w.promptTokens(prompt);
        g.writeFieldName("prompt");
        g.writeArray(t, 0, t.length);
      }
      g.writeNumberField("max_tokens", r.outputTokens());
      g.writeBooleanField("ignore_eos", true);
      g.writeNumberField("temperature", 0);
      if (r.answer() != null) {
        g.writeNumberField("seed", r.answer().seed());
      }
      g.writeBooleanField("stream", true);
      g.writeObjectFieldStart("stream_options");
      g.writeBooleanField("include_usage", true);
      g.writeEndObject();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }
}
