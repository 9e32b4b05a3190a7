package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.TemplateException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/** The statement node types. */
final class Stmts {
  private Stmts() {}

  /** Literal text between tags. */
  static final class Data extends Node {
    final String text;

    Data(String text, int line) {
      super(line);
      this.text = text;
    }

    @Override
    List<Node> children() {
      return List.of();
    }
  }

  /** A run of template data and {@code {{ expressions }}}. */
  static final class Output extends Stmt {
    final List<Node> items;

    Output(List<Node> items, int line) {
      super(line);
      this.items = items;
      for (Node n : items) {
        if (n instanceof Expr e) {
          Exprs.markFolded(e);
        }
      }
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      for (Node n : items) {
        int before = out.length();
        if (n instanceof Data d) {
          out.append(d.text);
        } else {
          Expr e = (Expr) n;
          try {
            if (!Exprs.appendAddChain(e, f, out)) {
              PyRepr.appendStr(out, e.eval(f));
            }
          } catch (RuntimeException ex) {
            throw Stmt.located(ex, e.line);
          }
        }
        f.render.wrote(out.length() - before);
      }
      return NORMAL;
    }

    @Override
    List<Node> children() {
      return items;
    }
  }

  static boolean test(Expr e, Frame f) {
    try {
      return PyOps.truthy(e.eval(f));
    } catch (RuntimeException ex) {
      throw Stmt.located(ex, e.line);
    }
  }

  static Object eval(Expr e, Frame f) {
    try {
      return e.eval(f);
    } catch (RuntimeException ex) {
      throw Stmt.located(ex, e.line);
    }
  }

  static final class If extends Stmt {
    final Expr test;
    final List<Stmt> body;
    final List<If> elifs;
    final List<Stmt> orelse;

    If(Expr test, List<Stmt> body, List<If> elifs, List<Stmt> orelse, int line) {
      super(line);
      this.test = test;
      this.body = body;
      this.elifs = elifs;
      this.orelse = orelse;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      if (Stmts.test(test, f)) {
        return execAll(body, f, out);
      }
      for (If elif : elifs) {
        if (Stmts.test(elif.test, f)) {
          return execAll(elif.body, f, out);
        }
      }
      return execAll(orelse, f, out);
    }

    @Override
    List<Node> children() {
      return Exprs.nodes(test, body, elifs, orelse);
    }
  }

  static final class For extends Stmt {
    final Expr target;
    final Expr iter;
    final List<Stmt> body;
    final List<Stmt> orelse;
    final Expr filter;
    final boolean recursive;

    For(Expr target, Expr iter, List<Stmt> body, List<Stmt> orelse, Expr filter, boolean recursive, int line) {
      super(line);
      this.target = target;
      this.iter = iter;
      this.body = body;
      this.orelse = orelse;
      this.filter = filter;
      this.recursive = recursive;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      run(f, Stmts.eval(iter, f), 0, out);
      return NORMAL;
    }

    void run(Frame f, Object iterable, int depth0, StringBuilder out) {
      Iterator<Object> source;
      long knownLength = -1;
      try {
        source = PyOps.iterate(iterable);
        if (filter == null && PyOps.hasLen(iterable) && !(iterable instanceof LoopContext)) {
          knownLength = PyOps.len(iterable);
        }
      } catch (RuntimeException ex) {
        throw Stmt.located(ex, iter.line);
      }
      if (filter != null) {
        source = new Filtered(source, f);
      }
      LoopContext loop = new LoopContext(source, depth0, recursive ? this : null, f);
      if (knownLength >= 0) {
        loop.knownLength(knownLength);
      }
      boolean any = false;
      try {
        while (loop.hasNext()) {
          Object item = loop.next();
          any = true;
          f.render.step();
          Frame iteration = f.child();
          Exprs.assign(iteration, target, item);
          iteration.set("loop", loop);
          int r = execAll(body, iteration, out);
          if (r == BREAK) {
            break;
          }
        }
      } catch (TemplateException e) {
        throw e;
      } catch (RuntimeException ex) {
        throw Stmt.located(ex, line);
      }
      if (!any) {
        execAll(orelse, f.child(), out);
      }
    }

    /** Applies {@code for x in xs if cond} lazily, as jinja2's generated filter does. */
    private final class Filtered implements Iterator<Object> {
      private final Iterator<Object> source;
      private final Frame outer;
      private Object next;
      private boolean ready;

      Filtered(Iterator<Object> source, Frame outer) {
        this.source = source;
        this.outer = outer;
      }

      @Override
      public boolean hasNext() {
        while (!ready && source.hasNext()) {
          Object candidate = source.next();
          outer.render.step();
          Frame probe = outer.child();
          Exprs.assign(probe, target, candidate);
          if (Stmts.test(filter, probe)) {
            next = candidate;
            ready = true;
          }
        }
        return ready;
      }

      @Override
      public Object next() {
        if (!hasNext()) {
          throw new java.util.NoSuchElementException();
        }
        ready = false;
        return next;
      }
    }

    @Override
    List<Node> children() {
      return Exprs.nodes(target, iter, filter, body, orelse);
    }
  }

  static final class Assign extends Stmt {
    final Expr target;
    final Expr value;

    Assign(Expr target, Expr value, int line) {
      super(line);
      this.target = target;
      this.value = value;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      Object v = Stmts.eval(value, f);
      try {
        Exprs.assign(f, target, v);
      } catch (RuntimeException ex) {
        throw Stmt.located(ex, line);
      }
      return NORMAL;
    }

    @Override
    List<Node> children() {
      return List.of(target, value);
    }
  }

  static final class AssignBlock extends Stmt {
    final Expr target;
    final Exprs.FilterExpr filter;
    final List<Stmt> body;

    AssignBlock(Expr target, Exprs.FilterExpr filter, List<Stmt> body, int line) {
      super(line);
      this.target = target;
      this.filter = filter;
      this.body = body;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      StringBuilder buf = new StringBuilder();
      execAll(body, f.child(), buf);
      Object v = buf.toString();
      try {
        if (filter != null) {
          v = applyChain(filter, f, v);
        }
        Exprs.assign(f, target, v);
      } catch (RuntimeException ex) {
        throw Stmt.located(ex, line);
      }
      return NORMAL;
    }

    @Override
    List<Node> children() {
      return Exprs.nodes(target, filter, body);
    }
  }

  /** Applies a filter chain whose innermost node is the block body. */
  static Object applyChain(Exprs.FilterExpr filter, Frame f, Object value) {
    Object input = filter.node == null ? value : applyChain((Exprs.FilterExpr) filter.node, f, value);
    return filter.apply(f, input);
  }

  static final class MacroDef extends Stmt {
    final String name;
    final List<String> params;
    final List<Expr> defaults;
    final List<Stmt> body;
    final boolean catchKwargs;
    final boolean catchVarargs;
    final boolean usesCaller;

    MacroDef(String name, List<String> params, List<Expr> defaults, List<Stmt> body, boolean catchKwargs,
        boolean catchVarargs, boolean usesCaller, int line) {
      super(line);
      this.name = name;
      this.params = params;
      this.defaults = defaults;
      this.body = body;
      this.catchKwargs = catchKwargs;
      this.catchVarargs = catchVarargs;
      this.usesCaller = usesCaller;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      f.set(name, new MacroValue(this, f));
      return NORMAL;
    }

    @Override
    List<Node> children() {
      List<Node> out = new ArrayList<>();
      for (Expr d : defaults) {
        if (d != null) {
          out.add(d);
        }
      }
      out.addAll(body);
      return out;
    }
  }

  static final class CallBlock extends Stmt {
    final Exprs.Call call;
    final MacroDef caller;

    CallBlock(Exprs.Call call, MacroDef caller, int line) {
      super(line);
      this.call = call;
      this.caller = caller;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      int before = out.length();
      try {
        Object fn = call.callee.eval(f);
        Exprs.CallArgs ca = Exprs.evalArgs(f, call.args, call.kwargs, call.dynArgs, call.dynKwargs);
        java.util.Map<String, Object> kw = new java.util.LinkedHashMap<>(ca.kwargs());
        kw.put("caller", new MacroValue(caller, f));
        PyRepr.appendStr(out, Exprs.invoke(f, fn, ca.args(), kw));
      } catch (TemplateException e) {
        throw e;
      } catch (RuntimeException ex) {
        throw Stmt.located(ex, line);
      }
      f.render.wrote(out.length() - before);
      return NORMAL;
    }

    @Override
    List<Node> children() {
      return Exprs.nodes(call, caller);
    }
  }

  static final class FilterBlock extends Stmt {
    final Exprs.FilterExpr filter;
    final List<Stmt> body;

    FilterBlock(Exprs.FilterExpr filter, List<Stmt> body, int line) {
      super(line);
      this.filter = filter;
      this.body = body;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      StringBuilder buf = new StringBuilder();
      execAll(body, f.child(), buf);
      int before = out.length();
      try {
        PyRepr.appendStr(out, applyChain(filter, f, buf.toString()));
      } catch (RuntimeException ex) {
        throw Stmt.located(ex, line);
      }
      f.render.wrote(out.length() - before);
      return NORMAL;
    }

    @Override
    List<Node> children() {
      return Exprs.nodes(filter, body);
    }
  }

  static final class With extends Stmt {
    final List<Expr> targets;
    final List<Expr> values;
    final List<Stmt> body;

    With(List<Expr> targets, List<Expr> values, List<Stmt> body, int line) {
      super(line);
      this.targets = targets;
      this.values = values;
      this.body = body;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      Frame inner = f.child();
      for (int i = 0; i < targets.size(); i++) {
        Object v = Stmts.eval(values.get(i), f);
        try {
          Exprs.assign(inner, targets.get(i), v);
        } catch (RuntimeException ex) {
          throw Stmt.located(ex, line);
        }
      }
      return execAll(body, inner, out);
    }

    @Override
    List<Node> children() {
      return Exprs.nodes(targets, values, body);
    }
  }

  /** {@code break} / {@code continue} from the loopcontrols extension. */
  static final class LoopControl extends Stmt {
    final boolean isBreak;

    LoopControl(boolean isBreak, int line) {
      super(line);
      this.isBreak = isBreak;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      return isBreak ? BREAK : CONTINUE;
    }

    @Override
    List<Node> children() {
      return List.of();
    }
  }

  /** transformers' {@code {% generation %}} block: renders its body (assistant-mask tracking is not needed). */
  static final class Body extends Stmt {
    final List<Stmt> body;

    Body(List<Stmt> body, int line) {
      super(line);
      this.body = body;
    }

    @Override
    int exec(Frame f, StringBuilder out) {
      return execAll(body, f, out);
    }

    @Override
    List<Node> children() {
      return new ArrayList<>(body);
    }
  }
}
