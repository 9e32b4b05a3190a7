package dev.kvrouter.extproc.decision;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** Responses in the shapes vLLM's OpenAI server sends, fed whole and cut anywhere. */
class UsageScannerTest {

  static final String JSON_BODY = """
      {"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",\
      "choices":[{"index":0,"message":{"role":"assistant","content":"Hi \\"usage\\": {\\"cached_tokens\\": 9}",\
      "tool_calls":[]},"logprobs":null,"finish_reason":"stop"}],\
      "usage":{"prompt_tokens":120,"total_tokens":130,"completion_tokens":10,\
      "prompt_tokens_details":{"cached_tokens":96}},"prompt_logprobs":null}""";

  static final String SSE_BODY = """
      data: {"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"a",\
      "logprobs":null,"finish_reason":null}],"usage":null}

      data: {"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"\
      {\\"usage\\":{\\"prompt_tokens_details\\":{\\"cached_tokens\\":7777}}}","logprobs":null,"finish_reason":"length"}],\
      "usage":null}

      data: {"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[],\
      "usage":{"prompt_tokens_details":{"cached_tokens":2048},"prompt_tokens":2100,"total_tokens":2108,\
      "completion_tokens":8}}

      data: [DONE]

      """;

  /** vLLM's {@code ResponsesResponse} (responses/protocol.py) with openai's {@code ResponseUsage}, not streamed. */
  static final String RESPONSES_BODY = """
      {"id":"resp_0a1b2c3d","created_at":1,"incomplete_details":null,"instructions":"Be brief.","metadata":null,\
      "model":"m","object":"response","output":[{"id":"msg_1","content":[{"annotations":[],\
      "text":"{\\"usage\\":{\\"input_tokens_details\\":{\\"cached_tokens\\":7}}}","type":"output_text",\
      "logprobs":null}],"role":"assistant","status":"completed","type":"message"}],"parallel_tool_calls":true,\
      "temperature":1.0,"tool_choice":"auto","tools":[],"top_p":1.0,"background":false,"max_output_tokens":16,\
      "previous_response_id":null,"reasoning":null,"service_tier":"auto","status":"completed","text":null,\
      "truncation":"disabled","usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":256},\
      "output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":305},"user":null}""";

  /**
   * A streamed Responses answer: {@code response.created} (usage null), text deltas, and {@code response.completed}
   * whose {@code response} carries the usage (vLLM's {@code ResponseCompletedEvent}).
   */
  static final String RESPONSES_SSE = """
      event: response.created
      data: {"response":{"id":"resp_1","object":"response","output":[],"status":"in_progress","usage":null},\
      "sequence_number":0,"type":"response.created"}

      event: response.output_text.delta
      data: {"content_index":0,"delta":"{\\"response\\":{\\"usage\\":{\\"input_tokens\\":9}}}",\
      "item_id":"msg_1","output_index":0,"sequence_number":3,"type":"response.output_text.delta","logprobs":[]}

      event: response.completed
      data: {"response":{"id":"resp_1","object":"response","output":[{"id":"msg_1","content":[{"annotations":[],\
      "text":"x","type":"output_text","usage":{"input_tokens":1}}],"role":"assistant","status":"completed",\
      "type":"message"}],"status":"completed","usage":{"input_tokens":2100,"input_tokens_details":\
      {"cached_tokens":2048},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2108}},\
      "sequence_number":9,"type":"response.completed"}

      """;

  /**
   * vLLM's Anthropic {@code AnthropicMessagesResponse} (anthropic/serving.py, {@code messages_full_converter}): the
   * usage's {@code input_tokens} is the prompt less its cached part ({@code _build_anthropic_usage}).
   */
  static final String MESSAGES_BODY = """
      {"id":"chatcmpl-1","type":"message","role":"assistant","content":[{"type":"text",\
      "text":"{\\"usage\\":{\\"cache_read_input_tokens\\":9}}"}],"model":"m","stop_reason":"end_turn",\
      "usage":{"input_tokens":44,"output_tokens":5,"cache_read_input_tokens":256}}""";

  /**
   * A streamed Messages answer: {@code message_start} (its {@code message} carries the usage the first chunk had),
   * a text delta, and {@code message_delta} whose top-level usage is the final count.
   */
  static final String MESSAGES_SSE = """
      event: message_start
      data: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","content":[],\
      "model":"m","usage":{"input_tokens":2100,"output_tokens":0}}}

      event: content_block_delta
      data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",\
      "text":"{\\"usage\\":{\\"input_tokens\\":1,\\"cache_read_input_tokens\\":1}}"}}

      event: message_delta
      data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":52,\
      "output_tokens":8,"cache_read_input_tokens":2048}}

      event: message_stop
      data: {"type":"message_stop"}

      """;

  static UsageScanner scan(String body, int... cuts) {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    UsageScanner s = new UsageScanner();
    int off = 0;
    for (int c : cuts) {
      s.feed(ByteBuffer.wrap(b, off, c - off).slice());
      off = c;
    }
    s.feed(b, off, b.length - off);
    return s;
  }

  @Test
  void jsonBodyUsage() {
    UsageScanner s = scan(JSON_BODY);
    assertThat(s.cachedTokens()).isEqualTo(96);
    assertThat(s.promptTokens()).isEqualTo(120);
    assertThat(s.bytes()).isEqualTo(JSON_BODY.getBytes(StandardCharsets.UTF_8).length);
  }

  @Test
  void finalSseChunkUsageAndGeneratedTextIsNeverMistakenForIt() {
    UsageScanner s = scan(SSE_BODY);
    assertThat(s.cachedTokens()).isEqualTo(2048);
    assertThat(s.promptTokens()).isEqualTo(2100);
  }

  @Test
  void responsesApiUsageNotStreamedAndStreamed() {
    UsageScanner s = scan(RESPONSES_BODY);
    assertThat(s.cachedTokens()).isEqualTo(256);
    assertThat(s.promptTokens()).isEqualTo(300);
    UsageScanner streamed = scan(RESPONSES_SSE);
    assertThat(streamed.cachedTokens()).isEqualTo(2048);
    assertThat(streamed.promptTokens()).isEqualTo(2100);
    // only a top-level object's `response` member carries it, one level down
    assertThat(scan("{\"x\":{\"response\":{\"usage\":{\"input_tokens\":5}}}}").promptTokens()).isEqualTo(-1);
    assertThat(scan("{\"response\":{\"x\":{\"usage\":{\"input_tokens\":5}}}}").promptTokens()).isEqualTo(-1);
    assertThat(scan("{\"response\":{\"usage\":{\"input_tokens\":5}}}").promptTokens()).isEqualTo(5);
  }

  @Test
  void messagesApiUsageCountsTheCachedPartIntoThePrompt() {
    UsageScanner s = scan(MESSAGES_BODY);
    assertThat(s.cachedTokens()).isEqualTo(256);
    assertThat(s.promptTokens()).isEqualTo(300);
    UsageScanner streamed = scan(MESSAGES_SSE);
    assertThat(streamed.cachedTokens()).isEqualTo(2048);
    assertThat(streamed.promptTokens()).isEqualTo(2100);
    // the creation part counts too, and an engine without either field reports the whole prompt as input
    assertThat(scan("{\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":16,"
        + "\"cache_read_input_tokens\":32}}").promptTokens()).isEqualTo(58);
    UsageScanner old = scan("{\"usage\":{\"input_tokens\":300,\"output_tokens\":5}}");
    assertThat(old.promptTokens()).isEqualTo(300);
    assertThat(old.cachedTokens()).isEqualTo(-1);
    // a later usage object without the cache fields does not add an earlier one's
    assertThat(scan("{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":32}}\n"
        + "{\"usage\":{\"input_tokens\":42}}").promptTokens()).isEqualTo(42);
    // only a top-level object's `message` member carries it
    assertThat(scan("{\"x\":{\"message\":{\"usage\":{\"input_tokens\":5}}}}").promptTokens()).isEqualTo(-1);
  }

  @Test
  void everySplitPointGivesTheSameAnswer() {
    for (String body : List.of(JSON_BODY, SSE_BODY, RESPONSES_BODY, RESPONSES_SSE, MESSAGES_BODY, MESSAGES_SSE)) {
      int n = body.getBytes(StandardCharsets.UTF_8).length;
      long expected = scan(body).cachedTokens();
      for (int cut = 0; cut <= n; cut++) {
        assertThat(scan(body, cut).cachedTokens()).as("cut at %d", cut).isEqualTo(expected);
      }
    }
  }

  @Test
  void missingNullOrMisplacedUsageIsUnknown() {
    assertThat(scan("{\"usage\":{\"prompt_tokens\":5,\"prompt_tokens_details\":null}}").cachedTokens())
        .isEqualTo(-1);
    assertThat(scan("{\"usage\":{\"prompt_tokens\":5}}").promptTokens()).isEqualTo(5);
    assertThat(scan("{\"choices\":[{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":5}}}]}").cachedTokens())
        .as("usage nested below the top level").isEqualTo(-1);
    assertThat(scan("{\"x\":{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":5}}}}").cachedTokens())
        .isEqualTo(-1);
    assertThat(scan("{\"cached_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":6}}").cachedTokens())
        .as("details outside usage").isEqualTo(-1);
    assertThat(scan("data: [DONE]\n\n").cachedTokens()).isEqualTo(-1);
    assertThat(scan("").cachedTokens()).isEqualTo(-1);
    assertThat(scan("{\"error\":{\"message\":\"x\",\"code\":500}}").cachedTokens()).isEqualTo(-1);
  }

  @Test
  void prettyPrintedKeysInAnyOrderAndTheLastReportWins() {
    String pretty = """
        {
          "usage" : {
            "prompt_tokens_details" : { "audio_tokens" : 0 , "cached_tokens" : 32 } ,
            "prompt_tokens" : 40
          }
        }
        """;
    assertThat(scan(pretty).cachedTokens()).isEqualTo(32);
    assertThat(scan(pretty).promptTokens()).isEqualTo(40);
    // continuous usage stats: every chunk reports, the last is final
    String continuous = "data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":16}}}\n\n"
        + "data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":48}}}\n\n";
    assertThat(scan(continuous).cachedTokens()).isEqualTo(48);
  }

  @Test
  void similarKeysAndEscapesDoNotMatch() {
    assertThat(scan("{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens_x\":5,\"xcached_tokens\":6}}}")
        .cachedTokens()).isEqualTo(-1);
    assertThat(scan("{\"usage\":{\"prompt_tokens_details\":{\"cached\\u005ftokens\":5}}}").cachedTokens())
        .isEqualTo(-1);
    assertThat(scan("{\"usag\":{\"prompt_tokens_details\":{\"cached_tokens\":5}}}").cachedTokens()).isEqualTo(-1);
    assertThat(scan("{\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":12.0}}}").cachedTokens())
        .isEqualTo(12);
  }

  @Property(tries = 200)
  void anyChunkingGivesTheSameAnswer(@ForAll @Size(max = 12) List<@IntRange(min = 1, max = 400) Integer> steps) {
    byte[] b = SSE_BODY.getBytes(StandardCharsets.UTF_8);
    UsageScanner s = new UsageScanner();
    int off = 0;
    for (int step : steps) {
      int end = Math.min(b.length, off + step);
      s.feed(b, off, end - off);
      off = end;
    }
    s.feed(b, off, b.length - off);
    assertThat(s.cachedTokens()).isEqualTo(2048);
    assertThat(s.promptTokens()).isEqualTo(2100);
  }

  /** A streamed chat answer as vLLM sends it: a chunk per token, usage in the last. */
  static String streamedChat(int tokens) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < tokens; i++) {
      b.append("data: {\"id\":\"chatcmpl-7f3a9c2e41d84b0fa1c5e8d2b6a47f10\",\"object\":\"chat.completion.chunk\",")
          .append("\"created\":1764676800,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,")
          .append("\"delta\":{\"content\":\" word").append(i).append(" \\\"usage\\\"\"},\"logprobs\":null,")
          .append("\"finish_reason\":null}]}\n\n");
    }
    b.append("data: {\"id\":\"chatcmpl-7f3a9c2e41d84b0fa1c5e8d2b6a47f10\",\"object\":\"chat.completion.chunk\",")
        .append("\"created\":1764676800,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[],")
        .append("\"usage\":{\"prompt_tokens\":7200,\"total_tokens\":8200,\"completion_tokens\":1000,")
        .append("\"prompt_tokens_details\":{\"cached_tokens\":6000}}}\n\ndata: [DONE]\n\n");
    return b.toString();
  }

  @Test
  void theTextOfStringsIsSkippedNotSteppedThrough() {
    byte[] body = streamedChat(1000).getBytes(StandardCharsets.UTF_8);
    UsageScanner s = new UsageScanner();
    // as Envoy hands it over: one read-only buffer per chunk of the stream
    for (int off = 0; off < body.length; off += 229) {
      s.feed(ByteBuffer.wrap(body, off, Math.min(229, body.length - off)).slice().asReadOnlyBuffer());
    }
    assertThat(s.cachedTokens()).isEqualTo(6000);
    assertThat(s.promptTokens()).isEqualTo(7200);
    assertThat(s.bytes()).isEqualTo(body.length);
    // ids, model names and generated text are read only for their closing quote; keys, structure and numbers are
    // what the state machine takes byte by byte (two fifths of these chunks)
    assertThat(s.stepped()).isLessThan(body.length * 45L / 100);
    // a non-streamed body larger than the scanner's slice, in one buffer
    UsageScanner whole = new UsageScanner();
    whole.feed(ByteBuffer.wrap(body).asReadOnlyBuffer());
    assertThat(whole.cachedTokens()).isEqualTo(6000);
    assertThat(whole.stepped()).isEqualTo(s.stepped());
  }
}
