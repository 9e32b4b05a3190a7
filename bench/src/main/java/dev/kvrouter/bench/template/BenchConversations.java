package dev.kvrouter.bench.template;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The conversations the template benchmarks render, generated deterministically. The same
 * generator is written out in scripts/fixtures/chat_templates_pybench.py so Python's timings are
 * for the identical input.
 */
final class BenchConversations {
  private BenchConversations() {}

  static Map<String, Object> map(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  static List<Map<String, Object>> tools() {
    List<Map<String, Object>> tools = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      tools.add(map("type", "function", "function", map(
          "name", "tool_" + i,
          "description", "Tool number " + i + " fetches records from the inventory service and returns JSON.",
          "parameters", map("type", "object", "properties", map(
              "query", map("type", "string", "description", "What to look for"),
              "limit", map("type", "integer", "description", "Maximum results"),
              "tags", map("type", "array", "items", map("type", "string"), "description", "Filter tags")),
              "required", List.of("query")))));
    }
    return tools;
  }

  /**
   * A system prompt plus {@code turns} user/assistant turns; every third turn is a tool call
   * followed by its result. Message texts are 200-400 characters.
   */
  static List<Map<String, Object>> conversation(int turns) {
    List<Map<String, Object>> out = new ArrayList<>();
    out.add(map("role", "system", "content", "You are an inventory assistant. " + "Be precise and cite record ids. "
        .repeat(6)));
    for (int t = 0; t < turns; t++) {
      out.add(map("role", "user", "content", ("Turn " + t + ": please find items matching 'widget-" + t
          + "' and summarize stock levels across warehouses. ").repeat(2 + t % 3)));
      if (t % 3 == 2) {
        out.add(map("role", "assistant", "content", "", "tool_calls", List.of(map("id", "call_" + t, "type",
            "function", "function", map("name", "tool_" + (t % 4), "arguments", map("query", "widget-" + t,
                "limit", 10, "tags", List.of("stock", "eu")))))));
        out.add(map("role", "tool", "content", "{\"records\": [{\"id\": " + t + ", \"qty\": " + (t * 7)
            + "}], \"warehouse\": \"eu-west\"}", "tool_call_id", "call_" + t));
      }
      out.add(map("role", "assistant", "content", ("For turn " + t + " I found " + (t * 3)
          + " matching records; stock is adequate in eu-west and low in us-east. ").repeat(2 + t % 2)));
    }
    out.add(map("role", "user", "content", "Thanks, now draft the reorder email."));
    return out;
  }
}
