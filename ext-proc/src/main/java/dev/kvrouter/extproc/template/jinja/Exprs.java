package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.RaisedTemplateException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/** The expression node types, each evaluating itself (the "compiled" form of a template). */
final class Exprs {
  private Exprs() {}

  static List<Node> nodes(Object... xs) {
    List<Node> out = new ArrayList<>();
    for (Object x : xs) {
      if (x instanceof Node n) {
        out.add(n);
      } else if (x instanceof List<?> l) {
        for (Object y : l) {
          if (y instanceof Node n) {
            out.add(n);
          } else if (y instanceof Keyword k) {
            out.add(k.value);
          }
        }
      }
    }
    return out;
  }

  static final class Const extends Expr {
    final Object value;

    Const(Object value, int line) {
      super(line);
      this.value = value;
    }

    @Override
    Object eval(Frame f) {
      return value;
    }

    @Override
    List<Node> children() {
      return List.of();
    }
  }

  static final class Name extends Expr {
    final String name;

    Name(String name, int line) {
      super(line);
      this.name = name;
    }

    @Override
    Object eval(Frame f) {
      Object v = f.lookup(name);
      return v == Frame.MISSING ? Undefined.name(name) : v;
    }

    @Override
    List<Node> children() {
      return List.of();
    }
  }

  /** {@code ns.attr} as the target of {@code set}. */
  static final class NsRef extends Expr {
    final String name;
    final String attr;

    NsRef(String name, String attr, int line) {
      super(line);
      this.name = name;
      this.attr = attr;
    }

    @Override
    Object eval(Frame f) {
      throw new IllegalStateException("namespace reference is an assignment target");
    }

    @Override
    List<Node> children() {
      return List.of();
    }
  }

  static final class Getattr extends Expr {
    final Expr node;
    final String attr;
    private final boolean mayBeMethod;

    Getattr(Expr node, String attr, int line) {
      super(line);
      this.node = node;
      this.attr = attr;
      this.mayBeMethod = Methods.anyMethod(attr);
    }

    @Override
    Object eval(Frame f) {
      return PyOps.getattr(node.eval(f), attr, mayBeMethod);
    }

    @Override
    List<Node> children() {
      return List.of(node);
    }
  }

  static final class Slice extends Expr {
    final Expr start;
    final Expr stop;
    final Expr step;

    Slice(Expr start, Expr stop, Expr step, int line) {
      super(line);
      this.start = start;
      this.stop = stop;
      this.step = step;
    }

    @Override
    Object eval(Frame f) {
      throw new IllegalStateException("slice outside a subscript");
    }

    @Override
    List<Node> children() {
      return nodes(start, stop, step);
    }
  }

  static final class Getitem extends Expr {
    final Expr node;
    final Expr arg;
    /**
     * Set when the whole {@code {{ }}} expression is constant: jinja2 then evaluates it at compile
     * time through the sandbox's getitem, which turns a failed subscript into Undefined.
     */
    boolean folded;

    Getitem(Expr node, Expr arg, int line) {
      super(line);
      this.node = node;
      this.arg = arg;
    }

    @Override
    Object eval(Frame f) {
      Object obj = node.eval(f);
      if (arg instanceof Slice s) {
        Object start = s.start == null ? null : s.start.eval(f);
        Object stop = s.stop == null ? null : s.stop.eval(f);
        Object step = s.step == null ? null : s.step.eval(f);
        Object r = PyOps.slice(obj, start, stop, step);
        if (r != null) {
          return r;
        }
        if (folded) {
          return Undefined.elementOf(obj, "slice", true);
        }
        // jinja2 compiles a slice to a plain Python subscript, bypassing the sandbox's getitem.
        throw JinjaError.type(obj instanceof Map<?, ?> ? "unhashable type: 'slice'"
            : "'" + PyTypes.typeName(obj) + "' object is not subscriptable");
      }
      return PyOps.getitem(obj, arg.eval(f), arg instanceof Const);
    }

    @Override
    List<Node> children() {
      return List.of(node, arg);
    }
  }

  record Keyword(String name, Expr value) {}

  /** Evaluated call arguments. */
  record CallArgs(List<Object> args, Map<String, Object> kwargs) {}

  static CallArgs evalArgs(Frame f, List<Expr> args, List<Keyword> kwargs, Expr dynArgs, Expr dynKwargs) {
    List<Object> a = new ArrayList<>(args.size());
    for (Expr e : args) {
      a.add(e.eval(f));
    }
    if (dynArgs != null) {
      PyOps.iterate(dynArgs.eval(f)).forEachRemaining(a::add);
    }
    Map<String, Object> kw = kwargs.isEmpty() && dynKwargs == null ? Map.of() : new LinkedHashMap<>();
    for (Keyword k : kwargs) {
      kw.put(k.name(), k.value().eval(f));
    }
    if (dynKwargs != null) {
      Object m = dynKwargs.eval(f);
      if (!(m instanceof Map<?, ?> map)) {
        throw JinjaError.type("argument after ** must be a mapping, not " + PyTypes.typeName(m));
      }
      for (Map.Entry<?, ?> e : map.entrySet()) {
        if (!PyTypes.isStr(e.getKey())) {
          throw JinjaError.type("keywords must be strings");
        }
        kw.put(PyTypes.str(e.getKey()), e.getValue());
      }
    }
    return new CallArgs(a, kw);
  }

  static final class Call extends Expr {
    final Expr callee;
    final List<Expr> args;
    final List<Keyword> kwargs;
    final Expr dynArgs;
    final Expr dynKwargs;

    Call(Expr callee, List<Expr> args, List<Keyword> kwargs, Expr dynArgs, Expr dynKwargs, int line) {
      super(line);
      this.callee = callee;
      this.args = args;
      this.kwargs = kwargs;
      this.dynArgs = dynArgs;
      this.dynKwargs = dynKwargs;
    }

    @Override
    Object eval(Frame f) {
      Object fn = callee.eval(f);
      CallArgs ca = evalArgs(f, args, kwargs, dynArgs, dynKwargs);
      if (fn == Globals.RAISE_EXCEPTION) {
        if (ca.args().size() + ca.kwargs().size() != 1) {
          throw JinjaError.type("raise_exception() takes 1 positional argument");
        }
        // Only a message made of the template's own string literals is carried; anything built
        // from variables might contain request text.
        boolean literal = args.size() == 1 && literalOnly(args.get(0));
        throw new RaisedTemplateException(literal ? PyRepr.str(ca.args().get(0)) : null, line);
      }
      return invoke(f, fn, ca.args(), ca.kwargs());
    }

    @Override
    List<Node> children() {
      return nodes(callee, args, kwargs, dynArgs, dynKwargs);
    }
  }

  /** Filters jinja2 never folds at compile time (they take the render context). */
  private static final java.util.Set<String> CONTEXT_FILTERS =
      java.util.Set.of("map", "select", "reject", "selectattr", "rejectattr");

  /**
   * Marks the subscripts of an output expression jinja2's code generator evaluates at compile
   * time ({@code Output} children whose {@code as_const} succeeds: built from literals only).
   */
  static void markFolded(Expr e) {
    if (constant(e)) {
      markGetitems(e);
    }
  }

  private static boolean constant(Node n) {
    if (n instanceof Const) {
      return true;
    }
    if (n instanceof FilterExpr fe && (fe.node == null || fe.fn == null || CONTEXT_FILTERS.contains(fe.name))) {
      return false;
    }
    if (n instanceof ListExpr || n instanceof TupleExpr || n instanceof DictExpr || n instanceof Getitem
        || n instanceof Slice || n instanceof Getattr || n instanceof Unary || n instanceof BinOp
        || n instanceof Concat || n instanceof Compare || n instanceof And || n instanceof Or || n instanceof Not
        || n instanceof CondExpr || n instanceof FilterExpr || n instanceof TestExpr) {
      return n.children().stream().allMatch(Exprs::constant);
    }
    return false;
  }

  private static void markGetitems(Node n) {
    if (n instanceof Getitem g) {
      g.folded = true;
    }
    n.children().forEach(Exprs::markGetitems);
  }

  /** True for an expression built only from string constants with {@code ~} or {@code +}. */
  static boolean literalOnly(Expr e) {
    if (e instanceof Const c) {
      return c.value instanceof String;
    }
    if (e instanceof Concat cc) {
      return cc.items.stream().allMatch(Exprs::literalOnly);
    }
    if (e instanceof BinOp b && b.kind == BinOpKind.ADD) {
      return literalOnly(b.left) && literalOnly(b.right);
    }
    return false;
  }

  static Object invoke(Frame f, Object fn, List<Object> args, Map<String, Object> kwargs) {
    if (fn instanceof PyCallable c) {
      return c.call(f, args, kwargs);
    }
    if (fn instanceof LoopContext lc) {
      if (args.size() != 1 || !kwargs.isEmpty()) {
        throw JinjaError.type("loop() takes exactly one argument");
      }
      return lc.recurse(f, args.get(0));
    }
    if (fn instanceof Undefined u) {
      throw u.fail();
    }
    throw JinjaError.type("'" + PyTypes.typeName(fn) + "' object is not callable");
  }

  static final class FilterExpr extends Expr {
    /** Null inside {@code {% filter %}} blocks and block {@code set}: the body is the input. */
    final Expr node;
    final String name;
    final Filters.Fn fn;
    final List<Expr> args;
    final List<Keyword> kwargs;
    final Expr dynArgs;
    final Expr dynKwargs;

    FilterExpr(Expr node, String name, Filters.Fn fn, List<Expr> args, List<Keyword> kwargs, Expr dynArgs,
        Expr dynKwargs, int line) {
      super(line);
      this.node = node;
      this.name = name;
      this.fn = fn;
      this.args = args;
      this.kwargs = kwargs;
      this.dynArgs = dynArgs;
      this.dynKwargs = dynKwargs;
    }

    @Override
    Object eval(Frame f) {
      return apply(f, node.eval(f));
    }

    Object apply(Frame f, Object value) {
      if (fn == null) {
        throw new JinjaError("TemplateRuntimeError", "No filter named '" + name + "' found.");
      }
      CallArgs ca = evalArgs(f, args, kwargs, dynArgs, dynKwargs);
      return fn.apply(f, value, ca.args(), ca.kwargs());
    }

    @Override
    List<Node> children() {
      return nodes(node, args, kwargs, dynArgs, dynKwargs);
    }
  }

  static final class TestExpr extends Expr {
    final Expr node;
    final String name;
    final Tests.Fn fn;
    final List<Expr> args;
    final List<Keyword> kwargs;
    final Expr dynArgs;
    final Expr dynKwargs;

    TestExpr(Expr node, String name, Tests.Fn fn, List<Expr> args, List<Keyword> kwargs, Expr dynArgs,
        Expr dynKwargs, int line) {
      super(line);
      this.node = node;
      this.name = name;
      this.fn = fn;
      this.args = args;
      this.kwargs = kwargs;
      this.dynArgs = dynArgs;
      this.dynKwargs = dynKwargs;
    }

    @Override
    Object eval(Frame f) {
      if (fn == null) {
        throw new JinjaError("TemplateRuntimeError", "No test named '" + name + "' found.");
      }
      Object v = node.eval(f);
      CallArgs ca = evalArgs(f, args, kwargs, dynArgs, dynKwargs);
      return fn.test(f, v, ca.args(), ca.kwargs());
    }

    @Override
    List<Node> children() {
      return nodes(node, args, kwargs, dynArgs, dynKwargs);
    }
  }

  static final class CondExpr extends Expr {
    final Expr test;
    final Expr expr1;
    final Expr expr2;

    CondExpr(Expr test, Expr expr1, Expr expr2, int line) {
      super(line);
      this.test = test;
      this.expr1 = expr1;
      this.expr2 = expr2;
    }

    @Override
    Object eval(Frame f) {
      if (PyOps.truthy(test.eval(f))) {
        return expr1.eval(f);
      }
      if (expr2 == null) {
        return Undefined.hint("the inline if-expression on line " + line
            + " evaluated to false and no else section was defined.");
      }
      return expr2.eval(f);
    }

    @Override
    List<Node> children() {
      return nodes(test, expr1, expr2);
    }
  }

  static final class And extends Expr {
    final Expr left;
    final Expr right;

    And(Expr left, Expr right, int line) {
      super(line);
      this.left = left;
      this.right = right;
    }

    @Override
    Object eval(Frame f) {
      Object l = left.eval(f);
      return PyOps.truthy(l) ? right.eval(f) : l;
    }

    @Override
    List<Node> children() {
      return List.of(left, right);
    }
  }

  static final class Or extends Expr {
    final Expr left;
    final Expr right;

    Or(Expr left, Expr right, int line) {
      super(line);
      this.left = left;
      this.right = right;
    }

    @Override
    Object eval(Frame f) {
      Object l = left.eval(f);
      return PyOps.truthy(l) ? l : right.eval(f);
    }

    @Override
    List<Node> children() {
      return List.of(left, right);
    }
  }

  static final class Not extends Expr {
    final Expr node;

    Not(Expr node, int line) {
      super(line);
      this.node = node;
    }

    @Override
    Object eval(Frame f) {
      return !PyOps.truthy(node.eval(f));
    }

    @Override
    List<Node> children() {
      return List.of(node);
    }
  }

  record Operand(String op, Expr expr) {}

  static final class Compare extends Expr {
    final Expr expr;
    final List<Operand> ops;

    Compare(Expr expr, List<Operand> ops, int line) {
      super(line);
      this.expr = expr;
      this.ops = ops;
    }

    @Override
    Object eval(Frame f) {
      Object left = expr.eval(f);
      for (Operand o : ops) {
        Object right = o.expr().eval(f);
        if (!compare(o.op(), left, right)) {
          return false;
        }
        left = right;
      }
      return true;
    }

    static boolean compare(String op, Object l, Object r) {
      return switch (op) {
        case "eq" -> PyOps.eq(l, r);
        case "ne" -> !PyOps.eq(l, r);
        case "in" -> PyOps.contains(r, l);
        case "notin" -> !PyOps.contains(r, l);
        default -> PyOps.compare(op, l, r);
      };
    }

    @Override
    List<Node> children() {
      List<Node> out = new ArrayList<>();
      out.add(expr);
      for (Operand o : ops) {
        out.add(o.expr());
      }
      return out;
    }
  }

  enum BinOpKind { ADD, SUB, MUL, DIV, FLOORDIV, MOD, POW }

  static final class BinOp extends Expr {
    final BinOpKind kind;
    final Expr left;
    final Expr right;

    /** The flattened {@code +} chain, built once with the (immutable) tree. */
    private final Expr[] chain;

    BinOp(BinOpKind kind, Expr left, Expr right, int line) {
      super(line);
      this.kind = kind;
      this.left = left;
      this.right = right;
      this.chain = kind == BinOpKind.ADD ? flattenAdd(this) : null;
    }

    @Override
    Object eval(Frame f) {
      if (kind == BinOpKind.ADD && left instanceof BinOp lb && lb.kind == BinOpKind.ADD) {
        return evalAddChain(f);
      }
      Object l = left.eval(f);
      Object r = right.eval(f);
      return switch (kind) {
        case ADD -> PyOps.add(l, r);
        case SUB -> PyOps.sub(l, r);
        case MUL -> PyOps.mul(l, r);
        case DIV -> PyOps.div(l, r);
        case FLOORDIV -> PyOps.floorDiv(l, r);
        case MOD -> PyOps.mod(l, r);
        case POW -> PyOps.pow(l, r);
      };
    }

    private Object evalAddChain(Frame f) {
      return evalAddChainImpl(this, f);
    }

    /** Operands of the {@code +} chain rooted here, leftmost first (null unless ADD). */
    Expr[] chainOperands() {
      return chain;
    }

    private static Expr[] flattenAdd(BinOp top) {
      java.util.ArrayDeque<Expr> operands = new java.util.ArrayDeque<>();
      Expr e = top;
      while (e instanceof BinOp b && b.kind == BinOpKind.ADD) {
        operands.push(b.right);
        e = b.left;
      }
      operands.push(e);
      return operands.toArray(new Expr[0]);
    }

    @Override
    List<Node> children() {
      return List.of(left, right);
    }
  }

  /**
   * {@code a + b + c + ...} evaluated left to right like Python, but while every operand so far is
   * a plain str the pieces go into one builder instead of one new string per {@code +}. The first
   * other operand switches back to pairwise Python addition, so results and errors are unchanged.
   */
  private static Object evalAddChainImpl(BinOp top, Frame f) {
    return addChain(top, f, null);
  }

  /**
   * {@code {{ a + b + c }}} straight into the template output: when every operand is a plain str, the
   * pieces are appended to {@code out} in order and no joined string is built (a chat template's
   * {@code '<|start|>' + message['content'] + '<|end|>'} would otherwise copy each message once more).
   * Operands are evaluated exactly as {@link #evalAddChainImpl} does, so output and errors are unchanged.
   *
   * @return true when the chain was written to {@code out}; false when {@code top} is not an add chain
   */
  static boolean appendAddChain(Expr top, Frame f, StringBuilder out) {
    if (!(top instanceof BinOp b && b.kind == BinOpKind.ADD && b.left instanceof BinOp lb
        && lb.kind == BinOpKind.ADD)) {
      return false;
    }
    Object rest = addChain(b, f, out);
    if (rest != null) {
      PyRepr.appendStr(out, rest);
    }
    return true;
  }

  /**
   * Evaluates an add chain left to right like Python. While every operand so far is a plain str the pieces are
   * collected and joined once into an array of the exact size, or, when {@code out} is given and the whole chain is str,
   * appended to {@code out} (returning null). The first other operand switches back to pairwise Python
   * addition, so results and errors are unchanged.
   */
  private static Object addChain(BinOp top, Frame f, StringBuilder out) {
    Expr[] operands = top.chainOperands();
    // Collect the leading run of plain strings, then build once with the exact size.
    String[] run = new String[operands.length];
    int n = 0;
    long total = 0;
    Object stopper = null;
    boolean stopped = false;
    int next = 0;
    while (next < operands.length) {
      Object v = operands[next++].eval(f);
      if (v instanceof String s) {
        run[n++] = s;
        total += s.length();
      } else {
        stopper = v;
        stopped = true;
        break;
      }
    }
    Object result;
    if (n == 0) {
      result = stopper;
    } else {
      PyOps.checkSize(total);
      if (out != null && !stopped) {
        for (int i = 0; i < n; i++) {
          out.append(run[i]);
        }
        return null;
      }
      // String.join sizes and fills the result's array once; a StringBuilder would copy it again in toString().
      result = String.join("", n == run.length ? run : java.util.Arrays.copyOf(run, n));
      if (stopped) {
        result = PyOps.add(result, stopper);
      }
    }
    while (next < operands.length) {
      result = PyOps.add(result, operands[next++].eval(f));
    }
    return result;
  }

  static final class Unary extends Expr {
    final boolean negate;
    final Expr node;

    Unary(boolean negate, Expr node, int line) {
      super(line);
      this.negate = negate;
      this.node = node;
    }

    @Override
    Object eval(Frame f) {
      Object v = node.eval(f);
      return negate ? PyOps.neg(v) : PyOps.pos(v);
    }

    @Override
    List<Node> children() {
      return List.of(node);
    }
  }

  static final class Concat extends Expr {
    final List<Expr> items;

    Concat(List<Expr> items, int line) {
      super(line);
      this.items = items;
    }

    @Override
    Object eval(Frame f) {
      StringBuilder sb = new StringBuilder();
      for (Expr e : items) {
        PyRepr.appendStr(sb, e.eval(f));
      }
      PyOps.checkSize(sb.length());
      return sb.toString();
    }

    @Override
    List<Node> children() {
      return new ArrayList<>(items);
    }
  }

  static final class ListExpr extends Expr {
    final List<Expr> items;

    ListExpr(List<Expr> items, int line) {
      super(line);
      this.items = items;
    }

    @Override
    Object eval(Frame f) {
      List<Object> out = new ArrayList<>(items.size());
      for (Expr e : items) {
        out.add(e.eval(f));
      }
      return out;
    }

    @Override
    List<Node> children() {
      return new ArrayList<>(items);
    }
  }

  static final class TupleExpr extends Expr {
    final List<Expr> items;

    TupleExpr(List<Expr> items, int line) {
      super(line);
      this.items = items;
    }

    @Override
    Object eval(Frame f) {
      List<Object> out = new ArrayList<>(items.size());
      for (Expr e : items) {
        out.add(e.eval(f));
      }
      return new PyTuple(out);
    }

    @Override
    List<Node> children() {
      return new ArrayList<>(items);
    }
  }

  static final class DictExpr extends Expr {
    final List<Expr> keys;
    final List<Expr> values;

    DictExpr(List<Expr> keys, List<Expr> values, int line) {
      super(line);
      this.keys = keys;
      this.values = values;
    }

    @Override
    Object eval(Frame f) {
      Map<Object, Object> out = new LinkedHashMap<>();
      for (int i = 0; i < keys.size(); i++) {
        Object k = keys.get(i).eval(f);
        PyOps.checkHashable(k);
        Object v = values.get(i).eval(f);
        Object existing = null;
        for (Object ek : out.keySet()) {
          if (PyOps.eq(ek, k) && !Objects.equals(ek, k)) {
            existing = ek;
            break;
          }
        }
        out.put(existing != null ? existing : k, v);
      }
      return out;
    }

    @Override
    List<Node> children() {
      List<Node> out = new ArrayList<>();
      for (int i = 0; i < keys.size(); i++) {
        out.add(keys.get(i));
        out.add(values.get(i));
      }
      return out;
    }
  }

  /** Binds an assignment target ({@code x}, {@code a, b}, {@code ns.attr}) in a frame. */
  static void assign(Frame f, Expr target, Object value) {
    if (target instanceof Name n) {
      f.set(n.name, value);
    } else if (target instanceof TupleExpr t) {
      Iterator<Object> it = PyOps.iterate(value);
      List<Object> vals = new ArrayList<>();
      while (it.hasNext()) {
        vals.add(it.next());
        if (vals.size() > t.items.size()) {
          throw JinjaError.value("too many values to unpack (expected " + t.items.size() + ")");
        }
      }
      if (vals.size() < t.items.size()) {
        throw JinjaError.value("not enough values to unpack (expected " + t.items.size() + ", got " + vals.size() + ")");
      }
      for (int i = 0; i < vals.size(); i++) {
        assign(f, t.items.get(i), vals.get(i));
      }
    } else if (target instanceof NsRef r) {
      Object ns = f.lookup(r.name);
      if (!(ns instanceof Namespace namespace)) {
        throw new JinjaError("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
      }
      namespace.set(r.attr, value);
    } else {
      throw new IllegalStateException("bad assignment target");
    }
  }
}
