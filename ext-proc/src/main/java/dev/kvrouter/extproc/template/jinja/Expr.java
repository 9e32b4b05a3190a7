package dev.kvrouter.extproc.template.jinja;

/** An expression node: evaluates to a Python value in a frame. */
abstract class Expr extends Node {
  Expr(int line) {
    super(line);
  }

  abstract Object eval(Frame f);
}
