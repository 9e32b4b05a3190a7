package dev.kvrouter.extproc.template.jinja;

import dev.kvrouter.extproc.template.TemplateSyntaxException;
import dev.kvrouter.extproc.template.jinja.Exprs.Keyword;
import dev.kvrouter.extproc.template.jinja.Token.Type;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * jinja2's recursive-descent parser ({@code jinja2.parser.Parser}), producing evaluable nodes.
 * Operator precedence, tuple rules, test-argument rules and statement forms follow the Python
 * source. Tags: {@code if/elif/else}, {@code for} (with {@code if} filter, {@code else},
 * {@code recursive}), {@code set} (plain, tuple, namespace attribute, block), {@code macro},
 * {@code call}, {@code filter}, {@code with}, {@code raw}, {@code break}/{@code continue}
 * (loopcontrols) and transformers' {@code generation}. Template inheritance and includes have no
 * loader in a chat template and are rejected.
 */
final class Parser {
  private final List<Token> tokens;
  private int i;
  private int loopDepth;

  private Parser(List<Token> tokens) {
    this.tokens = tokens;
  }

  static List<Stmt> parse(String source) {
    Parser p = new Parser(Lexer.tokenize(source));
    List<Stmt> body = p.subparse(null);
    Validator.check(body);
    return body;
  }

  // ---- token stream ----------------------------------------------------------------------------

  private Token cur() {
    return tokens.get(i);
  }

  private Token look() {
    return tokens.get(Math.min(i + 1, tokens.size() - 1));
  }

  private Token next() {
    Token t = tokens.get(i);
    if (i < tokens.size() - 1) {
      i++;
    }
    return t;
  }

  private TemplateSyntaxException fail(String msg, int line) {
    return new TemplateSyntaxException(msg, line);
  }

  private Token expect(Type type) {
    Token t = cur();
    if (t.type() != type) {
      if (t.type() == Type.EOF) {
        throw fail("unexpected end of template, expected '" + type.name().toLowerCase() + "'.", t.line());
      }
      throw fail("expected token '" + type.name().toLowerCase() + "', got '" + t.describe() + "'", t.line());
    }
    return next();
  }

  private Token expectName(String name) {
    Token t = cur();
    if (!t.isName(name)) {
      throw fail("expected token '" + name + "', got '" + t.describe() + "'", t.line());
    }
    return next();
  }

  private void expectOp(String op) {
    Token t = cur();
    if (!t.isOp(op)) {
      throw fail("expected token '" + op + "', got '" + t.describe() + "'", t.line());
    }
    next();
  }

  private boolean skipName(String name) {
    if (cur().isName(name)) {
      next();
      return true;
    }
    return false;
  }

  private boolean skipOp(String op) {
    if (cur().isOp(op)) {
      next();
      return true;
    }
    return false;
  }

  // ---- statements ------------------------------------------------------------------------------

  private List<Stmt> subparse(Set<String> endTokens) {
    List<Stmt> body = new ArrayList<>();
    List<Node> data = new ArrayList<>();
    while (cur().type() != Type.EOF) {
      Token t = cur();
      switch (t.type()) {
        case DATA -> {
          data.add(new Stmts.Data(t.value(), t.line()));
          next();
        }
        case VARIABLE_BEGIN -> {
          next();
          data.add(parseTuple(false, true, null, false, false));
          expect(Type.VARIABLE_END);
        }
        case BLOCK_BEGIN -> {
          flush(body, data);
          next();
          if (endTokens != null && cur().type() == Type.NAME && endTokens.contains(cur().value())) {
            return body;
          }
          body.add(parseStatement());
          expect(Type.BLOCK_END);
        }
        default -> throw fail("internal parsing error", t.line());
      }
    }
    flush(body, data);
    return body;
  }

  private static void flush(List<Stmt> body, List<Node> data) {
    if (!data.isEmpty()) {
      body.add(new Stmts.Output(new ArrayList<>(data), data.get(0).line));
      data.clear();
    }
  }

  private List<Stmt> parseStatements(Set<String> endTokens, boolean dropNeedle) {
    skipOp(":");
    expect(Type.BLOCK_END);
    List<Stmt> result = subparse(endTokens);
    if (cur().type() == Type.EOF) {
      throw fail("Unexpected end of template. Jinja was looking for the following tags: "
          + String.join(" or ", endTokens.stream().map(s -> "'" + s + "'").sorted().toList()) + ".", cur().line());
    }
    if (dropNeedle) {
      next();
    }
    return result;
  }

  private Stmt parseStatement() {
    Token t = cur();
    if (t.type() != Type.NAME) {
      throw fail("tag name expected", t.line());
    }
    return switch (t.value()) {
      case "for" -> parseFor();
      case "if" -> parseIf();
      case "set" -> parseSet();
      case "macro" -> parseMacro();
      case "call" -> parseCallBlock();
      case "filter" -> parseFilterBlock();
      case "with" -> parseWith();
      case "print" -> parsePrint();
      case "break", "continue" -> {
        next();
        if (loopDepth == 0) {
          throw fail("'" + t.value() + "' outside loop", t.line());
        }
        yield new Stmts.LoopControl(t.value().equals("break"), t.line());
      }
      case "generation" -> {
        next();
        yield new Stmts.Body(parseStatements(Set.of("endgeneration"), true), t.line());
      }
      case "extends", "include", "import", "from", "block", "autoescape" ->
          throw fail("the '" + t.value() + "' tag is not supported in chat templates", t.line());
      default -> throw fail("Encountered unknown tag '" + t.value() + "'.", t.line());
    };
  }

  private Stmt parseFor() {
    int line = expectName("for").line();
    Expr target = parseAssignTarget(true, false, Set.of("in"), false);
    expectName("in");
    Expr iter = parseTuple(false, false, Set.of("recursive"), false, false);
    Expr test = null;
    if (skipName("if")) {
      test = parseExpression(true);
    }
    boolean recursive = skipName("recursive");
    loopDepth++;
    List<Stmt> body = parseStatements(Set.of("endfor", "else"), false);
    loopDepth--;
    List<Stmt> orelse = List.of();
    if (!next().value().equals("endfor")) {
      orelse = parseStatements(Set.of("endfor"), true);
    }
    return new Stmts.For(target, iter, body, orelse, test, recursive, line);
  }

  private Stmt parseIf() {
    int line = expectName("if").line();
    Expr test = parseTuple(false, false, null, false, false);
    List<Stmt> body = parseStatements(Set.of("elif", "else", "endif"), false);
    List<Stmts.If> elifs = new ArrayList<>();
    List<Stmt> orelse = List.of();
    while (true) {
      Token t = next();
      if (t.isName("elif")) {
        int l = cur().line();
        Expr et = parseTuple(false, false, null, false, false);
        List<Stmt> eb = parseStatements(Set.of("elif", "else", "endif"), false);
        elifs.add(new Stmts.If(et, eb, List.of(), List.of(), l));
        continue;
      }
      if (t.isName("else")) {
        orelse = parseStatements(Set.of("endif"), true);
      }
      break;
    }
    return new Stmts.If(test, body, elifs, orelse, line);
  }

  private Stmt parseSet() {
    int line = next().line();
    Expr target = parseAssignTarget(true, false, null, true);
    if (skipOp("=")) {
      Expr value = parseTuple(false, true, null, false, false);
      return new Stmts.Assign(target, value, line);
    }
    Exprs.FilterExpr filter = (Exprs.FilterExpr) parseFilter(null, false);
    List<Stmt> body = parseStatements(Set.of("endset"), true);
    return new Stmts.AssignBlock(target, filter, body, line);
  }

  private Stmts.MacroDef parseMacro() {
    int line = next().line();
    String name = expect(Type.NAME).value();
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    parseSignature(params, defaults);
    int saved = loopDepth;
    loopDepth = 0;
    List<Stmt> body = parseStatements(Set.of("endmacro"), true);
    loopDepth = saved;
    return macroDef(name, params, defaults, body, line);
  }

  private static Stmts.MacroDef macroDef(String name, List<String> params, List<Expr> defaults, List<Stmt> body,
      int line) {
    Set<String> used = Validator.loadedNames(body);
    return new Stmts.MacroDef(name, params, defaults, body, used.contains("kwargs"), used.contains("varargs"),
        used.contains("caller"), line);
  }

  private void parseSignature(List<String> params, List<Expr> defaults) {
    expectOp("(");
    boolean sawDefault = false;
    while (!cur().isOp(")")) {
      if (!params.isEmpty()) {
        expectOp(",");
      }
      Token name = expect(Type.NAME);
      if (skipOp("=")) {
        defaults.add(parseExpression(true));
        sawDefault = true;
      } else {
        if (sawDefault) {
          throw fail("non-default argument follows default argument", name.line());
        }
        defaults.add(null);
      }
      params.add(name.value());
    }
    expectOp(")");
  }

  private Stmt parseCallBlock() {
    int line = next().line();
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    if (cur().isOp("(")) {
      parseSignature(params, defaults);
    }
    Expr call = parseExpression(true);
    if (!(call instanceof Exprs.Call c)) {
      throw fail("expected call", line);
    }
    int saved = loopDepth;
    loopDepth = 0;
    List<Stmt> body = parseStatements(Set.of("endcall"), true);
    loopDepth = saved;
    return new Stmts.CallBlock(c, macroDef("caller", params, defaults, body, line), line);
  }

  private Stmt parseFilterBlock() {
    int line = next().line();
    Exprs.FilterExpr filter = (Exprs.FilterExpr) parseFilter(null, true);
    List<Stmt> body = parseStatements(Set.of("endfilter"), true);
    return new Stmts.FilterBlock(filter, body, line);
  }

  private Stmt parseWith() {
    int line = next().line();
    List<Expr> targets = new ArrayList<>();
    List<Expr> values = new ArrayList<>();
    while (cur().type() != Type.BLOCK_END) {
      if (!targets.isEmpty()) {
        expectOp(",");
      }
      targets.add(parseAssignTarget(true, false, null, false));
      expectOp("=");
      values.add(parseExpression(true));
    }
    List<Stmt> body = parseStatements(Set.of("endwith"), true);
    return new Stmts.With(targets, values, body, line);
  }

  private Stmt parsePrint() {
    int line = next().line();
    List<Node> items = new ArrayList<>();
    while (cur().type() != Type.BLOCK_END) {
      if (!items.isEmpty()) {
        expectOp(",");
      }
      items.add(parseExpression(true));
    }
    return new Stmts.Output(items, line);
  }

  private Expr parseAssignTarget(boolean withTuple, boolean nameOnly, Set<String> extraEnd, boolean withNamespace) {
    Expr target;
    if (nameOnly) {
      Token t = expect(Type.NAME);
      target = new Exprs.Name(t.value(), t.line());
    } else if (withTuple) {
      target = parseTuple(true, true, extraEnd, false, withNamespace);
    } else {
      target = parsePrimary(withNamespace);
    }
    if (!canAssign(target)) {
      throw fail("can't assign to '" + target.getClass().getSimpleName().toLowerCase() + "'", target.line);
    }
    return target;
  }

  private static boolean canAssign(Expr e) {
    if (e instanceof Exprs.Name || e instanceof Exprs.NsRef) {
      return true;
    }
    if (e instanceof Exprs.TupleExpr t) {
      return t.items.stream().allMatch(Parser::canAssign);
    }
    return false;
  }

  // ---- expressions -----------------------------------------------------------------------------

  private Expr parseExpression(boolean withCondexpr) {
    return withCondexpr ? parseCondexpr() : parseOr();
  }

  private Expr parseCondexpr() {
    int line = cur().line();
    Expr expr1 = parseOr();
    while (skipName("if")) {
      Expr expr2 = parseOr();
      Expr expr3 = skipName("else") ? parseCondexpr() : null;
      expr1 = new Exprs.CondExpr(expr2, expr1, expr3, line);
      line = cur().line();
    }
    return expr1;
  }

  private Expr parseOr() {
    int line = cur().line();
    Expr left = parseAnd();
    while (skipName("or")) {
      left = new Exprs.Or(left, parseAnd(), line);
      line = cur().line();
    }
    return left;
  }

  private Expr parseAnd() {
    int line = cur().line();
    Expr left = parseNot();
    while (skipName("and")) {
      left = new Exprs.And(left, parseNot(), line);
      line = cur().line();
    }
    return left;
  }

  private Expr parseNot() {
    if (cur().isName("not")) {
      int line = next().line();
      return new Exprs.Not(parseNot(), line);
    }
    return parseCompare();
  }

  private static final Set<String> COMPARE = Set.of("==", "!=", "<", "<=", ">", ">=");

  private Expr parseCompare() {
    int line = cur().line();
    Expr expr = parseMath1();
    List<Exprs.Operand> ops = new ArrayList<>();
    while (true) {
      Token t = cur();
      if (t.type() == Type.OPERATOR && COMPARE.contains(t.value())) {
        next();
        String op = switch (t.value()) {
          case "==" -> "eq";
          case "!=" -> "ne";
          case "<" -> "lt";
          case "<=" -> "lteq";
          case ">" -> "gt";
          default -> "gteq";
        };
        ops.add(new Exprs.Operand(op, parseMath1()));
      } else if (skipName("in")) {
        ops.add(new Exprs.Operand("in", parseMath1()));
      } else if (t.isName("not") && look().isName("in")) {
        next();
        next();
        ops.add(new Exprs.Operand("notin", parseMath1()));
      } else {
        break;
      }
      line = cur().line();
    }
    return ops.isEmpty() ? expr : new Exprs.Compare(expr, ops, line);
  }

  private Expr parseMath1() {
    int line = cur().line();
    Expr left = parseConcat();
    while (cur().isOp("+") || cur().isOp("-")) {
      Exprs.BinOpKind k = next().value().equals("+") ? Exprs.BinOpKind.ADD : Exprs.BinOpKind.SUB;
      left = new Exprs.BinOp(k, left, parseConcat(), line);
      line = cur().line();
    }
    return left;
  }

  private Expr parseConcat() {
    int line = cur().line();
    List<Expr> args = new ArrayList<>();
    args.add(parseMath2());
    while (skipOp("~")) {
      args.add(parseMath2());
    }
    return args.size() == 1 ? args.get(0) : new Exprs.Concat(args, line);
  }

  private Expr parseMath2() {
    int line = cur().line();
    Expr left = parsePow();
    while (true) {
      Token t = cur();
      Exprs.BinOpKind k;
      if (t.isOp("*")) {
        k = Exprs.BinOpKind.MUL;
      } else if (t.isOp("/")) {
        k = Exprs.BinOpKind.DIV;
      } else if (t.isOp("//")) {
        k = Exprs.BinOpKind.FLOORDIV;
      } else if (t.isOp("%")) {
        k = Exprs.BinOpKind.MOD;
      } else {
        break;
      }
      next();
      left = new Exprs.BinOp(k, left, parsePow(), line);
      line = cur().line();
    }
    return left;
  }

  private Expr parsePow() {
    int line = cur().line();
    Expr left = parseUnary(true);
    while (skipOp("**")) {
      left = new Exprs.BinOp(Exprs.BinOpKind.POW, left, parseUnary(true), line);
      line = cur().line();
    }
    return left;
  }

  private Expr parseUnary(boolean withFilter) {
    Token t = cur();
    Expr node;
    if (t.isOp("-")) {
      next();
      node = new Exprs.Unary(true, parseUnary(false), t.line());
    } else if (t.isOp("+")) {
      next();
      node = new Exprs.Unary(false, parseUnary(false), t.line());
    } else {
      node = parsePrimary(false);
    }
    node = parsePostfix(node);
    if (withFilter) {
      node = parseFilterExpr(node);
    }
    return node;
  }

  private Expr parsePrimary(boolean withNamespace) {
    Token t = cur();
    switch (t.type()) {
      case NAME -> {
        next();
        switch (t.value()) {
          case "true", "True" -> {
            return new Exprs.Const(true, t.line());
          }
          case "false", "False" -> {
            return new Exprs.Const(false, t.line());
          }
          case "none", "None" -> {
            return new Exprs.Const(null, t.line());
          }
          default -> {
            if (withNamespace && cur().isOp(".")) {
              next();
              Token attr = expect(Type.NAME);
              return new Exprs.NsRef(t.value(), attr.value(), t.line());
            }
            return new Exprs.Name(t.value(), t.line());
          }
        }
      }
      case STRING -> {
        next();
        StringBuilder sb = new StringBuilder((String) t.literal());
        while (cur().type() == Type.STRING) {
          sb.append((String) next().literal());
        }
        return new Exprs.Const(sb.toString(), t.line());
      }
      case INTEGER, FLOAT -> {
        next();
        return new Exprs.Const(t.literal(), t.line());
      }
      case OPERATOR -> {
        if (t.isOp("(")) {
          next();
          Expr node = parseTuple(false, true, null, true, false);
          expectOp(")");
          return node;
        }
        if (t.isOp("[")) {
          return parseList();
        }
        if (t.isOp("{")) {
          return parseDict();
        }
        throw fail("unexpected '" + t.describe() + "'", t.line());
      }
      default -> throw fail("unexpected '" + t.describe() + "'", t.line());
    }
  }

  private boolean isTupleEnd(Set<String> extraEnd) {
    Token t = cur();
    if (t.type() == Type.VARIABLE_END || t.type() == Type.BLOCK_END || t.isOp(")")) {
      return true;
    }
    return extraEnd != null && t.type() == Type.NAME && extraEnd.contains(t.value());
  }

  private Expr parseTuple(boolean simplified, boolean withCondexpr, Set<String> extraEnd, boolean explicitParens,
      boolean withNamespace) {
    int line = cur().line();
    List<Expr> args = new ArrayList<>();
    boolean isTuple = false;
    while (true) {
      if (!args.isEmpty()) {
        expectOp(",");
      }
      if (isTupleEnd(extraEnd)) {
        break;
      }
      args.add(simplified ? parsePrimary(withNamespace) : parseExpression(withCondexpr));
      if (cur().isOp(",")) {
        isTuple = true;
      } else {
        break;
      }
      line = cur().line();
    }
    if (!isTuple) {
      if (!args.isEmpty()) {
        return args.get(0);
      }
      if (!explicitParens) {
        throw fail("Expected an expression, got '" + cur().describe() + "'", cur().line());
      }
    }
    return new Exprs.TupleExpr(args, line);
  }

  private Expr parseList() {
    int line = next().line();
    List<Expr> items = new ArrayList<>();
    while (!cur().isOp("]")) {
      if (!items.isEmpty()) {
        expectOp(",");
      }
      if (cur().isOp("]")) {
        break;
      }
      items.add(parseExpression(true));
    }
    expectOp("]");
    return new Exprs.ListExpr(items, line);
  }

  private Expr parseDict() {
    int line = next().line();
    List<Expr> keys = new ArrayList<>();
    List<Expr> values = new ArrayList<>();
    while (!cur().isOp("}")) {
      if (!keys.isEmpty()) {
        expectOp(",");
      }
      if (cur().isOp("}")) {
        break;
      }
      keys.add(parseExpression(true));
      expectOp(":");
      values.add(parseExpression(true));
    }
    expectOp("}");
    return new Exprs.DictExpr(keys, values, line);
  }

  private Expr parsePostfix(Expr node) {
    while (true) {
      Token t = cur();
      if (t.isOp(".") || t.isOp("[")) {
        node = parseSubscript(node);
      } else if (t.isOp("(")) {
        node = parseCall(node);
      } else {
        return node;
      }
    }
  }

  private Expr parseFilterExpr(Expr node) {
    while (true) {
      Token t = cur();
      if (t.isOp("|")) {
        node = parseFilter(node, false);
      } else if (t.isName("is")) {
        node = parseTest(node);
      } else if (t.isOp("(")) {
        node = parseCall(node);
      } else {
        return node;
      }
    }
  }

  private Expr parseSubscript(Expr node) {
    Token t = next();
    if (t.isOp(".")) {
      Token attr = next();
      if (attr.type() == Type.NAME) {
        return new Exprs.Getattr(node, attr.value(), t.line());
      }
      if (attr.type() != Type.INTEGER) {
        throw fail("expected name or number", attr.line());
      }
      return new Exprs.Getitem(node, new Exprs.Const(attr.literal(), attr.line()), t.line());
    }
    List<Expr> args = new ArrayList<>();
    while (!cur().isOp("]")) {
      if (!args.isEmpty()) {
        expectOp(",");
      }
      args.add(parseSubscribed());
    }
    expectOp("]");
    Expr arg = args.size() == 1 ? args.get(0) : new Exprs.TupleExpr(args, t.line());
    return new Exprs.Getitem(node, arg, t.line());
  }

  private Expr parseSubscribed() {
    int line = cur().line();
    Expr start = null;
    if (cur().isOp(":")) {
      next();
    } else {
      Expr node = parseExpression(true);
      if (!cur().isOp(":")) {
        return node;
      }
      next();
      start = node;
    }
    Expr stop = null;
    if (!cur().isOp(":") && !cur().isOp("]") && !cur().isOp(",")) {
      stop = parseExpression(true);
    }
    Expr step = null;
    if (cur().isOp(":")) {
      next();
      if (!cur().isOp("]") && !cur().isOp(",")) {
        step = parseExpression(true);
      }
    }
    return new Exprs.Slice(start, stop, step, line);
  }

  private record CallArgsNodes(List<Expr> args, List<Keyword> kwargs, Expr dynArgs, Expr dynKwargs) {}

  private CallArgsNodes parseCallArgs() {
    Token open = cur();
    expectOp("(");
    List<Expr> args = new ArrayList<>();
    List<Keyword> kwargs = new ArrayList<>();
    Expr dynArgs = null;
    Expr dynKwargs = null;
    boolean requireComma = false;
    while (!cur().isOp(")")) {
      if (requireComma) {
        expectOp(",");
        if (cur().isOp(")")) {
          break;
        }
      }
      if (cur().isOp("*")) {
        ensure(dynArgs == null && dynKwargs == null, open);
        next();
        dynArgs = parseExpression(true);
      } else if (cur().isOp("**")) {
        ensure(dynKwargs == null, open);
        next();
        dynKwargs = parseExpression(true);
      } else if (cur().type() == Type.NAME && look().isOp("=")) {
        ensure(dynKwargs == null, open);
        String key = next().value();
        next();
        kwargs.add(new Keyword(key, parseExpression(true)));
      } else {
        ensure(dynArgs == null && dynKwargs == null && kwargs.isEmpty(), open);
        args.add(parseExpression(true));
      }
      requireComma = true;
    }
    expectOp(")");
    return new CallArgsNodes(args, kwargs, dynArgs, dynKwargs);
  }

  private void ensure(boolean ok, Token open) {
    if (!ok) {
      throw fail("invalid syntax for function call expression", open.line());
    }
  }

  private Expr parseCall(Expr node) {
    int line = cur().line();
    CallArgsNodes a = parseCallArgs();
    return new Exprs.Call(node, a.args(), a.kwargs(), a.dynArgs(), a.dynKwargs(), line);
  }

  private String dottedName() {
    StringBuilder name = new StringBuilder(expect(Type.NAME).value());
    while (cur().isOp(".")) {
      next();
      name.append('.').append(expect(Type.NAME).value());
    }
    return name.toString();
  }

  private Expr parseFilter(Expr node, boolean startInline) {
    while (cur().isOp("|") || startInline) {
      if (!startInline) {
        next();
      }
      int line = cur().line();
      String name = dottedName();
      CallArgsNodes a = cur().isOp("(") ? parseCallArgs() : new CallArgsNodes(List.of(), List.of(), null, null);
      node = new Exprs.FilterExpr(node, name, Filters.get(name), a.args(), a.kwargs(), a.dynArgs(), a.dynKwargs(),
          line);
      startInline = false;
    }
    return node;
  }

  private static final Set<Type> TEST_ARG_START = Set.of(Type.NAME, Type.STRING, Type.INTEGER, Type.FLOAT);

  private Expr parseTest(Expr node) {
    Token is = next();
    boolean negated = skipName("not");
    String name = dottedName();
    CallArgsNodes a;
    Token t = cur();
    boolean argStart = TEST_ARG_START.contains(t.type()) || t.isOp("(") || t.isOp("[") || t.isOp("{");
    if (t.isOp("(")) {
      a = parseCallArgs();
    } else if (argStart && !t.isName("else") && !t.isName("or") && !t.isName("and")) {
      if (t.isName("is")) {
        throw fail("You cannot chain multiple tests with is", t.line());
      }
      Expr arg = parsePostfix(parsePrimary(false));
      a = new CallArgsNodes(List.of(arg), List.of(), null, null);
    } else {
      a = new CallArgsNodes(List.of(), List.of(), null, null);
    }
    Expr test = new Exprs.TestExpr(node, name, Tests.get(name), a.args(), a.kwargs(), a.dynArgs(), a.dynKwargs(),
        is.line());
    return negated ? new Exprs.Not(test, is.line()) : test;
  }
}
