package dev.kvrouter.extproc.template.jinja;

import java.util.Iterator;

/**
 * A Python generator or one-shot iterator, as returned by {@code select}, {@code map},
 * {@code items}, {@code reverse} and friends: lazy, consumed by the first iteration, always
 * truthy, and without a length. Mirroring that matters: {@code x|select(...)|length} fails in
 * Python and {@code {% if x|select(...) %}} is always true.
 */
final class PyIterator implements Iterator<Object> {
  private final Iterator<Object> source;
  final String kind;

  PyIterator(Iterator<Object> source, String kind) {
    this.source = source;
    this.kind = kind;
  }

  @Override
  public boolean hasNext() {
    return source.hasNext();
  }

  @Override
  public Object next() {
    return source.next();
  }
}
