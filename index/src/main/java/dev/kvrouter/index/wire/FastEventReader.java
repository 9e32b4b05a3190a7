package dev.kvrouter.index.wire;

import static dev.kvrouter.index.wire.WireKeys.*;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Reads the common KV event payloads straight from their bytes into an {@link EventBuffer}, without msgpack-java
 * and without allocating per event: vLLM's and SGLang's batches in every layout {@link EventDecoder} accepts
 * (array or map envelope, tagged-array or map events, integer or {@code bin} hashes), including extra keys of
 * plain shapes and SGLang's {@code metadata}.
 *
 * <p>It is a fast path, not a second decoder: anything outside that subset, and anything malformed, makes
 * {@link #read} return false with nothing to apply, and the caller decodes the payload with
 * {@link EventDecoder}, which decides (and reports) what is wrong. Whenever {@code read} returns true its
 * result equals what {@code EventDecoder} returns for the same bytes ({@code FastEventReaderTest} checks this
 * on the msgspec fixtures and on random and mutated payloads). vLLM sends one {@code BlockRemoved} per evicted
 * block, so a batch is mostly small events whose cost was msgpack-java's per-value overhead.
 *
 * <p>Not thread-safe: one per event thread.
 */
public final class FastEventReader {

  /** Extra keys nest at most this deep here (a multimodal {@code [identifier, offset]} pair is depth 2). */
  private static final int MAX_DEPTH = 4;

  private static final int K_UNKNOWN = WireKeyTable.UNKNOWN;

  /** Thrown (preallocated, no stack trace) to abandon the fast path. */
  @SuppressWarnings("serial")
  private static final class Bail extends RuntimeException {
    Bail() {
      super(null, null, false, false);
    }
  }

  private static final Bail BAIL = new Bail();

  private static final VarHandle BE_INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

  private final SmallStrings strings = new SmallStrings();
  private byte[] b;
  private int pos;
  private int end;
  private EventBuffer out;
  private int skipped;

  /**
   * Reads {@code payload[off, off + len)} into {@code into}.
   *
   * @return true if the payload was read (then {@code into} holds the batch); false if the general decoder must
   *     handle it (then {@code into} holds nothing usable)
   */
  public boolean read(byte[] payload, int off, int len, EventBuffer into) {
    b = payload;
    pos = off;
    end = off + len;
    out = into;
    skipped = 0;
    into.clear();
    try {
      envelope();
      return true;
    } catch (RuntimeException bail) { // Bail, or an index we did not foresee: the general decoder decides
      into.clear();
      return false;
    } finally {
      b = null;
      out = null;
    }
  }

  /** Reads a whole payload; see {@link #read(byte[], int, int, EventBuffer)}. */
  public boolean read(byte[] payload, EventBuffer into) {
    return read(payload, 0, payload.length, into);
  }

  // ------------------------------------------------------------------------------------------------------
  // Structure

  private void envelope() {
    int m = peek();
    if (isArray(m)) {
      int n = arrayHeader();
      if (n < 2) {
        throw BAIL;
      }
      double ts = number();
      events();
      boolean hasDp = false;
      int dp = 0;
      if (n >= 3 && !nil()) {
        dp = int32();
        hasDp = true;
      }
      skip(n - Math.min(n, 3));
      out.batch(ts, hasDp, dp, skipped);
    } else if (isMap(m)) {
      int n = mapHeader();
      double ts = Double.NaN;
      boolean sawEvents = false;
      boolean hasDp = false;
      int dp = 0;
      for (int i = 0; i < n; i++) {
        switch (key()) {
          case K_TS -> ts = number();
          case K_EVENTS -> {
            if (sawEvents) {
              throw BAIL; // the general decoder's answer for a repeated key is not worth mirroring
            }
            sawEvents = true;
            events();
          }
          case K_DP, K_ATTN_DP -> {
            if (nil()) {
              hasDp = false;
            } else {
              dp = int32();
              hasDp = true;
            }
          }
          default -> skip(1);
        }
      }
      if (!sawEvents || Double.isNaN(ts)) {
        throw BAIL;
      }
      out.batch(ts, hasDp, dp, skipped);
    } else {
      throw BAIL;
    }
  }

  private void events() {
    int n = arrayHeader();
    for (int i = 0; i < n; i++) {
      int m = peek();
      boolean kept;
      if (isArray(m)) {
        kept = arrayEvent();
      } else if (isMap(m)) {
        kept = mapEvent();
      } else {
        skip(1);
        kept = false;
      }
      if (!kept) {
        skipped++;
      }
    }
  }

  /** A tagged array event; returns false (after consuming it) if its tag is unknown. */
  private boolean arrayEvent() {
    int n = arrayHeader();
    if (n == 0) {
      return false;
    }
    if (!isStr(peek())) {
      skip(n);
      return false;
    }
    int tagLen = strHeader();
    int tag = WireKeyTable.tag(b, pos, tagLen);
    pos += tagLen;
    int read;
    if (tag == WireKeyTable.STORED) {
      int e = out.begin(EventBuffer.STORED);
      if (n > 1) {
        hashes(e);
      }
      if (n > 2) {
        parent(e);
      }
      if (n > 3) {
        tokens(e);
      }
      if (n > 4) {
        out.blockSize(e, nil() ? 0 : int32());
      }
      if (n > 5) {
        nullableInt(e, EventBuffer.LORA_ID);
      }
      if (n > 6) {
        out.medium(e, nullableString());
      }
      if (n > 7) {
        if (isMap(peek())) {
          out.cacheSalt(e, metadataSalt()); // older SGLang: a metadata map where vLLM has lora_name
        } else {
          out.loraName(e, nullableString());
        }
      }
      if (n > 8) {
        extraKeys(e);
      }
      if (n > 9) {
        nullableInt(e, EventBuffer.GROUP);
      }
      if (n > 10) {
        out.specKind(e, nullableString());
      }
      if (n > 11) {
        nullableInt(e, EventBuffer.WINDOW);
      }
      read = Math.min(n, 12);
    } else if (tag == WireKeyTable.REMOVED) {
      int e = out.begin(EventBuffer.REMOVED);
      if (n > 1) {
        hashes(e);
      }
      if (n > 2) {
        out.medium(e, nullableString());
      }
      if (n > 3) {
        nullableInt(e, EventBuffer.GROUP);
      }
      read = Math.min(n, 4);
    } else if (tag == WireKeyTable.CLEARED) {
      out.begin(EventBuffer.CLEARED);
      read = 1;
    } else {
      skip(n - 1);
      return false;
    }
    skip(n - read);
    return true;
  }

  /** A map event with a {@code "type"} key; fields by name, in any order, the last occurrence winning. */
  private boolean mapEvent() {
    int n = mapHeader();
    int e = out.begin(EventBuffer.STORED); // provisional: the type may come last
    int type = -1; // 0 stored, 1 removed, 2 cleared, 3 unknown
    for (int i = 0; i < n; i++) {
      switch (key()) {
        case K_TYPE -> {
          if (!isStr(peek())) {
            skip(1);
            type = 3;
          } else {
            int len = strHeader();
            int t = WireKeyTable.tag(b, pos, len);
            pos += len;
            type = t == WireKeyTable.UNKNOWN ? 3 : t; // STORED 0, REMOVED 1, CLEARED 2
          }
        }
        case K_HASHES -> hashes(e);
        case K_PARENT -> parent(e);
        case K_TOKENS -> tokens(e);
        case K_BLOCK_SIZE -> out.blockSize(e, nil() ? 0 : int32());
        case K_LORA_ID -> nullableInt(e, EventBuffer.LORA_ID);
        case K_MEDIUM -> out.medium(e, nullableString());
        case K_LORA_NAME -> out.loraName(e, nullableString());
        case K_EXTRA -> extraKeys(e);
        case K_GROUP -> nullableInt(e, EventBuffer.GROUP);
        case K_KIND -> out.specKind(e, nullableString());
        case K_WINDOW -> nullableInt(e, EventBuffer.WINDOW);
        case K_LOCALITY -> out.locality(e, nullableString());
        case K_OWNERSHIP -> out.ownership(e, nullableString());
        case K_SESSION -> out.session(e, nullableString());
        case K_SALT -> out.cacheSalt(e, nullableString());
        case K_METADATA -> {
          if (isMap(peek())) {
            String s = metadataSalt();
            if (s != null) {
              out.cacheSalt(e, s);
            }
          } else {
            skip(1);
          }
        }
        default -> skip(1);
      }
    }
    switch (type) {
      case 0 -> {
        return true;
      }
      case 1 -> {
        out.retype(e, EventBuffer.REMOVED);
        return true;
      }
      case 2 -> {
        out.retype(e, EventBuffer.CLEARED);
        return true;
      }
      default -> {
        out.dropLast();
        return false;
      }
    }
  }

  private String metadataSalt() {
    int m = mapHeader();
    String salt = null;
    for (int j = 0; j < m; j++) {
      if (key() == K_SALT) {
        salt = nullableString();
      } else {
        skip(1);
      }
    }
    return salt;
  }

  // ------------------------------------------------------------------------------------------------------
  // Fields

  private void hashes(int e) {
    if (nil()) {
      out.hashesDone(e, out.hashTop(), 0);
      return;
    }
    int n = arrayHeader();
    long[] h = out.hashRoom(n);
    int start = out.hashTop();
    for (int i = 0; i < n; i++) {
      h[start + i] = hash();
    }
    out.hashesDone(e, start, n);
  }

  private void parent(int e) {
    if (nil()) {
      out.unflag(e, EventBuffer.PARENT);
    } else {
      out.parent(e, hash());
      out.flag(e, EventBuffer.PARENT);
    }
  }

  /** A block hash: any integer (its two's-complement bits), or {@code bin} (its last 8 bytes, big-endian). */
  private long hash() {
    int m = peek();
    if ((m == 0xCF || m == 0xD3) && pos + 9 <= end) { // uint64 / int64, the usual form: one 8-byte read
      long v = (long) BE_LONG.get(b, pos + 1);
      pos += 9;
      return v;
    }
    if (m >= 0xC4 && m <= 0xC6) {
      pos++;
      int len = m == 0xC4 ? u8() : m == 0xC5 ? u16() : u32();
      need(len);
      int from = len >= 8 ? pos + len - 8 : pos;
      long v = 0;
      for (int i = from; i < pos + len; i++) {
        v = (v << 8) | (b[i] & 0xFF);
      }
      pos += len;
      return v;
    }
    return integer();
  }

  private void tokens(int e) {
    if (nil()) {
      out.tokensDone(e, out.tokenTop(), 0);
      return;
    }
    int n = arrayHeader();
    int[] t = out.tokenRoom(n);
    int start = out.tokenTop();
    byte[] buf = b;
    int p = pos;
    int limit = end;
    int i = 0;
    for (; i < n; i++) {
      if (p + 5 <= limit) {
        // uint16 (0xCD) and uint32 (0xCE) without a branch between them: a large vocabulary mixes the two at
        // random, so that branch was mispredicted about every other token. Four bytes are read either way and a
        // uint16 keeps the upper two.
        int u = (buf[p] & 0xFF) - 0xCD; // 0: uint16, 1: uint32
        if ((u & ~1) == 0) {
          int v = (int) BE_INT.get(buf, p + 1) >>> ((1 - u) << 4);
          if (v < 0) {
            throw BAIL; // uint32 beyond int: the general decoder rejects the batch
          }
          t[start + i] = v;
          p += 3 + (u << 1);
          continue;
        }
      }
      if (p >= limit) {
        throw BAIL;
      }
      int m = buf[p] & 0xFF;
      if (m <= 0x7F) { // positive fixint: most token ids below 128 are rare, but cheap to take first
        t[start + i] = m;
        p++;
      } else if (m == 0xCD) { // uint16: the common case for vocabularies up to 65k
        if (p + 3 > limit) {
          throw BAIL;
        }
        t[start + i] = ((buf[p + 1] & 0xFF) << 8) | (buf[p + 2] & 0xFF);
        p += 3;
      } else if (m == 0xCE) { // uint32: larger vocabularies
        if (p + 5 > limit) {
          throw BAIL;
        }
        int v = ((buf[p + 1] & 0xFF) << 24) | ((buf[p + 2] & 0xFF) << 16) | ((buf[p + 3] & 0xFF) << 8)
            | (buf[p + 4] & 0xFF);
        if (v < 0) {
          throw BAIL; // beyond int: the general decoder rejects the batch
        }
        t[start + i] = v;
        p += 5;
      } else if (m == 0xCC) {
        if (p + 2 > limit) {
          throw BAIL;
        }
        t[start + i] = buf[p + 1] & 0xFF;
        p += 2;
      } else {
        pos = p;
        if (!isInt(m)) {
          // e.g. EAGLE bigram pairs: the batch still applies, these tokens cannot be hashed
          out.flag(e, EventBuffer.TOKENS_UNSUPPORTED);
          skip(n - i);
          out.tokensDone(e, start, i);
          return;
        }
        t[start + i] = int32();
        p = pos;
      }
    }
    pos = p;
    out.tokensDone(e, start, n);
  }

  private void nullableInt(int e, int flag) {
    if (nil()) {
      out.unflag(e, flag);
      return;
    }
    int v = int32();
    switch (flag) {
      case EventBuffer.LORA_ID -> out.loraId(e, v);
      case EventBuffer.GROUP -> out.group(e, v);
      default -> out.window(e, v);
    }
    out.flag(e, flag);
  }

  private String nullableString() {
    if (nil()) {
      return null;
    }
    int len = strHeader();
    String s = strings.get(b, pos, len);
    pos += len;
    return s;
  }

  /**
   * Extra keys as the general decoder reads them: nil, or per block nil or a tuple of items (a non-tuple item
   * is kept as a one-item tuple). All-nil lists, vLLM's usual shape, are recorded without building a list.
   */
  private void extraKeys(int e) {
    if (nil()) {
      out.extra(e, null);
      return;
    }
    int n = arrayHeader();
    int start = pos;
    boolean allNil = true;
    for (int i = 0; i < n; i++) {
      if (!nil()) {
        allNil = false;
        break;
      }
    }
    if (allNil) {
      out.extraNils(e, n);
      return;
    }
    pos = start;
    List<List<Object>> list = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      if (nil()) {
        list.add(null);
      } else if (isArray(peek())) {
        list.add(genericList(1));
      } else {
        List<Object> one = new ArrayList<>(1);
        one.add(generic(1));
        list.add(one);
      }
    }
    out.extra(e, list);
  }

  private List<Object> genericList(int depth) {
    int n = arrayHeader();
    List<Object> l = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      l.add(generic(depth + 1));
    }
    return l;
  }

  /** A value inside extra keys, of the kinds engines send; anything else goes to the general decoder. */
  private Object generic(int depth) {
    if (depth > MAX_DEPTH) {
      throw BAIL;
    }
    int m = peek();
    if (m == 0xC0) {
      pos++;
      return null;
    }
    if (m == 0xC2 || m == 0xC3) {
      pos++;
      return m == 0xC3;
    }
    if (isInt(m)) {
      return integer();
    }
    if (isStr(m)) {
      int len = strHeader();
      need(len);
      for (int i = pos; i < pos + len; i++) {
        if (b[i] < 0) {
          throw BAIL; // non-ASCII: leave UTF-8 decoding corner cases to msgpack-java
        }
      }
      String s = new String(b, pos, len, StandardCharsets.US_ASCII);
      pos += len;
      return s;
    }
    if (m >= 0xC4 && m <= 0xC6) {
      pos++;
      int len = m == 0xC4 ? u8() : m == 0xC5 ? u16() : u32();
      need(len);
      byte[] v = Arrays.copyOfRange(b, pos, pos + len);
      pos += len;
      return v;
    }
    if (isArray(m)) {
      return genericList(depth);
    }
    throw BAIL;
  }

  private double number() {
    int m = peek();
    if (m == 0xCB) {
      pos++;
      need(8);
      double v = Double.longBitsToDouble(be(8));
      return v;
    }
    if (m == 0xCA) {
      pos++;
      need(4);
      return Float.intBitsToFloat((int) be(4));
    }
    if (m == 0xCF) {
      long v = integer();
      return (double) (v >>> 1) * 2.0 + (v & 1);
    }
    if (isInt(m)) {
      return integer();
    }
    throw BAIL;
  }

  // ------------------------------------------------------------------------------------------------------
  // Primitives (every read is bounds-checked; a failed check abandons the fast path)

  private int peek() {
    if (pos >= end) {
      throw BAIL;
    }
    return b[pos] & 0xFF;
  }

  private int u8() {
    if (pos >= end) {
      throw BAIL;
    }
    return b[pos++] & 0xFF;
  }

  private int u16() {
    need(2);
    int v = ((b[pos] & 0xFF) << 8) | (b[pos + 1] & 0xFF);
    pos += 2;
    return v;
  }

  /** A 32-bit length; beyond what the payload can hold it bails (every element takes at least a byte). */
  private int u32() {
    need(4);
    long v = be(4);
    if (v > end - pos) {
      throw BAIL;
    }
    return (int) v;
  }

  /** The next {@code n} bytes, big-endian, consumed. */
  private long be(int n) {
    long v = 0;
    for (int i = 0; i < n; i++) {
      v = (v << 8) | (b[pos + i] & 0xFF);
    }
    pos += n;
    return v;
  }

  private void need(int n) {
    if (n < 0 || n > end - pos) {
      throw BAIL;
    }
  }

  private boolean nil() {
    if (peek() == 0xC0) {
      pos++;
      return true;
    }
    return false;
  }

  private static boolean isArray(int m) {
    return (m & 0xF0) == 0x90 || m == 0xDC || m == 0xDD;
  }

  private static boolean isMap(int m) {
    return (m & 0xF0) == 0x80 || m == 0xDE || m == 0xDF;
  }

  private static boolean isStr(int m) {
    return (m & 0xE0) == 0xA0 || (m >= 0xD9 && m <= 0xDB);
  }

  private static boolean isInt(int m) {
    return m <= 0x7F || m >= 0xE0 || (m >= 0xCC && m <= 0xD3);
  }

  private int arrayHeader() {
    int m = u8();
    int n;
    if ((m & 0xF0) == 0x90) {
      n = m & 0x0F;
    } else if (m == 0xDC) {
      n = u16();
    } else if (m == 0xDD) {
      n = u32();
    } else {
      throw BAIL;
    }
    if (n > end - pos) {
      throw BAIL;
    }
    return n;
  }

  private int mapHeader() {
    int m = u8();
    int n;
    if ((m & 0xF0) == 0x80) {
      n = m & 0x0F;
    } else if (m == 0xDE) {
      n = u16();
    } else if (m == 0xDF) {
      n = u32();
    } else {
      throw BAIL;
    }
    if (n > (end - pos) / 2) {
      throw BAIL;
    }
    return n;
  }

  private int strHeader() {
    int m = u8();
    int len;
    if ((m & 0xE0) == 0xA0) {
      len = m & 0x1F;
    } else if (m == 0xD9) {
      len = u8();
    } else if (m == 0xDA) {
      len = u16();
    } else if (m == 0xDB) {
      len = u32();
    } else {
      throw BAIL;
    }
    need(len);
    return len;
  }

  /** Any msgpack integer as its two's-complement bits (uint64 at or above 2^63 included). */
  private long integer() {
    int m = u8();
    if (m <= 0x7F) {
      return m;
    }
    if (m >= 0xE0) {
      return (byte) m;
    }
    switch (m) {
      case 0xCC -> {
        need(1);
        return be(1);
      }
      case 0xCD -> {
        need(2);
        return be(2);
      }
      case 0xCE -> {
        need(4);
        return be(4);
      }
      case 0xCF -> {
        need(8);
        return be(8);
      }
      case 0xD0 -> {
        need(1);
        return (byte) be(1);
      }
      case 0xD1 -> {
        need(2);
        return (short) be(2);
      }
      case 0xD2 -> {
        need(4);
        return (int) be(4);
      }
      case 0xD3 -> {
        need(8);
        return be(8);
      }
      default -> throw BAIL;
    }
  }

  /** An integer that must fit an {@code int}, as msgpack-java's {@code unpackInt} requires. */
  private int int32() {
    boolean unsigned64 = peek() == 0xCF;
    long v = integer();
    if (unsigned64 && v < 0 || v != (int) v) {
      throw BAIL;
    }
    return (int) v;
  }

  /** Reads a map key: its code, or {@link #K_UNKNOWN} for an unknown or non-string key (whose value the caller skips). */
  private int key() {
    if (!isStr(peek())) {
      skip(1);
      return K_UNKNOWN;
    }
    int len = strHeader();
    int at = pos;
    pos += len;
    return WireKeyTable.key(b, at, len);
  }

  /** Skips {@code count} values of any type (bounded by the payload: each value takes at least one byte). */
  private void skip(long count) {
    long remaining = count;
    while (remaining > 0) {
      if (remaining > end - pos) {
        throw BAIL;
      }
      remaining--;
      int m = u8();
      if (m <= 0x7F || m >= 0xE0 || m == 0xC0 || m == 0xC2 || m == 0xC3) {
        continue;
      }
      if ((m & 0xF0) == 0x80) {
        remaining += 2L * (m & 0x0F);
      } else if ((m & 0xF0) == 0x90) {
        remaining += m & 0x0F;
      } else if ((m & 0xE0) == 0xA0) {
        advance(m & 0x1F);
      } else {
        switch (m) {
          case 0xC4, 0xD9 -> advance(u8());
          case 0xC5, 0xDA -> advance(u16());
          case 0xC6, 0xDB -> advance(u32());
          case 0xC7 -> advance(u8() + 1);
          case 0xC8 -> advance(u16() + 1);
          case 0xC9 -> advance(u32() + 1L);
          case 0xCA, 0xCE, 0xD2 -> advance(4);
          case 0xCB, 0xCF, 0xD3 -> advance(8);
          case 0xCC, 0xD0 -> advance(1);
          case 0xCD, 0xD1 -> advance(2);
          case 0xD4 -> advance(2);
          case 0xD5 -> advance(3);
          case 0xD6 -> advance(5);
          case 0xD7 -> advance(9);
          case 0xD8 -> advance(17);
          case 0xDC -> remaining += u16();
          case 0xDD -> remaining += u32();
          case 0xDE -> remaining += 2L * u16();
          case 0xDF -> remaining += 2L * u32();
          default -> throw BAIL; // 0xC1, never used
        }
      }
    }
  }

  private void advance(long n) {
    if (n < 0 || n > end - pos) {
      throw BAIL;
    }
    pos += (int) n;
  }
}
