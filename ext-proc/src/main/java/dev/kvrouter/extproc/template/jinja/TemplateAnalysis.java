package dev.kvrouter.extproc.template.jinja;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Static questions vLLM asks about a chat template's syntax tree: whether it loops over message
 * content parts (the content-format detection of {@code vllm/renderers/hf.py}), and which
 * variables it reads (to filter {@code chat_template_kwargs}).
 */
public final class TemplateAnalysis {
  private TemplateAnalysis() {}

  /**
   * vLLM's {@code _detect_content_format}: "openai" when some {@code for} loop iterates over the
   * {@code content} of a variable that iterates over {@code messages} (or over a variable assigned
   * from {@code messages}, a slice or filter of it); otherwise "string". Like vLLM, any surprise in
   * the tree (an assignment of {@code messages} to something other than a plain name, a tuple loop
   * target) makes the detection give up with "string".
   */
  public static String detectContentFormat(Template t) {
    try {
      return iterContentLoops(t).isEmpty() ? "string" : "openai";
    } catch (IllegalStateException e) {
      return "string";
    }
  }

  private static List<Node> allOf(Template t, Class<?> type) {
    List<Node> out = new ArrayList<>();
    for (Node n : t.allNodes()) {
      if (type.isInstance(n)) {
        out.add(n);
      }
    }
    return out;
  }

  private static List<String> iterContentLoops(Template t) {
    List<String> messageVars = new ArrayList<>();
    for (String v : messagesVars(t)) {
      for (Node n : allOf(t, Stmts.For.class)) {
        Stmts.For loop = (Stmts.For) n;
        if (isVarOrElemsAccess(loop.iter, v, null)) {
          messageVars.add(loopTarget(loop));
        }
      }
    }
    // vLLM iterates loops in the outer position and breaks at the first matching variable.
    List<String> found = new ArrayList<>();
    for (Node n : allOf(t, Stmts.For.class)) {
      Stmts.For loop = (Stmts.For) n;
      for (String mv : messageVars) {
        if (isVarOrElemsAccess(loop.iter, mv, "content")) {
          found.add(loopTarget(loop));
          return found;
        }
      }
    }
    return found;
  }

  /** {@code messages} plus every name assigned (transitively) from it. */
  private static List<String> messagesVars(Template t) {
    List<String> names = new ArrayList<>();
    names.add("messages");
    Deque<String> todo = new ArrayDeque<>();
    todo.add("messages");
    Set<String> seen = new HashSet<>(names);
    List<Node> assigns = allOf(t, Stmts.Assign.class);
    while (!todo.isEmpty()) {
      String related = todo.poll();
      for (Node n : assigns) {
        Stmts.Assign a = (Stmts.Assign) n;
        if (isVarOrElemsAccess(a.value, related, null)) {
          if (!(a.target instanceof Exprs.Name name)) {
            throw new IllegalStateException("assignment target is not a name");
          }
          names.add(name.name);
          // vLLM guards only against direct self-assignment; a visited set also stops longer cycles.
          if (!name.name.equals(related) && seen.add(name.name)) {
            todo.add(name.name);
          }
        }
      }
    }
    return names;
  }

  private static String loopTarget(Stmts.For loop) {
    if (!(loop.target instanceof Exprs.Name name)) {
      throw new IllegalStateException("loop target is not a name");
    }
    return name.name;
  }

  private static boolean isVarOrElemsAccess(Expr node, String var, String key) {
    if (node instanceof Exprs.FilterExpr f) {
      return f.node != null && isVarOrElemsAccess(f.node, var, key);
    }
    if (node instanceof Exprs.TestExpr t) {
      return isVarOrElemsAccess(t.node, var, key);
    }
    if (node instanceof Exprs.Getitem g && g.arg instanceof Exprs.Slice) {
      return isVarOrElemsAccess(g.node, var, key);
    }
    return key != null ? isAttrAccess(node, var, key) : isVarAccess(node, var);
  }

  private static boolean isVarAccess(Expr node, String var) {
    return node instanceof Exprs.Name n && n.name.equals(var);
  }

  private static boolean isAttrAccess(Expr node, String var, String key) {
    if (node instanceof Exprs.Getitem g) {
      return isVarAccess(g.node, var) && g.arg instanceof Exprs.Const c && key.equals(c.value);
    }
    if (node instanceof Exprs.Getattr g) {
      return isVarAccess(g.node, var) && g.attr.equals(key);
    }
    return false;
  }

  /**
   * Names the template reads anywhere. A superset of jinja2's {@code find_undeclared_variables}
   * (it also counts names assigned before use), which is harmless for filtering kwargs: a kwarg
   * the template overwrites before reading renders the same either way.
   */
  public static Set<String> referencedNames(Template t) {
    Set<String> out = new LinkedHashSet<>();
    for (Node n : t.allNodes()) {
      if (n instanceof Exprs.Name name) {
        out.add(name.name);
      }
    }
    return out;
  }
}
