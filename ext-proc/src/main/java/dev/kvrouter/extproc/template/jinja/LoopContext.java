package dev.kvrouter.extproc.template.jinja;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The {@code loop} variable, mirroring jinja2's {@code LoopContext}: the iterable is consumed
 * lazily, {@code last}/{@code nextitem} peek one item ahead, and {@code length} drains the rest
 * only when asked.
 */
final class LoopContext {
  static final Object NO_ATTRIBUTE = new Object();
  private static final Object MISSING = new Object();

  private Iterator<Object> iterator;
  private final int depth0;
  private final Stmts.For recursiveLoop;
  private final Frame loopFrame;
  int index0 = -1;
  private long length = -1;
  private Object after = MISSING;
  private Object current = MISSING;
  private Object before = MISSING;
  private Object lastChanged = MISSING;

  LoopContext(Iterator<Object> iterator, int depth0, Stmts.For recursiveLoop, Frame loopFrame) {
    this.iterator = iterator;
    this.depth0 = depth0;
    this.recursiveLoop = recursiveLoop;
    this.loopFrame = loopFrame;
  }

  boolean hasNext() {
    return after != MISSING || iterator.hasNext();
  }

  Object next() {
    Object rv;
    if (after != MISSING) {
      rv = after;
      after = MISSING;
    } else {
      rv = iterator.next();
    }
    index0++;
    before = current;
    current = rv;
    return rv;
  }

  private Object peek() {
    if (after == MISSING && iterator.hasNext()) {
      after = iterator.next();
    }
    return after;
  }

  long length() {
    if (length < 0) {
      List<Object> rest = new ArrayList<>();
      iterator.forEachRemaining(rest::add);
      iterator = rest.iterator();
      length = rest.size() + (index0 + 1) + (after != MISSING ? 1 : 0);
    }
    return length;
  }

  void knownLength(long n) {
    length = n;
  }

  Object attribute(String name) {
    return switch (name) {
      case "index" -> (long) index0 + 1;
      case "index0" -> (long) index0;
      case "first" -> index0 == 0;
      case "last" -> peek() == MISSING;
      case "length" -> length();
      case "revindex" -> length() - index0;
      case "revindex0" -> length() - index0 - 1;
      case "depth" -> (long) depth0 + 1;
      case "depth0" -> (long) depth0;
      case "previtem" -> index0 == 0 ? Undefined.hint("there is no previous item") : before;
      case "nextitem" -> {
        Object n = peek();
        yield n == MISSING ? Undefined.hint("there is no next item") : n;
      }
      case "cycle" -> new BoundMethod(this, name, LoopContext::invoke);
      case "changed" -> new BoundMethod(this, name, LoopContext::invoke);
      default -> NO_ATTRIBUTE;
    };
  }

  private static Object invoke(Object self, String name, List<Object> args, Map<String, Object> kwargs) {
    LoopContext lc = (LoopContext) self;
    if (name.equals("cycle")) {
      if (args.isEmpty()) {
        throw JinjaError.type("no items for cycling given");
      }
      return args.get(lc.index0 % args.size());
    }
    PyTuple value = new PyTuple(args);
    if (lc.lastChanged == MISSING || !PyOps.eq(lc.lastChanged, value)) {
      lc.lastChanged = value;
      return true;
    }
    return false;
  }

  /** {@code loop(children)} inside a {@code recursive} loop. */
  Object recurse(Frame caller, Object iterable) {
    if (recursiveLoop == null) {
      throw JinjaError.type("The loop must have the 'recursive' marker to be called recursively.");
    }
    StringBuilder out = new StringBuilder();
    recursiveLoop.run(Objects.requireNonNull(loopFrame), iterable, depth0 + 1, out);
    return out.toString();
  }
}
