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
    StringBuilder[] slot = OUTPUT.get();
    StringBuilder out = slot[0];
    slot[0] = null; // this render owns the buffer until it is put back below
    if (out == null) {
      out = new StringBuilder(sizeHint);
    } else {
      out.setLength(0);
      out.ensureCapacity(sizeHint);
    }
    try {
      Stmt.execAll(body, root, out);
      return out.toString();
    } catch (TemplateException e) {
      throw e;
    } catch (StackOverflowError e) {
      throw new TemplateRuntimeException("RecursionError", "maximum recursion depth exceeded", 0);
    } catch (RuntimeException e) {
      throw Stmt.located(e, 0);
    } finally {
      if (out.capacity() <= MAX_KEPT_OUTPUT_CHARS) {
        out.setLength(0);
        slot[0] = out;
      }
    }
  }

  /** A thread keeps its render buffer up to this capacity (about 1 MB, 2 MB once it held non-Latin-1 text). */
  static final int MAX_KEPT_OUTPUT_CHARS = 1 << 20;

  /**
   * Each thread's output buffer, so that rendering a long prompt does not grow and drop a fresh builder every
   * time (a 32k-token prompt is about 150 kB of text). Ownership: a render takes the buffer out of its
   * thread's slot for its whole run and puts it back after copying the result out, so the buffer never
   * escapes a render and a render nested on the same thread simply gets a new one.
   */
  private static final ThreadLocal<StringBuilder[]> OUTPUT = ThreadLocal.withInitial(() -> new StringBuilder[1]);

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
