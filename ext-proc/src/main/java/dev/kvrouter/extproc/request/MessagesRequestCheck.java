package dev.kvrouter.extproc.request;

import static dev.kvrouter.extproc.request.RequestBodyParser.bad;

import dev.kvrouter.extproc.request.RequestBodyParser.BadRequest;
import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * vLLM main's {@code AnthropicMessagesRequest} validation (vllm/entrypoints/anthropic/protocol.py, a8c3bdb) of the
 * Messages fields the prompt conversion does not check itself. FastAPI validates the body against that model before
 * vLLM's handler runs, so a body it refuses is a 400 whichever worker gets it: refused here, routing would only spend
 * a decision (and a reservation) on it. Only what pydantic surely refuses is refused; the lax conversions it accepts
 * ({@code "5"}, {@code 1.0}, {@code true} for an int; {@code "yes"} for a bool; {@code "nan"}, {@code "1e999"} for a
 * float) pass. {@code stop_sequences}' length cap is each worker's {@code VLLM_MAX_STOP_STRINGS}, which the router
 * is told ({@code limits.max_stop_strings}, vLLM's default unless set).
 */
final class MessagesRequestCheck {

  /** Top-level fields the router reads only to check them (and skips for the other APIs). */
  static final Set<String> CHECKED_ONLY = Set.of("metadata", "stop_sequences", "temperature", "top_p", "top_k",
      "kv_transfer_params", "ec_transfer_params", "vllm_xargs");

  private static final Set<String> THINKING_TYPES = Set.of("enabled", "disabled", "adaptive");
  private static final Set<String> THINKING_DISPLAYS = Set.of("summarized", "omitted", "updates");
  private static final BigInteger MIN_THINKING_BUDGET = BigInteger.valueOf(1024);

  private MessagesRequestCheck() {}

  /** {@code max_tokens: int}, required, with {@code validate_max_tokens}: positive. */
  static BigInteger maxTokens(boolean present, Object value) throws BadRequest {
    if (!present) {
      throw bad("`max_tokens` is required", "max_tokens");
    }
    BigInteger n = PythonValues.pydanticInt(value);
    if (n == null) {
      throw bad("`max_tokens` must be an integer", "max_tokens");
    }
    if (n.signum() <= 0) {
      throw bad("max_tokens must be positive", "max_tokens");
    }
    return n;
  }

  /**
   * {@code thinking}: null or one of the three configs its {@code type} names, and an enabled budget of at least 1024
   * tokens under {@code max_tokens} ({@code validate_thinking_budget}). Returns the type, or null.
   */
  static String thinking(Object thinking, BigInteger maxTokens) throws BadRequest {
    if (thinking == null) {
      return null;
    }
    if (!(thinking instanceof Map<?, ?> th) || !(th.get("type") instanceof String type)
        || !THINKING_TYPES.contains(type)) {
      throw bad("`thinking.type` must be one of enabled, disabled, adaptive", "thinking.type");
    }
    Object display = th.get("display");
    if (!type.equals("disabled") && display != null && !THINKING_DISPLAYS.contains(display)) {
      throw bad("`thinking.display` must be one of summarized, omitted, updates", "thinking.display");
    }
    if (type.equals("enabled")) {
      BigInteger budget = PythonValues.pydanticInt(th.get("budget_tokens"));
      if (budget == null || budget.compareTo(MIN_THINKING_BUDGET) < 0) {
        throw bad("`thinking.budget_tokens` must be an integer of at least 1024", "thinking.budget_tokens");
      }
      if (budget.compareTo(maxTokens) >= 0) {
        throw bad("thinking.budget_tokens must be less than max_tokens", "thinking.budget_tokens");
      }
    }
    return type;
  }

  /** {@code output_config.format}: null or {@code {"type": "json_schema", "schema": object or null}}. */
  static void outputFormat(Map<?, ?> outputConfig) throws BadRequest {
    Object format = outputConfig.get("format");
    if (format == null) {
      return;
    }
    if (!(format instanceof Map<?, ?> f) || f.containsKey("type") && !"json_schema".equals(f.get("type"))
        || f.get("schema") != null && !(f.get("schema") instanceof Map)) {
      throw bad("`output_config.format` must be an object with type json_schema and an object `schema`",
          "output_config.format");
    }
  }

  /** Longest {@code cache_salt}, in code points (Python's {@code len}): {@code Field(max_length=1024)}. */
  static final int MAX_CACHE_SALT_CHARS = 1024;

  /**
   * {@code cache_salt}'s length (its type and emptiness are every API's, checked before). Refused although a tenant's
   * salt is replaced by the router: the body is as invalid as any other the engine's model refuses.
   */
  static void cacheSalt(Object salt) throws BadRequest {
    if (salt instanceof String s && s.codePointCount(0, s.length()) > MAX_CACHE_SALT_CHARS) {
      throw bad("`cache_salt` must be at most " + MAX_CACHE_SALT_CHARS + " characters", "cache_salt");
    }
  }

  /** {@code stream: bool | None}, as pydantic reads a bool. */
  static void stream(Object stream) throws BadRequest {
    if (stream != null && PythonValues.laxBool(stream) == null) {
      throw bad("`stream` must be a boolean", "stream");
    }
  }

  /**
   * The {@link #CHECKED_ONLY} fields present in the body, by name; {@code stop_sequences} holds at most
   * {@code maxStopStrings} strings.
   */
  static void checkedOnly(Map<String, Object> fields, int maxStopStrings) throws BadRequest {
    for (Map.Entry<String, Object> e : fields.entrySet()) {
      String name = e.getKey();
      Object v = e.getValue();
      boolean ok = v == null || switch (name) {
        case "stop_sequences" -> v instanceof List<?> l && l.stream().allMatch(x -> x instanceof String);
        case "temperature", "top_p" -> PythonValues.pydanticFloat(v);
        case "top_k" -> PythonValues.pydanticInt(v) != null;
        case "vllm_xargs" -> v instanceof Map<?, ?> m && m.values().stream().allMatch(MessagesRequestCheck::xarg);
        default -> v instanceof Map; // metadata, kv_transfer_params, ec_transfer_params: dict | None
      };
      if (!ok) {
        throw bad("`" + name + "` " + EXPECTED.get(name), name);
      }
      if (name.equals("stop_sequences") && v instanceof List<?> l && l.size() > maxStopStrings) {
        throw bad("`stop_sequences` must have at most " + maxStopStrings + " items", name);
      }
    }
  }

  private static final Map<String, String> EXPECTED = Map.of(
      "stop_sequences", "must be a list of strings",
      "temperature", "must be a number",
      "top_p", "must be a number",
      "top_k", "must be an integer",
      "vllm_xargs", "must be an object of strings, numbers or lists of them",
      "metadata", "must be an object",
      "kv_transfer_params", "must be an object",
      "ec_transfer_params", "must be an object");

  /** A {@code vllm_xargs} value: {@code str | int | float | list[str | int | float]} (a bool reads as an int). */
  private static boolean xarg(Object v) {
    return scalar(v) || v instanceof List<?> l && l.stream().allMatch(MessagesRequestCheck::scalar);
  }

  private static boolean scalar(Object v) {
    return v instanceof String || v instanceof Number || v instanceof Boolean;
  }
}
