package dev.kvrouter.extproc.template.jinja;

import java.util.List;

/** A node of the template syntax tree; {@link #children()} lets analyses walk it like jinja2's find_all. */
public abstract class Node {
  final int line;

  Node(int line) {
    this.line = line;
  }

  /** Direct child nodes, in source order. */
  public abstract List<Node> children();

  public int line() {
    return line;
  }
}
