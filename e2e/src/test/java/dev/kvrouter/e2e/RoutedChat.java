package dev.kvrouter.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvrouter.examples.ab.EnvoyAbStack;
import dev.kvrouter.examples.ab.RouterLauncher;
import dev.kvrouter.examples.ab.RouterMetrics;
import dev.kvrouter.extproc.decision.DecisionLog;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.LoggerFactory;

/**
 * An {@link EnvoyAbStack} whose router runs in the test's JVM, and chat requests through it, each answered with who
 * served it, its usage and the router's decision record (captured from the {@code kvrouter.decisions} logger).
 */
final class RoutedChat implements AutoCloseable {

  static final ObjectMapper JSON = new ObjectMapper();
  static final Duration WAIT = Duration.ofSeconds(30);

  private final Logger decisionLogger;
  private final DecisionRecords records = new DecisionRecords();
  private EnvoyAbStack stack;

  private RoutedChat() {
    assertThat(LoggerFactory.getLogger(DecisionLog.LOGGER)).as("decision records are read from logback")
        .isInstanceOf(Logger.class);
    decisionLogger = (Logger) LoggerFactory.getLogger(DecisionLog.LOGGER);
    records.setContext(decisionLogger.getLoggerContext());
    records.start();
    decisionLogger.addAppender(records);
  }

  /** Starts capturing decision records, then the stack with the router in process; close to stop both. */
  static RoutedChat start(EnvoyAbStack.Options options) throws Exception {
    RoutedChat chat = new RoutedChat();
    try {
      RouterLauncher inProcess = InProcessRouter.launcher(() -> List.copyOf(chat.records.lines));
      chat.stack = EnvoyAbStack.start(options, inProcess);
      return chat;
    } catch (Exception | Error e) {
      chat.close();
      throw e;
    }
  }

  EnvoyAbStack stack() {
    return stack;
  }

  /** The router's decision and outcome records so far. */
  DecisionRecords records() {
    return records;
  }

  /** One non-streamed chat request through Envoy: who served it, its usage, and the router's decision id. */
  record Reply(String worker, int prompt, int cached, String decisionId, DecisionRecords records) {
    /** The router's decision record of this request (bounded wait: it is logged before the request is forwarded). */
    JsonNode decision() throws Exception {
      return records.decision(decisionId);
    }
  }

  Reply send(ObjectNode body) throws Exception {
    HttpResponse<String> r = stack.post("/v1/chat/completions", JSON.writeValueAsString(body), Map.of());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    JsonNode usage = JSON.readTree(r.body()).get("usage");
    return new Reply(r.headers().firstValue("x-kvrouter-served-by").orElseThrow(),
        usage.get("prompt_tokens").asInt(), usage.get("prompt_tokens_details").get("cached_tokens").asInt(),
        r.headers().firstValue("x-kvrouter-decision").orElseThrow(), records);
  }

  /** The router's {@code kvrouter_truth_checks_total} of one outcome. */
  double truthChecks(String outcome) {
    return RouterMetrics.sum(stack.routerMetrics(), "kvrouter_truth_checks_total", "outcome=\"" + outcome + "\"");
  }

  /** Blocks the router applied from each worker's {@code BlockStored} events so far. */
  Map<String, Double> storedBlocks() {
    return MultimodalRoutingE2eTest.storedBlocks(stack);
  }

  /**
   * Waits until the router applied every block {@code worker} stored for one request: the full blocks of its prompt
   * and all but the last generated token (vLLM never feeds the last one back), less those it found cached. Bounded.
   */
  void awaitStores(String worker, int prompt, int cached, int output, int blockSize, Map<String, Double> before)
      throws Exception {
    int added = (prompt + output - 1) / blockSize - cached / blockSize;
    double target = before.get(worker) + added;
    String filter = "op=\"stored\",worker=\"" + worker + "\"";
    MultimodalRoutingE2eTest.await("the router applies the " + added + " blocks " + worker + " stored", () -> {
      String m = stack.routerMetrics();
      return m != null && RouterMetrics.sum(m, "kvrouter_events_blocks_total", filter) >= target;
    });
  }

  /** The candidate {@code worker} of a decision record. */
  static JsonNode candidate(JsonNode decision, String worker) {
    for (JsonNode c : decision.get("candidates")) {
      if (c.get("worker").asText().equals(worker)) {
        return c;
      }
    }
    throw new AssertionError("no candidate " + worker + " in " + decision);
  }

  @Override
  public void close() {
    if (stack != null) {
      stack.close();
    }
    decisionLogger.detachAppender(records);
    records.stop();
  }

  /** Decision records of the in-process router, captured from its {@code kvrouter.decisions} logger; bounded. */
  static final class DecisionRecords extends AppenderBase<ILoggingEvent> {
    static final int MAX = 2048;
    final ConcurrentLinkedDeque<String> lines = new ConcurrentLinkedDeque<>();
    final AtomicInteger size = new AtomicInteger();

    @Override
    protected void append(ILoggingEvent e) {
      lines.addLast(e.getFormattedMessage());
      if (size.incrementAndGet() > MAX) {
        lines.pollFirst();
        size.decrementAndGet();
      }
    }

    JsonNode decision(String id) throws Exception {
      return record("decision", id);
    }

    /** The outcome record of decision {@code id}, with its truth check; logged once the response has ended. */
    JsonNode outcome(String id) throws Exception {
      return record("outcome", id);
    }

    private JsonNode record(String event, String id) throws Exception {
      Map<String, JsonNode> found = new HashMap<>();
      Await.until("the " + event + " record " + id + " is logged", WAIT, () -> {
        for (String l : lines) {
          if (l.contains("\"event\":\"" + event + "\"") && l.contains("\"id\":\"" + id + "\"")) {
            try {
              found.put(id, JSON.readTree(l));
            } catch (java.io.IOException e) {
              throw new AssertionError(e);
            }
            return true;
          }
        }
        return false;
      });
      return found.get(id);
    }
  }
}
