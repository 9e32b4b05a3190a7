package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.RenderLimits;
import dev.kvrouter.extproc.template.TemplateException;
import dev.kvrouter.extproc.template.TemplateRuntimeException;
import dev.kvrouter.extproc.template.TemplateSyntaxException;
import java.time.Clock;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.Map;

/**
 * A compiled Jinja template: parsed once into evaluable nodes, rendered any number of times.
 * Immutable and safe to share between threads; every render gets its own frames and counters.
 */
public final class Template {
  private final List<Stmt> body;

  private Template(List<Stmt> body) {
    this.body = body;
  }

  /** Compiles a template source; fails with {@code TemplateSyntaxException}. */
  public static Template compile(String source) {
    try {
      return new Template(Collections.unmodifiableList(Parser.parse(source)));
    } catch (StackOverflowError e) {
      throw new TemplateSyntaxException("template nests too deeply to parse", 0);
    }
  }

  /** Globals for renders at the given clock (strftime_now reads it). Build once and reuse. */
  public static Map<String, Object> globals(Clock clock) {
    return Globals.create(clock);
  }

  /**
   * Renders with the given variables, which must already be in canonical form
   * ({@link PyOps#canonicalize}).
   */
  public String render(Map<String, Object> variables, Map<String, Object> globals, RenderLimits limits) {
    return render(variables, globals, limits, 4096);
  }

  /** As {@link #render(Map, Map, RenderLimits)}, with a guess of the output length to size the buffer. */
  public String render(Map<String, Object> variables, Map<String, Object> globals, RenderLimits limits,
      int sizeHint) {
    Render render = new Render(globals, limits);
    Frame root = new Frame(render, variables);
    StringBuilder out = new StringBuilder(sizeHint);
    try {
      Stmt.execAll(body, root, out);
    } catch (TemplateException e) {
      throw e;
    } catch (StackOverflowError e) {
      throw new TemplateRuntimeException("RecursionError", "maximum recursion depth exceeded", 0);
    } catch (RuntimeException e) {
      throw Stmt.located(e, 0);
    }
    return out.toString();
  }

  /** Every node of the tree, depth-first in source order (jinja2's {@code find_all} order). */
  List<Node> allNodes() {
    List<Node> out = new ArrayList<>();
    Deque<Node> todo = new ArrayDeque<>();
    for (int k = body.size() - 1; k >= 0; k--) {
      todo.push(body.get(k));
    }
    while (!todo.isEmpty()) {
      Node n = todo.pop();
      out.add(n);
      List<Node> ch = n.children();
      for (int k = ch.size() - 1; k >= 0; k--) {
        todo.push(ch.get(k));
      }
    }
    return out;
  }
}
