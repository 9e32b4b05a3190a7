package dev.kvrouter.extproc.template.jinja;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.template.RenderLimits;
import dev.kvrouter.extproc.template.TemplateRuntimeException;
import java.time.Clock;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The output path's allocation shortcuts must not change what a template renders or raises: {@code {{ a + b }}}
 * chains appended piece by piece, and the per-thread output buffer reused across renders.
 */
class TemplateOutputTest {

  private static final Map<String, Object> GLOBALS = Template.globals(Clock.systemUTC());

  private static String render(String source, Map<String, Object> vars) {
    Map<String, Object> canonical = new HashMap<>();
    vars.forEach((k, v) -> canonical.put(k, PyOps.canonicalize(v)));
    return Template.compile(source).render(canonical, GLOBALS, RenderLimits.DEFAULT);
  }

  @Test
  void anAddChainOfStringsIsWrittenAsTheJoinedString() {
    Map<String, Object> vars = Map.of("role", "user", "content", "  hello  ");
    String chain = "{{- '<|start|>' + role + '<|sep|>\\n\\n' + content | trim + '<|eot|>' }}";
    String expected = "<|start|>user<|sep|>\n\nhello<|eot|>";
    assertThat(render(chain, vars)).isEqualTo(expected);
    // The same chain through an assignment builds the string itself: both forms agree.
    assertThat(render("{%- set s = '<|start|>' + role + '<|sep|>\\n\\n' + content | trim + '<|eot|>' %}{{ s }}", vars))
        .isEqualTo(expected);
    assertThat(render("a{{ x + y + z }}b", Map.of("x", "1", "y", "", "z", "3"))).isEqualTo("a13b");
  }

  @Test
  void aChainThatStopsBeingStringsFallsBackToPythonAddition() {
    // str + int raises TypeError where Python raises it, whether the chain is printed or assigned.
    assertThatThrownBy(() -> render("x{{ 'a' + 'b' + n }}", Map.of("n", 1L)))
        .isInstanceOf(TemplateRuntimeException.class)
        .satisfies(e -> assertThat(((TemplateRuntimeException) e).pythonType()).isEqualTo("TypeError"));
    assertThatThrownBy(() -> render("{% set s = 'a' + 'b' + n %}", Map.of("n", 1L)))
        .isInstanceOf(TemplateRuntimeException.class)
        .satisfies(e -> assertThat(((TemplateRuntimeException) e).pythonType()).isEqualTo("TypeError"));
    // Lists concatenate, and the result prints as Python's repr.
    assertThat(render("{{ a + b + c }}", Map.of("a", List.of(1L), "b", List.of("x"), "c", List.of())))
        .isEqualTo("[1, 'x']");
    // Numbers first, then a string: 1 + 2 is 3, and 3 + 'x' raises.
    assertThatThrownBy(() -> render("{{ 1 + 2 + s }}", Map.of("s", "x")))
        .isInstanceOf(TemplateRuntimeException.class);
    assertThat(render("{{ 1 + 2 + 3 }}", Map.of())).isEqualTo("6");
  }

  @Test
  void aFailedRenderLeavesNothingInTheThreadsBufferForTheNext() {
    String failing = "{{ 'partial output ' * 100 }}{{ 'still ' + 'going ' + n }}";
    assertThatThrownBy(() -> render(failing, Map.of("n", 1L))).isInstanceOf(TemplateRuntimeException.class);
    assertThat(render("ok {{ 'a' + b + 'c' }}", Map.of("b", "B"))).isEqualTo("ok aBc");
  }

  @Test
  void consecutiveRendersOnOneThreadAreIndependent() {
    String long1 = "x".repeat(50_000);
    assertThat(render("{{ '[' + s + ']' }}", Map.of("s", long1))).isEqualTo("[" + long1 + "]");
    assertThat(render("{{ '[' + s + ']' }}", Map.of("s", "short"))).isEqualTo("[short]");
    // A buffer that held non-Latin-1 text still renders Latin-1 text exactly.
    assertThat(render("{{ '<' + s + '>' }}", Map.of("s", "日本語"))).isEqualTo("<日本語>");
    assertThat(render("{{ '<' + s + '>' }}", Map.of("s", "plain"))).isEqualTo("<plain>");
  }
}
