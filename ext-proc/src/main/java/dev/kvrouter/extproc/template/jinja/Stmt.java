package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.TemplateException;
import dev.kvrouter.extproc.template.TemplateRuntimeException;
import java.util.List;

/** A statement node: renders into a buffer and reports how control leaves it. */
abstract class Stmt extends Node {
  static final int NORMAL = 0;
  static final int BREAK = 1;
  static final int CONTINUE = 2;

  Stmt(int line) {
    super(line);
  }

  /** Runs the statement; returns {@link #NORMAL}, {@link #BREAK} or {@link #CONTINUE}. */
  abstract int exec(Frame f, StringBuilder out);

  static int execAll(List<Stmt> body, Frame f, StringBuilder out) {
    for (int i = 0, n = body.size(); i < n; i++) {
      int r = body.get(i).exec(f, out);
      if (r != NORMAL) {
        return r;
      }
    }
    return NORMAL;
  }

  /** Gives a Python-level failure the line of the statement that raised it. */
  static TemplateException located(RuntimeException e, int line) {
    if (e instanceof JinjaError je) {
      return new TemplateRuntimeException(je.pythonType, je.getMessage(), line);
    }
    if (e instanceof TemplateException te) {
      return te;
    }
    if (e instanceof ClassCastException || e instanceof IndexOutOfBoundsException
        || e instanceof ArithmeticException || e instanceof IllegalArgumentException
        || e instanceof UnsupportedOperationException || e instanceof NullPointerException) {
      return new TemplateRuntimeException("InternalError", "template evaluation failed: " + e.getClass().getSimpleName(),
          line);
    }
    throw e;
  }
}
