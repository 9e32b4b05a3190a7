package dev.kvrouter.extproc.template;

import dev.kvrouter.extproc.template.jinja.PyOps;
import dev.kvrouter.extproc.template.jinja.Template;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Objects;

/**
 * A chat template compiled once by kvrouter's Jinja interpreter, rendering exactly as Python
 * {@code jinja2} does inside transformers' {@code ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True, extensions=[loopcontrols])}. Immutable and thread-safe.
 *
 * <p>This is the raw template; {@link ChatTemplateRenderer} adds what
 * {@code apply_chat_template} does around it.
 */
public final class ChatTemplate {
  private final String source;
  private final Template compiled;
  private final String sha256;

  private ChatTemplate(String source, Template compiled) {
    this.source = source;
    this.compiled = compiled;
    this.sha256 = sha256(source);
  }

  /** Compiles the template; throws {@link TemplateSyntaxException} when jinja2 would refuse it too. */
  public static ChatTemplate compile(String source) {
    Objects.requireNonNull(source, "source");
    return new ChatTemplate(source, Template.compile(source));
  }

  /**
   * Renders with plain Java values as Jackson produces them (maps, lists, strings, numbers,
   * booleans, null). Values are copied, never modified.
   */
  public String render(Map<String, ?> variables, TemplateEnvironment env) {
    Map<String, Object> vars = new HashMap<>(Math.max(8, variables.size() * 2));
    for (Map.Entry<String, ?> e : variables.entrySet()) {
      vars.put(e.getKey(), PyOps.canonicalize(e.getValue()));
    }
    return renderCanonical(vars, env);
  }

  /** Renders variables already in the interpreter's canonical form (no copy). */
  String renderCanonical(Map<String, Object> vars, TemplateEnvironment env) {
    return compiled.render(vars, env.globals(), env.limits());
  }

  /** As {@link #renderCanonical(Map, TemplateEnvironment)} with an output size guess. */
  String renderCanonical(Map<String, Object> vars, TemplateEnvironment env, int sizeHint) {
    return compiled.render(vars, env.globals(), env.limits(), sizeHint);
  }

  public String source() {
    return source;
  }

  /** Hex SHA-256 of the source, to identify the template in logs and metrics without printing it. */
  public String sha256() {
    return sha256;
  }

  Template compiled() {
    return compiled;
  }

  private static String sha256(String s) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
