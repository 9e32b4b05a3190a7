package dev.kvrouter.extproc.template;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** apply_chat_template behaviour around the template, limits, and error hygiene. */
class ChatTemplateRendererTest {
  private static final String SECRET = "s3cr3t-prompt-text-do-not-log";

  private static ChatTemplateRenderer renderer(String template) {
    return new ChatTemplateRenderer(ChatTemplate.compile(template), new SpecialTokens(Map.of("bos_token", "<s>")),
        GoldenFixtures.ENV);
  }

  private static Map<String, Object> msg(String role, Object content) {
    Map<String, Object> m = new HashMap<>();
    m.put("role", role);
    m.put("content", content);
    return m;
  }

  @Test
  void noneValuedKeysAreDroppedBeforeRendering() {
    var r = renderer("{{ messages[0].content is defined }}|{{ messages[0] | length }}");
    assertThat(r.render(ChatTemplateInput.of(List.of(msg("assistant", null))))).isEqualTo("False|1");
  }

  @Test
  void reasoningFieldsAreAliased() {
    var r = renderer("{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}");
    Map<String, Object> m = new java.util.LinkedHashMap<>();
    m.put("role", "assistant");
    m.put("content", "c");
    m.put("reasoning", "r");
    assertThat(r.render(ChatTemplateInput.of(List.of(m))))
        .isEqualTo("thinking=r;role=assistant;content=c;reasoning=r;reasoning_content=r;");
  }

  @Test
  void kwargsOverrideSpecialTokensButNotReservedNames() {
    var r = renderer("{{ bos_token }}{{ flag }}");
    var in = new ChatTemplateInput(List.of(msg("user", "x")), null, null, true, null, Map.of("bos_token", "B",
        "flag", 1));
    assertThat(r.render(in)).isEqualTo("B1");
    var clash = new ChatTemplateInput(List.of(msg("user", "x")), null, null, true, null, Map.of("messages", 1));
    assertThatThrownBy(() -> r.render(clash)).isInstanceOf(ChatInputException.class)
        .extracting(e -> ((TemplateException) e).pythonType()).isEqualTo("TypeError");
  }

  @Test
  void continueFinalMessageChecksMirrorTransformers() {
    var noContent = renderer("{% for m in messages %}{{ m.role }}{% endfor %}");
    var in = new ChatTemplateInput(List.of(msg("user", "hello there")), null, null, false, "content", Map.of());
    assertThatThrownBy(() -> noContent.render(in)).isInstanceOf(ChatInputException.class)
        .hasMessageContaining("not an accepted field");
    var drops = renderer("{% for m in messages %}{{ m['content'][:3] }}{% endfor %}");
    assertThatThrownBy(() -> drops.render(in)).isInstanceOf(ChatInputException.class)
        .hasMessageContaining("does not appear").hasMessageNotContaining("hello");
    var trims = renderer("{% for m in messages %}<{{ m['content'] | trim }}>{% endfor %}");
    var spaced = new ChatTemplateInput(List.of(msg("user", "ends with space ")), null, null, false, "content",
        Map.of());
    assertThat(trims.render(spaced)).isEqualTo("<ends with space");
    var reasoning = renderer("{% for m in messages %}[{{ m.reasoning_content }}|{{ m.content }}]{% endfor %}");
    Map<String, Object> m = msg("assistant", "answer");
    m.put("reasoning_content", "thinking so far");
    var r = new ChatTemplateInput(List.of(m), null, null, false, "reasoning_content", Map.of());
    assertThat(reasoning.render(r)).isEqualTo("[thinking so far");
  }

  @Test
  void errorMessagesNeverCarryRequestText() {
    var in = ChatTemplateInput.of(List.of(msg("user", SECRET)));
    for (String t : List.of(
        "{{ raise_exception('bad message: ' ~ messages[0].content) }}",
        "{{ {'a': 1}[messages[0].content] + 1 }}",
        "{{ messages[0].content + 1 }}",
        "{{ messages[0].content | int + none }}",
        "{{ messages[0].content.nope() }}",
        "{{ messages[0].content.index('zzz') }}",
        "{{ messages[0].content | tojson(indent=messages) }}")) {
      assertThatThrownBy(() -> renderer(t).render(in)).as(t).isInstanceOf(TemplateException.class)
          .hasMessageNotContaining(SECRET).hasMessageNotContaining("s3cr3t");
    }
    assertThatThrownBy(() -> renderer("{{ raise_exception('Roles must alternate') }}").render(in))
        .isInstanceOf(RaisedTemplateException.class).hasMessageContaining("Roles must alternate");
  }

  @Test
  void limitsStopRunawayTemplates() {
    var env = new TemplateEnvironment(Clock.systemUTC(), new RenderLimits(10_000, 5_000, 50));
    var in = ChatTemplateInput.of(List.of(msg("user", "x")));
    var loops = new ChatTemplateRenderer(ChatTemplate.compile(
        "{% for a in range(100) %}{% for b in range(100) %}{% endfor %}{% endfor %}"), SpecialTokens.none(), env);
    assertThatThrownBy(() -> loops.render(in)).isInstanceOf(TemplateRuntimeException.class)
        .extracting(e -> ((TemplateException) e).pythonType()).isEqualTo("LimitExceeded");
    var output = new ChatTemplateRenderer(ChatTemplate.compile("{% for a in range(1000) %}{{ 'xxxxxxxxxxxxxxxx' }}"
        + "{% endfor %}"), SpecialTokens.none(), env);
    assertThatThrownBy(() -> output.render(in)).isInstanceOf(TemplateRuntimeException.class)
        .hasMessageContaining("characters");
    var recursion = new ChatTemplateRenderer(ChatTemplate.compile("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}"
        + "{{ f(0) }}"), SpecialTokens.none(), env);
    assertThatThrownBy(() -> recursion.render(in)).isInstanceOf(TemplateRuntimeException.class)
        .extracting(e -> ((TemplateException) e).pythonType()).isEqualTo("RecursionError");
    var bigString = renderer("{{ 'x' * 1000000000 }}");
    assertThatThrownBy(() -> bigString.render(in)).isInstanceOf(TemplateRuntimeException.class);
  }

  @Test
  void pathologicalTemplatesFailToCompileInsteadOfCrashing() {
    String deep = "{{ " + "(".repeat(200_000) + "1" + ")".repeat(200_000) + " }}";
    assertThatThrownBy(() -> ChatTemplate.compile(deep)).isInstanceOf(TemplateSyntaxException.class);
    assertThatThrownBy(() -> ChatTemplate.compile("{% for x in y %}")).isInstanceOf(TemplateSyntaxException.class)
        .hasMessageContaining("endfor");
  }

  @Test
  void strftimeNowReadsTheInjectedClock() {
    var env = new TemplateEnvironment(Clock.fixed(Instant.parse("2024-07-26T23:30:00Z"), ZoneId.of("Asia/Tokyo")),
        RenderLimits.DEFAULT);
    var r = new ChatTemplateRenderer(ChatTemplate.compile("{{ strftime_now('%d %b %Y %H:%M') }}"),
        SpecialTokens.none(), env);
    assertThat(r.render(ChatTemplateInput.of(List.of(msg("user", "x"))))).isEqualTo("27 Jul 2024 08:30");
  }

  @Test
  void rendersConcurrentlyWithoutInterference() throws Exception {
    var r = renderer("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        + "{{ m.content }}{% endfor %}{{ ns.n }}");
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<Boolean>> results = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        int id = t;
        results.add(pool.submit(() -> {
          for (int i = 0; i < 200; i++) {
            List<Map<String, Object>> msgs = List.of(msg("user", "t" + id), msg("user", "i" + i));
            if (!r.render(ChatTemplateInput.of(msgs)).equals("t" + id + "i" + i + "2")) {
              return false;
            }
          }
          return true;
        }));
      }
      for (Future<Boolean> f : results) {
        assertThat(f.get(60, TimeUnit.SECONDS)).isTrue();
      }
    } finally {
      pool.shutdownNow();
    }
  }
}
