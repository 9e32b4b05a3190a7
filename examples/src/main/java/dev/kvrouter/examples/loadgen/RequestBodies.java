package dev.kvrouter.examples.loadgen;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import dev.kvrouter.examples.workload.AgentAnswer;
import dev.kvrouter.examples.workload.AgentTools;
import dev.kvrouter.examples.workload.ChatMessage;
import dev.kvrouter.examples.workload.ChatText;
import dev.kvrouter.examples.workload.ImagePart;
import dev.kvrouter.examples.workload.Message;
import dev.kvrouter.examples.workload.Prompt;
import dev.kvrouter.examples.workload.TokenSpace;
import dev.kvrouter.examples.workload.ToolCallAnswer;
import dev.kvrouter.examples.workload.Workload;
import dev.kvrouter.examples.workload.WorkloadRequest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;

/**
 * OpenAI request bodies for workload requests: token prompts as {@code /v1/completions} with a token-id
 * {@code prompt}, chat prompts as {@code /v1/chat/completions}. Always streaming with usage in the last chunk;
 * {@code ignore_eos} (a vLLM extension) makes the engine generate exactly {@code max_tokens}, as the trace
 * asks; temperature 0 keeps real engines deterministic. A chat message with images is sent as content parts: each
 * image an {@code image_url} part (with the client's {@code uuid} beside it when it has one), then the text.
 * Messages prompts go to Anthropic's {@code /v1/messages} as Claude Code sends them ({@link #messages}).
 */
public final class RequestBodies {

  static final String COMPLETIONS = "/v1/completions";
  static final String CHAT = "/v1/chat/completions";
  static final String MESSAGES = "/v1/messages";

  private static final JsonFactory JSON = new JsonFactory();

  private RequestBodies() {}

  static String path(WorkloadRequest r) {
    return switch (r.prompt().format()) {
      case CHAT -> CHAT;
      case MESSAGES -> MESSAGES;
      case TOKENS -> COMPLETIONS;
    };
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
    if (prompt.format() == Prompt.Format.MESSAGES) {
      return messages(w, r, prompt, model, out);
    }
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("model", model);
      if (prompt.format() == Prompt.Format.CHAT) {
        g.writeArrayFieldStart("messages");
        for (ChatMessage m : w.chatMessages(prompt)) {
          g.writeStartObject();
          g.writeStringField("role", m.role());
          if (m.reasoning() != null) {
            g.writeStringField("reasoning", m.reasoning()); // as vLLM's chat answer carried it
          }
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
      g.writeNumberField("max_tokens", r.maxTokens());
      if (r.reasoning() > 0) {
        // a thinking answer ends its own turn: scripted as the model writes it, thinking then text, no call
        g.writeObjectFieldStart("vllm_xargs");
        AgentAnswer.chatScript(r.answer(), r.reasoning(), w.tokenSpace()).writeXargs(g);
        g.writeEndObject();
      } else {
        g.writeBooleanField("ignore_eos", true);
      }
      g.writeNumberField("temperature", 0);
      if (r.answer() != null && r.reasoning() == 0) {
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

  /**
   * A Claude Code request: {@code system} as text blocks (the attribution block whose hash changes per request, the
   * identity line, then the leading system message, marked as a cache breakpoint), the workload's tools, and the
   * history as blocks: an assistant message's first segment is its text and its second a {@code tool_use} input, a
   * {@code tool} message becomes the {@code tool_result} opening the next user message, and a later system message
   * an inline {@code role: system} reminder. The newest user block carries the breakpoint Claude Code moves every
   * turn. No seed (Anthropic's request has none) and no {@code ignore_eos}: vLLM drops fields its model does not
   * declare. A scripted answer ({@link AgentAnswer}) travels in {@code vllm_xargs} ({@link ToolCallAnswer}), with
   * Claude Code's {@code max_tokens} so that it ends at its tool call.
   */
  private static byte[] messages(Workload w, WorkloadRequest r, Prompt prompt, String model, ByteArrayOutputStream out) {
    TokenSpace space = w.tokenSpace();
    List<AgentTools.Tool> tools = w.agentTools();
    List<Message> ms = prompt.messages();
    int lastUser = -1;
    for (int i = 0; i < ms.size(); i++) {
      if (ms.get(i).role().equals("user")) {
        lastUser = i;
      }
    }
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeStringField("model", model);
      g.writeNumberField("max_tokens", r.maxTokens());
      g.writeArrayFieldStart("system");
      textBlock(g, AgentTools.billingHeader(w.seed(), r), false);
      boolean leading = ms.get(0).role().equals("system");
      textBlock(g, AgentTools.IDENTITY, !leading);
      if (leading) {
        textBlock(g, ChatText.render(ms.get(0).segments(), space), true);
      }
      g.writeEndArray();
      g.writeArrayFieldStart("messages");
      String toolUse = null;
      String toolResult = null;
      for (int i = leading ? 1 : 0; i < ms.size(); i++) {
        Message m = ms.get(i);
        switch (m.role()) {
          case "tool" -> toolResult = ChatText.render(m.segments(), space);
          case "system" -> {
            g.writeStartObject();
            g.writeStringField("role", "system");
            g.writeStringField("content", "<system-reminder>\n" + ChatText.render(m.segments(), space)
                + "\n</system-reminder>");
            g.writeEndObject();
          }
          case "assistant" -> {
            g.writeStartObject();
            g.writeStringField("role", "assistant");
            g.writeArrayFieldStart("content");
            if (m.segments().size() > 2 && m.segments().get(2).length() > 0) {
              // a reasoning model's thinking, resent first as Claude Code does (AgentAnswer#message)
              g.writeStartObject();
              g.writeStringField("type", "thinking");
              g.writeStringField("thinking", ChatText.render(m.segments().subList(2, 3), space));
              g.writeStringField("signature", "sim");
              g.writeEndObject();
            }
            textBlock(g, ChatText.render(m.segments().subList(0, 1), space), false);
            // an input cut to nothing is a call the client never received (Prompt.withAnswersCut)
            toolUse = null;
            if (m.segments().size() > 1 && m.segments().get(1).length() > 0) {
              ToolCallAnswer.Call call = AgentTools.toolCall(tools, m.segments().get(1), space);
              toolUse = call.id();
              g.writeStartObject();
              g.writeStringField("type", "tool_use");
              g.writeStringField("id", call.id());
              g.writeStringField("name", call.name());
              g.writeObjectFieldStart("input");
              for (Map.Entry<String, Object> e : call.input().entrySet()) {
                g.writeObjectField(e.getKey(), e.getValue()); // strings: the generator needs no codec
              }
              g.writeEndObject();
              g.writeEndObject();
            }
            g.writeEndArray();
            g.writeEndObject();
          }
          default -> {
            g.writeStartObject();
            g.writeStringField("role", m.role());
            g.writeArrayFieldStart("content");
            if (toolResult != null && toolUse != null) {
              g.writeStartObject();
              g.writeStringField("type", "tool_result");
              g.writeStringField("tool_use_id", toolUse);
              g.writeStringField("content", toolResult);
              g.writeEndObject();
            }
            toolResult = null;
            textBlock(g, ChatText.render(m.segments(), space), i == lastUser);
            g.writeEndArray();
            g.writeEndObject();
          }
        }
      }
      g.writeEndArray();
      g.writeArrayFieldStart("tools");
      for (AgentTools.Tool t : tools) {
        g.writeStartObject();
        g.writeStringField("name", t.name());
        g.writeStringField("description", t.description());
        g.writeObjectFieldStart("input_schema");
        g.writeStringField("type", "object");
        g.writeObjectFieldStart("properties");
        for (AgentTools.Param p : t.params()) {
          g.writeObjectFieldStart(p.name());
          g.writeStringField("type", p.type());
          if (p.type().equals("array")) {
            g.writeObjectFieldStart("items");
            g.writeStringField("type", "string");
            g.writeEndObject();
          }
          g.writeStringField("description", p.description());
          g.writeEndObject();
        }
        g.writeEndObject();
        g.writeArrayFieldStart("required");
        g.writeString(t.params().get(0).name());
        g.writeEndArray();
        g.writeBooleanField("additionalProperties", false);
        g.writeStringField("$schema", "http://json-schema.org/draft-07/schema#");
        g.writeEndObject();
        g.writeEndObject();
      }
      g.writeEndArray();
      if (r.answer() != null) {
        // the answer a simulated worker generates: the scripting channel vLLM ignores (ToolCallAnswer)
        g.writeObjectFieldStart("vllm_xargs");
        AgentAnswer.of(r.answer(), w.agentReasoning()).script(tools, space).writeXargs(g);
        g.writeEndObject();
      }
      g.writeBooleanField("stream", true);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  private static void textBlock(JsonGenerator g, String text, boolean breakpoint) throws IOException {
    g.writeStartObject();
    g.writeStringField("type", "text");
    g.writeStringField("text", text);
    if (breakpoint) {
      g.writeObjectFieldStart("cache_control");
      g.writeStringField("type", "ephemeral");
      g.writeEndObject();
    }
    g.writeEndObject();
  }
}
