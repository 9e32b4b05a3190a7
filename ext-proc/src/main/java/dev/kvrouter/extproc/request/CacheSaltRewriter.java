package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.io.JsonStringEncoder;

/**
 * Sets the top-level {@code cache_salt} of a request body by splicing bytes: every existing {@code cache_salt}
 * value is replaced (JSON allows duplicates; each gets the new value, so any reader sees it), or, when there is
 * none, the field is inserted right after the opening brace. Every other byte of the body is left exactly as the
 * client sent it, and the cost is one copy of the body, never a re-serialisation.
 */
public final class CacheSaltRewriter {

  private CacheSaltRewriter() {}

  /**
   * @param body the body as received; only {@code [0, length)} is read and nothing is modified
   * @param sites where {@code cache_salt} sits, from the parser or {@link CacheSaltSites#scan}
   * @param salt the new value
   * @return the rewritten body, exactly sized
   * @throws IllegalArgumentException if the sites are unknown (a non-UTF-8 body)
   */
  public static byte[] rewrite(byte[] body, int length, CacheSaltSites sites, String salt) {
    if (!sites.known()) {
      throw new IllegalArgumentException("cache_salt sites unknown: the body cannot be spliced");
    }
    if (sites.values().isEmpty()) {
      return insertField(body, length, sites.objectStart(), sites.fieldCount() > 0, "cache_salt", salt);
    }
    byte[] value = quoted(salt);
    int size = length;
    for (CacheSaltSites.Span s : sites.values()) {
      size += value.length - (s.end() - s.start());
    }
    byte[] out = new byte[size];
    int from = 0;
    int p = 0;
    for (CacheSaltSites.Span s : sites.values()) {
      System.arraycopy(body, from, out, p, s.start() - from);
      p += s.start() - from;
      System.arraycopy(value, 0, out, p, value.length);
      p += value.length;
      from = s.end();
    }
    System.arraycopy(body, from, out, p, length - from);
    return out;
  }

  /**
   * Inserts {@code "name":"value"} right after the body's opening brace (at {@code objectStart}, as the parser
   * recorded it), followed by a comma when the object has other fields. The rest of the bytes are left as they are.
   */
  public static byte[] insertField(byte[] body, int length, int objectStart, boolean hasFields, String name,
      String value) {
    byte[] key = quoted(name);
    byte[] val = quoted(value);
    int at = objectStart + 1;
    byte[] out = new byte[length + key.length + 1 + val.length + (hasFields ? 1 : 0)];
    System.arraycopy(body, 0, out, 0, at);
    int p = at;
    System.arraycopy(key, 0, out, p, key.length);
    p += key.length;
    out[p++] = ':';
    System.arraycopy(val, 0, out, p, val.length);
    p += val.length;
    if (hasFields) {
      out[p++] = ',';
    }
    System.arraycopy(body, at, out, p, length - at);
    return out;
  }

  private static byte[] quoted(String s) {
    byte[] inner = JsonStringEncoder.getInstance().quoteAsUTF8(s);
    byte[] out = new byte[inner.length + 2];
    out[0] = '"';
    System.arraycopy(inner, 0, out, 1, inner.length);
    out[out.length - 1] = '"';
    return out;
  }
}
