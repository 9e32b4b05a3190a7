package dev.kvrouter.extproc.template.jinja;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/** A Python tuple: like a list, but prints with parentheses and never equals a list. */
record PyTuple(List<Object> items) {
  public PyTuple {
    items = Collections.unmodifiableList(new ArrayList<>(items));
  }

  static PyTuple of(Object... items) {
    return new PyTuple(Arrays.asList(items));
  }

  int size() {
    return items.size();
  }
}
