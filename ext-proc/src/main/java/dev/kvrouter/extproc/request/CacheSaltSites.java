package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Where the top-level {@code cache_salt} field sits in a request body, recorded while parsing so the body can be
 * rewritten by splicing bytes instead of re-serialising it.
 *
 * @param objectStart byte offset of the top-level {@code '{'}; -1 when offsets are unknown (a body that is not
 *     UTF-8, which cannot be spliced)
 * @param fieldCount number of top-level fields (an insertion into a non-empty object needs a comma)
 * @param values byte ranges {@code [start, end)} of every top-level {@code cache_salt} value, in order (JSON allows
 *     duplicates; Python keeps the last)
 */
public record CacheSaltSites(int objectStart, int fieldCount, List<Span> values) {

  /** Offsets unknown: the body cannot be spliced. */
  public static final CacheSaltSites UNKNOWN = new CacheSaltSites(-1, 0, List.of());

  /** A byte range {@code [start, end)} of the body. */
  public record Span(int start, int end) {}

  public CacheSaltSites {
    values = List.copyOf(values);
  }

  public boolean known() {
    return objectStart >= 0;
  }

  /**
   * Finds the sites by scanning the body's top level, skipping nested values without decoding them. The parser
   * records the same sites during its own pass; this standalone form exists for bodies the parser did not see.
   *
   * @throws IOException if the body is not one JSON object
   */
  public static CacheSaltSites scan(JsonFactory json, byte[] body, int length) throws IOException {
    try (JsonParser p = json.createParser(body, 0, length)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new IOException("body is not a JSON object");
      }
      Recorder r = new Recorder(p);
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        r.field(name);
        p.skipChildren();
      }
      return r.sites();
    }
  }

  /** Collects the sites while a parser walks the top-level object; call {@link #field} with the value current. */
  static final class Recorder {
    private final JsonParser p;
    private final int objectStart;
    private int fields;
    private List<Span> values = List.of();

    /** Call with the parser on the top-level {@code START_OBJECT}. */
    Recorder(JsonParser p) {
      this.p = p;
      long off = p.currentTokenLocation().getByteOffset();
      this.objectStart = off < 0 || off > Integer.MAX_VALUE ? -1 : (int) off;
    }

    /** Called for every top-level field with the parser on its value's first token. */
    void field(String name) throws IOException {
      fields++;
      if (!"cache_salt".equals(name) || objectStart < 0) {
        return;
      }
      JsonToken t = p.currentToken();
      long start = p.currentTokenLocation().getByteOffset();
      if (t == JsonToken.VALUE_STRING) {
        p.getTextLength(); // completes the token, so the current location is past its closing quote
      } else if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) {
        p.skipChildren();
      }
      long end = p.currentLocation().getByteOffset();
      if (values.isEmpty()) {
        values = new ArrayList<>(1);
      }
      values.add(new Span((int) start, (int) end));
    }

    CacheSaltSites sites() {
      return objectStart < 0 ? UNKNOWN : new CacheSaltSites(objectStart, fields, values);
    }
  }
}
