package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.TemplateSyntaxException;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Compile-time checks jinja2's code generator makes: an unknown filter or test is an error,
 * except inside an {@code if} statement or inline if-expression (a "soft" frame), where jinja2
 * defers the error until the expression actually runs.
 */
final class Validator {
  private Validator() {}

  static void check(List<? extends Node> body) {
    for (Node n : body) {
      visit(n, false);
    }
  }

  private static void visit(Node n, boolean soft) {
    if (n instanceof Exprs.FilterExpr fe && fe.fn == null && !soft) {
      throw new TemplateSyntaxException("No filter named '" + fe.name + "'.", fe.line);
    }
    if (n instanceof Exprs.TestExpr te && te.fn == null && !soft) {
      throw new TemplateSyntaxException("No test named '" + te.name + "'.", te.line);
    }
    boolean childSoft = soft;
    if (n instanceof Stmts.If || n instanceof Exprs.CondExpr) {
      childSoft = true;
    } else if (n instanceof Stmts.For || n instanceof Stmts.MacroDef || n instanceof Stmts.CallBlock
        || n instanceof Stmts.FilterBlock || n instanceof Stmts.AssignBlock || n instanceof Stmts.With) {
      childSoft = false;
    }
    for (Node c : n.children()) {
      visit(c, childSoft);
    }
  }

  /** Names read anywhere under the given nodes. */
  static Set<String> loadedNames(List<? extends Node> roots) {
    Set<String> out = new HashSet<>();
    Deque<Node> todo = new ArrayDeque<>(roots);
    while (!todo.isEmpty()) {
      Node n = todo.pop();
      if (n instanceof Exprs.Name name) {
        out.add(name.name);
      }
      todo.addAll(n.children());
    }
    return out;
  }
}
