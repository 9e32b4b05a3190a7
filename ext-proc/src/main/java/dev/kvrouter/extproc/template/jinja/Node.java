package dev.kvrouter.extproc.template.jinja;

import java.util.List;

/** A node of the template syntax tree; {@link #children()} lets analyses walk it like jinja2's find_all. */
abstract class Node {
  final int line;

  Node(int line) {
    this.line = line;
  }

  /** Direct child nodes, in source order. */
  abstract List<Node> children();

  int line() {
    return line;
  }
}
