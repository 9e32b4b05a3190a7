package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads one JSON value from a streaming parser into plain Java values with the semantics of Python's
 * {@code json.loads}, which is what vLLM's templates see: objects become insertion-ordered maps in which a
 * repeated key keeps its first position and its last value, integers become {@code Long} (or
 * {@code BigInteger} beyond 64 bits), other numbers {@code Double} (NaN and infinities included), and every
 * collection is unmodifiable.
 */
final class JsonValues {

  private JsonValues() {}

  /** Reads the value whose first token {@code t} is current; leaves the parser on its last token. */
  static Object read(JsonParser p, JsonToken t) throws IOException {
    switch (t) {
      case START_OBJECT -> {
        Map<String, Object> m = new LinkedHashMap<>();
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String k = p.currentName();
          m.put(k, read(p, p.nextToken()));
        }
        return Collections.unmodifiableMap(m);
      }
      case START_ARRAY -> {
        List<Object> l = new ArrayList<>();
        JsonToken e;
        while ((e = p.nextToken()) != JsonToken.END_ARRAY) {
          l.add(read(p, e));
        }
        return Collections.unmodifiableList(l);
      }
      case VALUE_STRING -> {
        return p.getText();
      }
      case VALUE_NUMBER_INT -> {
        return p.getNumberType() == JsonParser.NumberType.BIG_INTEGER ? p.getBigIntegerValue() : p.getLongValue();
      }
      case VALUE_NUMBER_FLOAT -> {
        return p.getDoubleValue();
      }
      case VALUE_TRUE -> {
        return Boolean.TRUE;
      }
      case VALUE_FALSE -> {
        return Boolean.FALSE;
      }
      case VALUE_NULL -> {
        return null;
      }
      default -> throw new IOException("unexpected JSON token " + t);
    }
  }

  /**
   * Python truthiness of the current value without materialising it (used for fields the router only tests,
   * such as a multi-megabyte {@code prompt_embeds}); leaves the parser on the value's last token.
   */
  static boolean skipTruthy(JsonParser p, JsonToken t) throws IOException {
    switch (t) {
      case START_OBJECT, START_ARRAY -> {
        JsonToken first = p.nextToken();
        boolean empty = first == JsonToken.END_OBJECT || first == JsonToken.END_ARRAY;
        if (!empty) {
          if (first == JsonToken.START_OBJECT || first == JsonToken.START_ARRAY) {
            p.skipChildren();
          }
          int depth = 1;
          while (depth > 0) {
            JsonToken n = p.nextToken();
            if (n == JsonToken.START_OBJECT || n == JsonToken.START_ARRAY) {
              depth++;
            } else if (n == JsonToken.END_OBJECT || n == JsonToken.END_ARRAY) {
              depth--;
            } else if (n == null) {
              throw new IOException("unexpected end of input");
            }
          }
        }
        return !empty;
      }
      case VALUE_STRING -> {
        return p.getTextLength() > 0;
      }
      default -> {
        return PythonValues.truthy(read(p, t));
      }
    }
  }
}
