package dev.kvrouter.extproc.template.jinja;

/** A lexer token. {@code value} is the operator, name or raw text; {@code literal} the decoded constant. */
record Token(Type type, String value, Object literal, int line) {
  enum Type { DATA, BLOCK_BEGIN, BLOCK_END, VARIABLE_BEGIN, VARIABLE_END, NAME, STRING, INTEGER, FLOAT, OPERATOR, EOF }

  boolean is(Type t, String v) {
    return type == t && value.equals(v);
  }

  boolean isName(String v) {
    return type == Type.NAME && value.equals(v);
  }

  boolean isOp(String v) {
    return type == Type.OPERATOR && value.equals(v);
  }

  String describe() {
    return switch (type) {
      case NAME, OPERATOR -> value;
      case DATA -> "template data / text";
      case BLOCK_BEGIN -> "begin of statement block";
      case BLOCK_END -> "end of statement block";
      case VARIABLE_BEGIN -> "begin of print statement";
      case VARIABLE_END -> "end of print statement";
      case EOF -> "end of template";
      default -> type.name().toLowerCase();
    };
  }
}
