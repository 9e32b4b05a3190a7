package dev.kvrouter.extproc.template.jinja;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;

/**
 * Python operator semantics on interpreter values: truthiness, equality, ordering, arithmetic
 * (with int overflow into big integers, floor division and modulo signs as in Python), {@code in},
 * {@code len}, iteration, and the sandbox's attribute and item lookup.
 */
public final class PyOps {
  private PyOps() {}

  /** Strings and lists a single operation may build; larger results fail instead of exhausting memory. */
  static final long MAX_SEQUENCE = 1L << 26;

  // ---- input -----------------------------------------------------------------------------------

  /**
   * Copies a Java value (as Jackson produces it) into the interpreter's canonical forms: maps
   * become insertion-ordered dicts, numbers become Long/BigInteger/Double.
   */
  public static Object canonicalize(Object o) {
    if (o == null || o instanceof String || o instanceof Boolean || o instanceof Long || o instanceof Double) {
      return o;
    }
    if (o instanceof Integer || o instanceof Short || o instanceof Byte) {
      return ((Number) o).longValue();
    }
    if (o instanceof BigInteger b) {
      return normalize(b);
    }
    if (o instanceof Float || o instanceof BigDecimal) {
      return ((Number) o).doubleValue();
    }
    if (o instanceof Map<?, ?> m) {
      Map<Object, Object> out = new LinkedHashMap<>(Math.max(4, m.size() * 2));
      for (Map.Entry<?, ?> e : m.entrySet()) {
        out.put(canonicalize(e.getKey()), canonicalize(e.getValue()));
      }
      return out;
    }
    if (o instanceof List<?> l) {
      List<Object> out = new ArrayList<>(l.size());
      for (Object x : l) {
        out.add(canonicalize(x));
      }
      return out;
    }
    if (o instanceof Object[] arr) {
      return canonicalize(java.util.Arrays.asList(arr));
    }
    if (o instanceof CharSequence cs) {
      return cs.toString();
    }
    if (o instanceof Markup || o instanceof PyTuple || o instanceof Undefined || o instanceof Namespace
        || o instanceof PyCallable) {
      return o;
    }
    throw new IllegalArgumentException("unsupported template input type " + o.getClass().getName());
  }

  static Object normalize(BigInteger b) {
    return b.bitLength() < 64 ? (Object) b.longValue() : b;
  }

  /** Python's {@code s.strip()} (Python's whitespace set, not Java's). */
  public static String strip(String s) {
    return PyStr.strip(s, null, true, true);
  }

  /** Python's {@code s.rstrip()}. */
  public static String rstrip(String s) {
    return PyStr.strip(s, null, false, true);
  }

  // ---- truthiness and equality -----------------------------------------------------------------

  public static boolean truthy(Object o) {
    if (o == null) {
      return false;
    }
    if (o instanceof Boolean b) {
      return b;
    }
    if (o instanceof String s) {
      return !s.isEmpty();
    }
    if (o instanceof Long l) {
      return l != 0;
    }
    if (o instanceof Double d) {
      return d != 0;
    }
    if (o instanceof List<?> l) {
      return !l.isEmpty();
    }
    if (o instanceof Map<?, ?> m) {
      return !m.isEmpty();
    }
    if (o instanceof Undefined) {
      return false;
    }
    if (o instanceof Markup m) {
      return !m.text.isEmpty();
    }
    if (o instanceof PyTuple t) {
      return t.size() > 0;
    }
    if (o instanceof BigInteger b) {
      return b.signum() != 0;
    }
    if (o instanceof DictView v) {
      return !v.map().isEmpty();
    }
    if (o instanceof PyRange r) {
      return r.length() > 0;
    }
    return true;
  }

  public static boolean eq(Object a, Object b) {
    if (a == b) {
      return true;
    }
    if (a == null || b == null) {
      return false;
    }
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      return numCompare(a, b) == 0;
    }
    if (PyTypes.isStr(a) && PyTypes.isStr(b)) {
      return PyTypes.str(a).equals(PyTypes.str(b));
    }
    if (a instanceof List<?> la && b instanceof List<?> lb) {
      return seqEq(la, lb);
    }
    if (a instanceof PyTuple ta && b instanceof PyTuple tb) {
      return seqEq(ta.items(), tb.items());
    }
    if (a instanceof Map<?, ?> ma && b instanceof Map<?, ?> mb) {
      if (ma.size() != mb.size()) {
        return false;
      }
      for (Map.Entry<?, ?> e : ma.entrySet()) {
        Object k = e.getKey();
        if (!containsKey(mb, k) || !eq(e.getValue(), dictGet(mb, k))) {
          return false;
        }
      }
      return true;
    }
    if (a instanceof Undefined && b instanceof Undefined) {
      return true;
    }
    if (a instanceof PyRange ra && b instanceof PyRange rb) {
      return ra.length() == rb.length() && (ra.length() == 0
          || (ra.start() == rb.start() && (ra.length() == 1 || ra.step() == rb.step())));
    }
    if (a instanceof DictView va && b instanceof DictView vb && va.kind() == vb.kind()
        && va.kind() != DictView.Kind.VALUES) {
      return eq(toList(va), toList(vb)) || setEq(va, vb);
    }
    return false;
  }

  private static boolean setEq(DictView a, DictView b) {
    List<Object> la = toList(a);
    List<Object> lb = toList(b);
    if (la.size() != lb.size()) {
      return false;
    }
    for (Object x : la) {
      if (!containsSeq(lb, x)) {
        return false;
      }
    }
    return true;
  }

  private static boolean seqEq(List<?> a, List<?> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      if (!eq(a.get(i), b.get(i))) {
        return false;
      }
    }
    return true;
  }

  // ---- dict access with Python key equality ----------------------------------------------------

  static boolean containsKey(Map<?, ?> m, Object key) {
    if (m.containsKey(key)) {
      return true;
    }
    if (PyTypes.isNumber(key) || key instanceof Markup) {
      for (Object k : m.keySet()) {
        if (eq(k, key)) {
          return true;
        }
      }
    }
    return false;
  }

  static Object dictGet(Map<?, ?> m, Object key) {
    Object v = m.get(key);
    if (v != null || m.containsKey(key)) {
      return v;
    }
    if (PyTypes.isNumber(key) || key instanceof Markup) {
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (eq(e.getKey(), key)) {
          return e.getValue();
        }
      }
    }
    return null;
  }

  static void checkHashable(Object key) {
    if (key instanceof List || key instanceof Map || key instanceof Namespace || key instanceof DictView) {
      throw JinjaError.type("unhashable type: '" + PyTypes.typeName(key) + "'");
    }
    if (key instanceof PyTuple t) {
      for (Object x : t.items()) {
        checkHashable(x);
      }
    }
  }

  // ---- numbers ---------------------------------------------------------------------------------

  private static boolean isBig(Object o) {
    return o instanceof BigInteger;
  }

  static BigInteger big(Object o) {
    if (o instanceof BigInteger b) {
      return b;
    }
    if (o instanceof Boolean b) {
      return b ? BigInteger.ONE : BigInteger.ZERO;
    }
    return BigInteger.valueOf((Long) o);
  }

  static long lng(Object o) {
    if (o instanceof Boolean b) {
      return b ? 1 : 0;
    }
    return (Long) o;
  }

  static double dbl(Object o) {
    if (o instanceof Double d) {
      return d;
    }
    if (o instanceof BigInteger b) {
      double d = b.doubleValue();
      if (Double.isInfinite(d)) {
        throw new JinjaError("OverflowError", "int too large to convert to float");
      }
      return d;
    }
    return lng(o);
  }

  static int numCompare(Object a, Object b) {
    if (a instanceof Double || b instanceof Double) {
      // Python compares int and float exactly: a long beyond 2**53 is not rounded to a double.
      if (isBig(a) || isBig(b) || beyondDoublePrecision(a) || beyondDoublePrecision(b)) {
        double d = a instanceof Double da ? da : (Double) b;
        if (Double.isNaN(d)) {
          return 1;
        }
        BigDecimal x = a instanceof Double ? bigDecimal(dbl(a)) : new BigDecimal(big(a));
        BigDecimal y = b instanceof Double ? bigDecimal(dbl(b)) : new BigDecimal(big(b));
        return x.compareTo(y);
      }
      double x = dbl(a);
      double y = dbl(b);
      return x < y ? -1 : (x > y ? 1 : (x == y ? 0 : 1));
    }
    if (isBig(a) || isBig(b)) {
      return big(a).compareTo(big(b));
    }
    return Long.compare(lng(a), lng(b));
  }

  private static boolean beyondDoublePrecision(Object o) {
    return o instanceof Long l && (l > (1L << 53) || l < -(1L << 53));
  }

  private static BigDecimal bigDecimal(double d) {
    if (Double.isInfinite(d)) {
      // Larger in magnitude than any integer we could hold.
      return new BigDecimal(BigInteger.ONE.shiftLeft(1 << 20).multiply(BigInteger.valueOf(d > 0 ? 1 : -1)));
    }
    return new BigDecimal(d);
  }

  /** Python int index: int or bool; anything else is a TypeError. */
  static long toIndex(Object o) {
    if (o instanceof Long l) {
      return l;
    }
    if (o instanceof Boolean b) {
      return b ? 1 : 0;
    }
    if (o instanceof BigInteger b) {
      return b.signum() < 0 ? Long.MIN_VALUE / 2 : Long.MAX_VALUE / 2;
    }
    if (o instanceof Undefined u) {
      throw u.fail();
    }
    throw JinjaError.type("'" + PyTypes.typeName(o) + "' object cannot be interpreted as an integer");
  }

  // ---- ordering --------------------------------------------------------------------------------

  /** Python {@code a < b} family; op is one of lt, lteq, gt, gteq. */
  static boolean compare(String op, Object a, Object b) {
    int c = orderCompare(a, b, op);
    return switch (op) {
      case "lt" -> c < 0;
      case "lteq" -> c <= 0;
      case "gt" -> c > 0;
      default -> c >= 0;
    };
  }

  private static String symbol(String op) {
    return switch (op) {
      case "lt" -> "<";
      case "lteq" -> "<=";
      case "gt" -> ">";
      default -> ">=";
    };
  }

  static int orderCompare(Object a, Object b, String op) {
    if (a instanceof Undefined u) {
      throw u.fail();
    }
    if (b instanceof Undefined u) {
      throw u.fail();
    }
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      if ((a instanceof Double da && Double.isNaN(da)) || (b instanceof Double db && Double.isNaN(db))) {
        return op.startsWith("lt") ? 1 : -1; // every comparison with NaN is false
      }
      return numCompare(a, b);
    }
    if (PyTypes.isStr(a) && PyTypes.isStr(b)) {
      return PyStr.compare(PyTypes.str(a), PyTypes.str(b));
    }
    if (a instanceof List<?> la && b instanceof List<?> lb) {
      return seqCompare(la, lb, op);
    }
    if (a instanceof PyTuple ta && b instanceof PyTuple tb) {
      return seqCompare(ta.items(), tb.items(), op);
    }
    throw JinjaError.type("'" + symbol(op) + "' not supported between instances of '" + PyTypes.typeName(a)
        + "' and '" + PyTypes.typeName(b) + "'");
  }

  private static int seqCompare(List<?> a, List<?> b, String op) {
    int n = Math.min(a.size(), b.size());
    for (int i = 0; i < n; i++) {
      if (!eq(a.get(i), b.get(i))) {
        return orderCompare(a.get(i), b.get(i), op);
      }
    }
    return Integer.compare(a.size(), b.size());
  }

  /** Three-way comparison for sorting (Python's {@code <}); fails for mixed types like Python. */
  static int compare3(Object a, Object b) {
    if (eq(a, b)) {
      return 0;
    }
    return orderCompare(a, b, "lt") < 0 ? -1 : 1;
  }

  // ---- arithmetic ------------------------------------------------------------------------------

  private static JinjaError unsupported(String sym, Object a, Object b) {
    return JinjaError.type("unsupported operand type(s) for " + sym + ": '" + PyTypes.typeName(a) + "' and '"
        + PyTypes.typeName(b) + "'");
  }

  private static void undefinedOperands(Object a, Object b) {
    if (a instanceof Undefined u) {
      throw u.fail();
    }
    if (b instanceof Undefined u) {
      throw u.fail();
    }
  }

  static Object add(Object a, Object b) {
    undefinedOperands(a, b);
    if (a instanceof String sa && b instanceof String sb) {
      checkSize((long) sa.length() + sb.length());
      return sa.concat(sb);
    }
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      if (a instanceof Double || b instanceof Double) {
        return dbl(a) + dbl(b);
      }
      if (!isBig(a) && !isBig(b)) {
        long x = lng(a);
        long y = lng(b);
        long r = x + y;
        if (((x ^ r) & (y ^ r)) < 0) {
          return big(a).add(big(b));
        }
        return r;
      }
      return normalize(big(a).add(big(b)));
    }
    if (PyTypes.isStr(a) && PyTypes.isStr(b)) {
      // markupsafe: Markup + str escapes the plain side; str + Markup likewise.
      String x = a instanceof Markup ma ? ma.text : Markup.escape((String) a);
      String y = b instanceof Markup mb ? mb.text : Markup.escape((String) b);
      return new Markup(x + y);
    }
    if (a instanceof List<?> la && b instanceof List<?> lb) {
      checkSize((long) la.size() + lb.size());
      List<Object> out = new ArrayList<>(la.size() + lb.size());
      out.addAll(la);
      out.addAll(lb);
      return out;
    }
    if (a instanceof PyTuple ta && b instanceof PyTuple tb) {
      List<Object> out = new ArrayList<>(ta.items());
      out.addAll(tb.items());
      return new PyTuple(out);
    }
    if (PyTypes.isStr(a)) {
      throw JinjaError.type("can only concatenate str (not \"" + PyTypes.typeName(b) + "\") to str");
    }
    if (a instanceof List) {
      throw JinjaError.type("can only concatenate list (not \"" + PyTypes.typeName(b) + "\") to list");
    }
    if (a instanceof PyTuple) {
      throw JinjaError.type("can only concatenate tuple (not \"" + PyTypes.typeName(b) + "\") to tuple");
    }
    throw unsupported("+", a, b);
  }

  static Object sub(Object a, Object b) {
    undefinedOperands(a, b);
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      if (a instanceof Double || b instanceof Double) {
        return dbl(a) - dbl(b);
      }
      if (!isBig(a) && !isBig(b)) {
        long x = lng(a);
        long y = lng(b);
        long r = x - y;
        if (((x ^ y) & (x ^ r)) < 0) {
          return big(a).subtract(big(b));
        }
        return r;
      }
      return normalize(big(a).subtract(big(b)));
    }
    throw unsupported("-", a, b);
  }

  static Object mul(Object a, Object b) {
    undefinedOperands(a, b);
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      if (a instanceof Double || b instanceof Double) {
        return dbl(a) * dbl(b);
      }
      return normalize(big(a).multiply(big(b)));
    }
    if (PyTypes.isInt(a) && !PyTypes.isNumber(b)) {
      return mul(b, a);
    }
    if (PyTypes.isInt(b)) {
      long n = Math.max(0, toIndex(b));
      if (PyTypes.isStr(a)) {
        String s = PyTypes.str(a);
        checkSize(n * s.length());
        String r = s.repeat((int) n);
        return a instanceof Markup ? new Markup(r) : r;
      }
      if (a instanceof List<?> l) {
        checkSize(n * l.size());
        List<Object> out = new ArrayList<>((int) (n * l.size()));
        for (long i = 0; i < n; i++) {
          out.addAll(l);
        }
        return out;
      }
      if (a instanceof PyTuple t) {
        checkSize(n * t.size());
        List<Object> out = new ArrayList<>();
        for (long i = 0; i < n; i++) {
          out.addAll(t.items());
        }
        return new PyTuple(out);
      }
    }
    if ((PyTypes.isStr(a) || a instanceof List || a instanceof PyTuple) && !PyTypes.isInt(b)) {
      throw JinjaError.type("can't multiply sequence by non-int of type '" + PyTypes.typeName(b) + "'");
    }
    throw unsupported("*", a, b);
  }

  static Object div(Object a, Object b) {
    undefinedOperands(a, b);
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      double y = dbl(b);
      if (y == 0) {
        throw new JinjaError("ZeroDivisionError", "division by zero");
      }
      if (!(a instanceof Double) && !(b instanceof Double)) {
        BigInteger x = big(a);
        BigInteger z = big(b);
        if (x.bitLength() <= 53 && z.bitLength() <= 53) {
          return x.doubleValue() / z.doubleValue();
        }
        return new BigDecimal(x).divide(new BigDecimal(z), java.math.MathContext.DECIMAL128).doubleValue();
      }
      return dbl(a) / y;
    }
    throw unsupported("/", a, b);
  }

  static Object floorDiv(Object a, Object b) {
    undefinedOperands(a, b);
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      if (a instanceof Double || b instanceof Double) {
        double x = dbl(a);
        double y = dbl(b);
        if (y == 0) {
          throw new JinjaError("ZeroDivisionError", "float floor division by zero");
        }
        return floatDivmod(x, y)[0];
      }
      if (big(b).signum() == 0) {
        throw new JinjaError("ZeroDivisionError", "integer division or modulo by zero");
      }
      if (!isBig(a) && !isBig(b) && !(lng(a) == Long.MIN_VALUE && lng(b) == -1)) {
        return Math.floorDiv(lng(a), lng(b));
      }
      BigInteger[] qr = big(a).divideAndRemainder(big(b));
      BigInteger q = qr[0];
      if (qr[1].signum() != 0 && qr[1].signum() != big(b).signum()) {
        q = q.subtract(BigInteger.ONE);
      }
      return normalize(q);
    }
    throw unsupported("//", a, b);
  }

  static Object mod(Object a, Object b) {
    if (PyTypes.isStr(a)) {
      // str.__mod__ runs first: an Undefined argument is only touched by the conversions that need it
      return PyFormat.percent(a, b);
    }
    undefinedOperands(a, b);
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      if (a instanceof Double || b instanceof Double) {
        double x = dbl(a);
        double y = dbl(b);
        if (y == 0) {
          throw new JinjaError("ZeroDivisionError", "float modulo");
        }
        return floatDivmod(x, y)[1];
      }
      if (big(b).signum() == 0) {
        throw new JinjaError("ZeroDivisionError", "integer division or modulo by zero");
      }
      if (!isBig(a) && !isBig(b)) {
        return Math.floorMod(lng(a), lng(b));
      }
      BigInteger r = big(a).mod(big(b).abs());
      if (big(b).signum() < 0 && r.signum() != 0) {
        r = r.add(big(b));
      }
      return normalize(r);
    }
    throw unsupported("%", a, b);
  }

  /** CPython's float_divmod. */
  private static double[] floatDivmod(double vx, double wx) {
    double mod = vx % wx;
    double div = (vx - mod) / wx;
    if (mod != 0) {
      if ((wx < 0) != (mod < 0)) {
        mod += wx;
        div -= 1.0;
      }
    } else {
      mod = Math.copySign(0.0, wx);
    }
    double floordiv;
    if (div != 0) {
      floordiv = Math.floor(div);
      if (div - floordiv > 0.5) {
        floordiv += 1.0;
      }
    } else {
      floordiv = Math.copySign(0.0, vx / wx);
    }
    return new double[] {floordiv, mod};
  }

  static Object pow(Object a, Object b) {
    undefinedOperands(a, b);
    if (PyTypes.isNumber(a) && PyTypes.isNumber(b)) {
      if (a instanceof Double || b instanceof Double || big(b).signum() < 0) {
        double x = dbl(a);
        double y = dbl(b);
        if (x == 0 && y < 0) {
          throw new JinjaError("ZeroDivisionError", "0.0 cannot be raised to a negative power");
        }
        return Math.pow(x, y);
      }
      BigInteger base = big(a);
      long e = toIndex(b);
      if (base.bitLength() * (double) e > MAX_SEQUENCE) {
        throw new JinjaError("OverflowError", "integer power result too large");
      }
      return normalize(base.pow((int) e));
    }
    throw unsupported("** or pow()", a, b);
  }

  static Object neg(Object a) {
    if (a instanceof Undefined u) {
      throw u.fail();
    }
    if (a instanceof Double d) {
      return -d;
    }
    if (PyTypes.isInt(a)) {
      return normalize(big(a).negate());
    }
    throw JinjaError.type("bad operand type for unary -: '" + PyTypes.typeName(a) + "'");
  }

  static Object pos(Object a) {
    if (a instanceof Undefined u) {
      throw u.fail();
    }
    if (a instanceof Boolean b) {
      return b ? 1L : 0L;
    }
    if (PyTypes.isNumber(a)) {
      return a;
    }
    throw JinjaError.type("bad operand type for unary +: '" + PyTypes.typeName(a) + "'");
  }

  static void checkSize(long n) {
    if (n > MAX_SEQUENCE) {
      throw new JinjaError("MemoryError", "result too large for the template sandbox");
    }
  }

  // ---- containers ------------------------------------------------------------------------------

  /** Python {@code item in container}. */
  static boolean contains(Object container, Object item) {
    if (PyTypes.isStr(container)) {
      if (!PyTypes.isStr(item)) {
        if (item instanceof Undefined u) {
          throw u.fail();
        }
        throw JinjaError.type("'in <string>' requires string as left operand, not " + PyTypes.typeName(item));
      }
      return PyTypes.str(container).contains(PyTypes.str(item));
    }
    if (container instanceof List<?> l) {
      return containsSeq(l, item);
    }
    if (container instanceof Map<?, ?> m) {
      checkHashable(item);
      return containsKey(m, item);
    }
    if (container instanceof PyTuple t) {
      return containsSeq(t.items(), item);
    }
    if (container instanceof DictView v && v.kind() == DictView.Kind.KEYS) {
      checkHashable(item);
      return containsKey(v.map(), item);
    }
    if (container instanceof PyRange r) {
      if (!PyTypes.isInt(item)) {
        return containsSeq(toList(r), item);
      }
      long x = lng(item instanceof BigInteger ? Long.MAX_VALUE : item);
      long i = Math.floorDiv(x - r.start(), r.step());
      return i >= 0 && i < r.length() && r.get(i) == x;
    }
    Iterator<Object> it = iterate(container);
    while (it.hasNext()) {
      if (eq(it.next(), item)) {
        return true;
      }
    }
    return false;
  }

  static boolean containsSeq(List<?> l, Object item) {
    for (Object x : l) {
      if (x == item || eq(x, item)) {
        return true;
      }
    }
    return false;
  }

  /** Python {@code len(o)}. */
  static long len(Object o) {
    if (o instanceof String s) {
      return PyStr.len(s);
    }
    if (o instanceof List<?> l) {
      return l.size();
    }
    if (o instanceof Map<?, ?> m) {
      return m.size();
    }
    if (o instanceof Markup m) {
      return PyStr.len(m.text);
    }
    if (o instanceof PyTuple t) {
      return t.size();
    }
    if (o instanceof Undefined) {
      return 0;
    }
    if (o instanceof DictView v) {
      return v.map().size();
    }
    if (o instanceof PyRange r) {
      return r.length();
    }
    if (o instanceof LoopContext lc) {
      return lc.length();
    }
    throw JinjaError.type("object of type '" + PyTypes.typeName(o) + "' has no len()");
  }

  static boolean hasLen(Object o) {
    return PyTypes.isStr(o) || o instanceof List || o instanceof Map || o instanceof PyTuple
        || o instanceof Undefined || o instanceof DictView || o instanceof PyRange || o instanceof LoopContext;
  }

  /** Python {@code iter(o)}. */
  @SuppressWarnings("unchecked")
  static Iterator<Object> iterate(Object o) {
    if (o instanceof List<?> l) {
      return (Iterator<Object>) l.iterator();
    }
    if (o instanceof Map<?, ?> m) {
      return new ArrayList<Object>(m.keySet()).iterator();
    }
    if (o instanceof String s) {
      return PyStr.chars(s).iterator();
    }
    if (o instanceof Markup m) {
      return PyStr.chars(m.text).iterator();
    }
    if (o instanceof PyTuple t) {
      return t.items().iterator();
    }
    if (o instanceof Undefined) {
      return Collections.emptyIterator();
    }
    if (o instanceof PyIterator it) {
      return it;
    }
    if (o instanceof DictView v) {
      Map<Object, Object> m = v.map();
      List<Object> out = new ArrayList<>(m.size());
      for (Map.Entry<Object, Object> e : m.entrySet()) {
        out.add(switch (v.kind()) {
          case KEYS -> e.getKey();
          case VALUES -> e.getValue();
          case ITEMS -> PyTuple.of(e.getKey(), e.getValue());
        });
      }
      return out.iterator();
    }
    if (o instanceof PyRange r) {
      return new Iterator<>() {
        long i = 0;

        @Override
        public boolean hasNext() {
          return i < r.length();
        }

        @Override
        public Object next() {
          if (!hasNext()) {
            throw new NoSuchElementException();
          }
          return r.get(i++);
        }
      };
    }
    throw JinjaError.type("'" + PyTypes.typeName(o) + "' object is not iterable");
  }

  static boolean isIterable(Object o) {
    return PyTypes.isStr(o) || o instanceof List || o instanceof Map || o instanceof PyTuple || o instanceof Undefined
        || o instanceof PyIterator || o instanceof DictView || o instanceof PyRange || o instanceof LoopContext;
  }

  static List<Object> toList(Object o) {
    List<Object> out = new ArrayList<>();
    iterate(o).forEachRemaining(out::add);
    return out;
  }

  // ---- slicing ---------------------------------------------------------------------------------

  /** CPython's PySlice_Unpack + AdjustIndices: {start, stop, step, length}. */
  static long[] sliceIndices(Object start, Object stop, Object step, long length) {
    long st = step == null ? 1 : toIndex(step);
    if (st == 0) {
      throw JinjaError.value("slice step cannot be zero");
    }
    long s = start == null ? (st < 0 ? Long.MAX_VALUE : 0) : toIndex(start);
    long e = stop == null ? (st < 0 ? Long.MIN_VALUE : Long.MAX_VALUE) : toIndex(stop);
    if (s < 0) {
      s += length;
      if (s < 0) {
        s = st < 0 ? -1 : 0;
      }
    } else if (s >= length) {
      s = st < 0 ? length - 1 : length;
    }
    if (e < 0) {
      e = e == Long.MIN_VALUE ? -1 : e + length;
      if (e < 0) {
        e = st < 0 ? -1 : 0;
      }
    } else if (e >= length) {
      e = st < 0 ? length - 1 : length;
    }
    long n;
    if (st < 0) {
      n = e < s ? (s - e - 1) / (-st) + 1 : 0;
    } else {
      n = s < e ? (e - s - 1) / st + 1 : 0;
    }
    return new long[] {s, e, st, n};
  }

  static Object slice(Object obj, Object start, Object stop, Object step) {
    if (obj instanceof Undefined u) {
      throw u.fail();
    }
    if (PyTypes.isStr(obj)) {
      String s = PyTypes.str(obj);
      String r = PyStr.slice(s, sliceIndices(start, stop, step, PyStr.len(s)));
      return obj instanceof Markup ? new Markup(r) : r;
    }
    if (obj instanceof List<?> l) {
      return sliceList(l, sliceIndices(start, stop, step, l.size()));
    }
    if (obj instanceof PyTuple t) {
      return new PyTuple(sliceList(t.items(), sliceIndices(start, stop, step, t.size())));
    }
    if (obj instanceof PyRange r) {
      long[] sl = sliceIndices(start, stop, step, r.length());
      // CPython's compute_slice: the adjusted slice indices mapped through the range.
      return new PyRange(r.get(sl[0]), r.get(sl[1]), r.step() * sl[2]);
    }
    return null;
  }

  private static List<Object> sliceList(List<?> l, long[] sl) {
    List<Object> out = new ArrayList<>((int) sl[3]);
    for (long i = 0, k = sl[0]; i < sl[3]; i++, k += sl[2]) {
      out.add(l.get((int) k));
    }
    return out;
  }

  // ---- sandboxed attribute and item access -----------------------------------------------------

  /** {@code obj.attr} as the sandbox resolves it: Python attribute first, then {@code obj[attr]}. */
  static Object getattr(Object obj, String attr) {
    return getattr(obj, attr, true);
  }

  /** @param mayBeMethod false when {@code attr} names no method of any built-in type (a parse-time fact) */
  static Object getattr(Object obj, String attr, boolean mayBeMethod) {
    if (obj instanceof Undefined u) {
      throw u.fail();
    }
    if (mayBeMethod) {
      Object method = Methods.lookup(obj, attr);
      if (method != null) {
        return method;
      }
    }
    if (obj instanceof Map<?, ?> m) {
      Object v = m.get(attr);
      if (v != null || m.containsKey(attr)) {
        return v;
      }
    } else if (obj instanceof Namespace ns) {
      Object v = ns.attrs.get(attr);
      if (v != null || ns.attrs.containsKey(attr)) {
        return v;
      }
    } else if (obj instanceof LoopContext lc) {
      Object v = lc.attribute(attr);
      if (v != LoopContext.NO_ATTRIBUTE) {
        return v;
      }
    } else if (obj instanceof MacroValue mv) {
      Object v = mv.attribute(attr);
      if (v != null) {
        return v;
      }
    }
    return Undefined.attributeOf(obj, attr);
  }

  /** {@code obj[key]} as the sandbox resolves it: item first, then a Python attribute for str keys. */
  static Object getitem(Object obj, Object key, boolean keyFromTemplate) {
    if (obj instanceof Undefined u) {
      throw u.fail();
    }
    if (key instanceof Undefined && !(obj instanceof Map)) {
      return Undefined.elementOf(obj, key, false);
    }
    if (obj instanceof Map<?, ?> m) {
      boolean hashable = !(key instanceof List || key instanceof Map || key instanceof Namespace);
      if (hashable) {
        Object v = dictGet(m, key);
        if (v != null || containsKey(m, key)) {
          return v;
        }
      }
    } else if (obj instanceof List<?> l) {
      if (PyTypes.isInt(key)) {
        long i = toIndex(key);
        long k = i < 0 ? i + l.size() : i;
        if (k >= 0 && k < l.size()) {
          return l.get((int) k);
        }
      }
    } else if (PyTypes.isStr(obj)) {
      if (PyTypes.isInt(key)) {
        String c = PyStr.index(PyTypes.str(obj), toIndex(key));
        if (c != null) {
          return obj instanceof Markup ? new Markup(c) : c;
        }
      }
    } else if (obj instanceof PyTuple t) {
      if (PyTypes.isInt(key)) {
        long i = toIndex(key);
        long k = i < 0 ? i + t.size() : i;
        if (k >= 0 && k < t.size()) {
          return t.items().get((int) k);
        }
      }
    } else if (obj instanceof PyRange r) {
      if (PyTypes.isInt(key)) {
        long i = toIndex(key);
        long k = i < 0 ? i + r.length() : i;
        if (k >= 0 && k < r.length()) {
          return r.get(k);
        }
      }
    }
    if (PyTypes.isStr(key)) {
      String attr = PyTypes.str(key);
      Object method = Methods.lookup(obj, attr);
      if (method != null) {
        return method;
      }
      if (obj instanceof Namespace ns) {
        Object v = ns.attrs.get(attr);
        if (v != null || ns.attrs.containsKey(attr)) {
          return v;
        }
      } else if (obj instanceof LoopContext lc) {
        Object v = lc.attribute(attr);
        if (v != LoopContext.NO_ATTRIBUTE) {
          return v;
        }
      }
    }
    return Undefined.elementOf(obj, key, keyFromTemplate);
  }
}
