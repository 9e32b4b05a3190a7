package dev.kvrouter.extproc.template.jinja;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvrouter.extproc.template.ChatTemplate;
import dev.kvrouter.extproc.template.RenderLimits;
import dev.kvrouter.extproc.template.TemplateEnvironment;
import dev.kvrouter.extproc.template.TemplateException;
import dev.kvrouter.extproc.template.TemplateSyntaxException;
import java.nio.file.Path;
import java.time.Clock;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Renders every snippet of semantics.json (written by scripts/fixtures/chat_templates_semantics.py
 * from real jinja2 in transformers' environment) and compares output or error class exactly.
 */
class JinjaSemanticsGoldenTest {
  private static final TemplateEnvironment ENV = new TemplateEnvironment(
      Clock.fixed(LocalDateTime.of(2025, 3, 7, 9, 5, 3, 123_456_000).toInstant(ZoneOffset.UTC), ZoneOffset.UTC),
      RenderLimits.DEFAULT);

  /** Python errors whose class the interpreter reproduces one to one. */
  private static final Set<String> SAME_TYPE = Set.of("UndefinedError", "TypeError", "ValueError", "SecurityError",
      "TemplateError", "ZeroDivisionError", "OverflowError", "TemplateRuntimeError");
  private static final Set<String> SYNTAX = Set.of("TemplateSyntaxError", "TemplateAssertionError", "SyntaxError");

  @TestFactory
  Stream<DynamicTest> everySnippetMatchesJinja2() throws Exception {
    String root = System.getProperty("kvrouter.root");
    JsonNode doc = new ObjectMapper().readTree(
        Path.of(root, "ext-proc/src/test/resources/fixtures/templates/semantics.json").toFile());
    @SuppressWarnings("unchecked")
    Map<String, Object> context = new ObjectMapper().convertValue(doc.get("context"), Map.class);
    List<DynamicTest> tests = new ArrayList<>();
    int i = 0;
    for (JsonNode c : doc.get("cases")) {
      String src = c.get("template").asText();
      String name = String.format("%03d %s", i++, src.length() > 60 ? src.substring(0, 60) : src);
      tests.add(DynamicTest.dynamicTest(name, () -> check(src, c, context)));
    }
    assertThat(tests).hasSizeGreaterThan(150);
    return tests.stream();
  }

  private static void check(String src, JsonNode c, Map<String, Object> context) {
    if (c.has("text")) {
      String expected = c.get("text").asText();
      if (expected.contains(" at 0x")) {
        // Python printed a memory address; no other implementation can match it, so we refuse.
        assertThat(catchRender(src, context)).isNotNull();
        return;
      }
      String actual;
      try {
        actual = ChatTemplate.compile(src).render(context, ENV);
      } catch (TemplateException e) {
        fail("jinja2 rendered but we raised " + e.pythonType() + ": " + e.getMessage());
        return;
      }
      if (!expected.equals(actual)) {
        fail("expected «" + expected.replace("\n", "\\n") + "» but got «" + actual.replace("\n", "\\n") + "»");
      }
      return;
    }
    String pyType = c.get("error").get("type").asText();
    TemplateException e = catchRender(src, context);
    assertThat(e).as("jinja2 raised %s: %s", pyType, c.get("error").get("message").asText()).isNotNull();
    if (SYNTAX.contains(pyType) || c.get("error").get("message").asText().contains("no loader")) {
      // jinja2 reports a missing template loader as a TypeError at render time; we reject the tag.
      assertThat(e).isInstanceOf(TemplateSyntaxException.class);
    } else if (SAME_TYPE.contains(pyType)) {
      assertThat(e.pythonType()).isEqualTo(pyType);
      if (pyType.equals("TemplateError")) {
        String msg = c.get("error").get("message").asText();
        assertThat(e.getMessage()).contains(msg);
      }
    }
  }

  private static TemplateException catchRender(String src, Map<String, Object> context) {
    try {
      ChatTemplate.compile(src).render(context, ENV);
      return null;
    } catch (TemplateException e) {
      return e;
    }
  }
}
