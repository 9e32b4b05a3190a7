package dev.kvrouter.index.wire;

import static dev.kvrouter.index.wire.WireKeys.*;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.core.buffer.ArrayBufferInput;
import org.msgpack.value.ValueType;

/**
 * Decodes vLLM and SGLang KV event batches (msgpack) into {@link EventBatch} records.
 *
 * <p>Accepts every generation of the format: events as tagged arrays (vLLM up to 0.23, older SGLang) or as
 * maps with a {@code "type"} key (vLLM since PR #42892, newer SGLang), dispatched per event on the msgpack
 * type; the envelope as an array {@code [ts, events, dp_rank]} (2 or 3 elements) or a map. Block hashes may
 * be any msgpack integer (uint64 at or above 2^63 included) or {@code bin} (last 8 bytes, big-endian). Unknown
 * map keys and extra trailing array elements are ignored; missing trailing elements read as {@code null};
 * unknown event tags are skipped and counted. Anything else wrong throws {@link MalformedEventException}.
 *
 * <p>Not thread-safe: one decoder per thread (the subscriber keeps one per shard). It reuses its unpacker and
 * scratch buffers, so a decode allocates only the records and the arrays the decoded data needs.
 */
public final class EventDecoder {

  /** Nesting bound for generic values in {@code extra_keys}, so a hostile payload cannot overflow the stack. */
  private static final int MAX_DEPTH = 8;

  /** Open-addressing table from {@link #keyHash} to key code + 1 (0 = empty), so a key costs one comparison. */
  private static final int[] KEY_TABLE = new int[128];

  static {
    for (int i = 0; i < KEYS.length; i++) {
      int h = keyHash(KEYS[i], KEYS[i].length);
      while (KEY_TABLE[h] != 0) {
        h = (h + 1) & (KEY_TABLE.length - 1);
      }
      KEY_TABLE[h] = i + 1;
    }
  }

  private static int keyHash(byte[] b, int len) {
    int h = len * 31 + (len > 0 ? b[0] * 7 + b[len - 1] * 13 + b[len >> 1] : 0);
    return (h ^ (h >>> 7)) & (KEY_TABLE.length - 1);
  }

  private final ArrayBufferInput input = new ArrayBufferInput(new byte[0]);
  private final MessageUnpacker in = MessagePack.DEFAULT_UNPACKER_CONFIG.newUnpacker(input);
  private final SmallStrings strings = new SmallStrings();
  private byte[] scratch = new byte[64];
  private byte[] payload;
  private int payloadOff;
  private int payloadLength;
  private int skipped;

  // Per-event fields of the map form (reset before each map event).
  private long[] fHashes;
  private Long fParent;
  private int[] fTokens;
  private boolean fTokensUnsupported;
  private int fBlockSize;
  private Integer fLoraId;
  private String fMedium;
  private String fLoraName;
  private List<List<Object>> fExtra;
  private Integer fGroup;
  private String fKind;
  private Integer fWindow;
  private String fLocality;
  private String fOwnership;
  private String fSession;
  private String fSalt;

  /** Decodes a whole payload (the third ZMQ frame). */
  public EventBatch decode(byte[] payload) {
    return decode(payload, 0, payload.length);
  }

  /** Decodes {@code payload[off, off + len)}. */
  public EventBatch decode(byte[] payload, int off, int len) {
    try {
      input.reset(payload, off, len);
      in.reset(input);
      this.payload = payload;
      payloadOff = off;
      payloadLength = len;
      skipped = 0;
      MessageFormat f = in.getNextFormat();
      if (f.getValueType() == ValueType.ARRAY) {
        return arrayEnvelope();
      }
      if (f.getValueType() == ValueType.MAP) {
        return mapEnvelope();
      }
      throw new MalformedEventException("batch is a msgpack " + f.getValueType() + ", expected an array or a map");
    } catch (MalformedEventException e) {
      throw e;
    } catch (IOException | RuntimeException e) {
      throw new MalformedEventException("undecodable batch: " + e.getClass().getSimpleName() + ": " + e.getMessage(),
          e);
    }
  }

  private EventBatch arrayEnvelope() throws IOException {
    int n = in.unpackArrayHeader();
    if (n < 2) {
      throw new MalformedEventException("batch array has " + n + " elements, expected at least 2");
    }
    double ts = readNumber();
    List<KvEvent> events = readEvents();
    Integer dp = n >= 3 ? readNullableInt() : null;
    in.skipValue(n - Math.min(n, 3));
    return new EventBatch(ts, events, dp, skipped);
  }

  private EventBatch mapEnvelope() throws IOException {
    int n = in.unpackMapHeader();
    double ts = Double.NaN;
    List<KvEvent> events = null;
    Integer dp = null;
    for (int i = 0; i < n; i++) {
      int key = readKey();
      switch (key) {
        case K_TS -> ts = readNumber();
        case K_EVENTS -> events = readEvents();
        case K_DP, K_ATTN_DP -> dp = readNullableInt();
        default -> in.skipValue();
      }
    }
    if (events == null || Double.isNaN(ts)) {
      throw new MalformedEventException("map batch lacks 'ts' or 'events'");
    }
    return new EventBatch(ts, events, dp, skipped);
  }

  private List<KvEvent> readEvents() throws IOException {
    int n = checkedLength(in.unpackArrayHeader());
    List<KvEvent> events = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      ValueType t = in.getNextFormat().getValueType();
      KvEvent e;
      if (t == ValueType.ARRAY) {
        e = arrayEvent();
      } else if (t == ValueType.MAP) {
        e = mapEvent();
      } else {
        in.skipValue();
        e = null;
      }
      if (e == null) {
        skipped++;
      } else {
        events.add(e);
      }
    }
    return events;
  }

  /** A tagged array event; returns null (after consuming it) if the tag is unknown. */
  private KvEvent arrayEvent() throws IOException {
    int n = in.unpackArrayHeader();
    if (n == 0) {
      return null;
    }
    if (in.getNextFormat().getValueType() != ValueType.STRING) {
      in.skipValue(n);
      return null;
    }
    int tagLen = readRawString();
    int read = 1;
    KvEvent result;
    if (equalsScratch(T_STORED, tagLen)) {
      long[] hashes = n > 1 ? readHashes() : new long[0];
      Long parent = n > 2 ? readNullableHash() : null;
      fTokensUnsupported = false;
      int[] tokens = n > 3 ? readTokens() : new int[0];
      int blockSize = n > 4 ? readIntOrNil(0) : 0;
      Integer loraId = n > 5 ? readNullableInt() : null;
      String medium = n > 6 ? readNullableString() : null;
      String loraName = null;
      String salt = null;
      if (n > 7) {
        // Slot 7 is lora_name (str) in vLLM but a metadata map ({"cache_salt": ...}) in older SGLang.
        ValueType t = in.getNextFormat().getValueType();
        if (t == ValueType.MAP) {
          salt = readMetadataSalt();
        } else {
          loraName = readNullableString();
        }
      }
      List<List<Object>> extra = n > 8 ? readExtraKeys() : null;
      Integer group = n > 9 ? readNullableInt() : null;
      String kind = n > 10 ? readNullableString() : null;
      Integer window = n > 11 ? readNullableInt() : null;
      read = Math.min(n, 12);
      result = new BlockStored(hashes, parent, fTokensUnsupported ? null : tokens, blockSize, loraId, medium,
          loraName, extra, group, kind, window, null, null, null, salt);
    } else if (equalsScratch(T_REMOVED, tagLen)) {
      long[] hashes = n > 1 ? readHashes() : new long[0];
      String medium = n > 2 ? readNullableString() : null;
      Integer group = n > 3 ? readNullableInt() : null;
      read = Math.min(n, 4);
      result = new BlockRemoved(hashes, medium, group, null, null);
    } else if (equalsScratch(T_CLEARED, tagLen)) {
      result = AllBlocksCleared.INSTANCE;
    } else {
      result = null;
    }
    in.skipValue(n - read);
    return result;
  }

  /** A map event with a {@code "type"} key; fields by name, in any order. */
  private KvEvent mapEvent() throws IOException {
    int n = in.unpackMapHeader();
    int type = -1; // 0 stored, 1 removed, 2 cleared, 3 unknown
    fHashes = null;
    fParent = null;
    fTokens = null;
    fTokensUnsupported = false;
    fBlockSize = 0;
    fLoraId = null;
    fMedium = null;
    fLoraName = null;
    fExtra = null;
    fGroup = null;
    fKind = null;
    fWindow = null;
    fLocality = null;
    fOwnership = null;
    fSession = null;
    fSalt = null;
    for (int i = 0; i < n; i++) {
      int key = readKey();
      switch (key) {
        case K_TYPE -> {
          if (in.getNextFormat().getValueType() != ValueType.STRING) {
            in.skipValue();
            type = 3;
          } else {
            int len = readRawString();
            type = equalsScratch(T_STORED, len) ? 0 : equalsScratch(T_REMOVED, len) ? 1
                : equalsScratch(T_CLEARED, len) ? 2 : 3;
          }
        }
        case K_HASHES -> fHashes = readHashes();
        case K_PARENT -> fParent = readNullableHash();
        case K_TOKENS -> fTokens = readTokens();
        case K_BLOCK_SIZE -> fBlockSize = readIntOrNil(0);
        case K_LORA_ID -> fLoraId = readNullableInt();
        case K_MEDIUM -> fMedium = readNullableString();
        case K_LORA_NAME -> fLoraName = readNullableString();
        case K_EXTRA -> fExtra = readExtraKeys();
        case K_GROUP -> fGroup = readNullableInt();
        case K_KIND -> fKind = readNullableString();
        case K_WINDOW -> fWindow = readNullableInt();
        case K_LOCALITY -> fLocality = readNullableString();
        case K_OWNERSHIP -> fOwnership = readNullableString();
        case K_SESSION -> fSession = readNullableString();
        case K_SALT -> fSalt = readNullableString();
        case K_METADATA -> {
          if (in.getNextFormat().getValueType() == ValueType.MAP) {
            String s = readMetadataSalt();
            if (s != null) {
              fSalt = s;
            }
          } else {
            in.skipValue();
          }
        }
        default -> in.skipValue();
      }
    }
    long[] hashes = fHashes != null ? fHashes : new long[0];
    return switch (type) {
      case 0 -> new BlockStored(hashes, fParent, fTokensUnsupported ? null : fTokens != null ? fTokens : new int[0],
          fBlockSize, fLoraId, fMedium, fLoraName, fExtra, fGroup, fKind, fWindow, fLocality, fOwnership, fSession,
          fSalt);
      case 1 -> new BlockRemoved(hashes, fMedium, fGroup, fLocality, fOwnership);
      case 2 -> AllBlocksCleared.INSTANCE;
      default -> null;
    };
  }

  private String readMetadataSalt() throws IOException {
    int m = in.unpackMapHeader();
    String salt = null;
    for (int j = 0; j < m; j++) {
      int key = readKey();
      if (key == K_SALT) {
        salt = readNullableString();
      } else {
        in.skipValue();
      }
    }
    return salt;
  }

  private long[] readHashes() throws IOException {
    if (in.tryUnpackNil()) {
      return new long[0];
    }
    int n = checkedLength(in.unpackArrayHeader());
    long[] out = new long[n];
    // Fast path: integers parsed straight from the payload; anything else (bin digests) element by element.
    int start = payloadOff + (int) in.getTotalReadBytes();
    int pos = start;
    int i = 0;
    for (; i < n; i++) {
      int next = fastInt(pos);
      if (next < 0) {
        break;
      }
      out[i] = fastValue;
      pos = next;
    }
    advance(pos - start);
    for (; i < n; i++) {
      out[i] = readHash();
    }
    return out;
  }

  private Long readNullableHash() throws IOException {
    return in.tryUnpackNil() ? null : readHash();
  }

  /** A block hash as the two's-complement bit pattern of the engine's value. */
  private long readHash() throws IOException {
    MessageFormat f = in.getNextFormat();
    switch (f) {
      case UINT64 -> {
        // unpackLong() rejects values >= 2^63; read the 8 payload bytes after the 0xcf marker ourselves.
        ensureScratch(9);
        in.readPayload(scratch, 0, 9);
        return bigEndian(scratch, 1, 8);
      }
      case BIN8, BIN16, BIN32 -> {
        int len = in.unpackBinaryHeader();
        checkedLength(len);
        ensureScratch(len);
        in.readPayload(scratch, 0, len);
        // vLLM's int form is int.from_bytes(digest, "big") & (2**64 - 1): the last 8 bytes; shorter is left-padded.
        return len >= 8 ? bigEndian(scratch, len - 8, 8) : bigEndian(scratch, 0, len);
      }
      default -> {
        if (f.getValueType() != ValueType.INTEGER) {
          throw new MalformedEventException("block hash is a msgpack " + f.getValueType());
        }
        return in.unpackLong();
      }
    }
  }

  private int[] readTokens() throws IOException {
    if (in.tryUnpackNil()) {
      return new int[0];
    }
    int n = checkedLength(in.unpackArrayHeader());
    int[] out = new int[n];
    // Token arrays are most of a payload: parse them straight from the bytes (the unpacker is advanced past
    // them afterwards), falling back to the unpacker at the first element that is not a plain integer.
    int start = payloadOff + (int) in.getTotalReadBytes();
    int pos = start;
    int i = 0;
    for (; i < n; i++) {
      int next = fastInt(pos);
      if (next < 0 || fastValue != (int) fastValue) {
        break;
      }
      out[i] = (int) fastValue;
      pos = next;
    }
    advance(pos - start);
    for (; i < n; i++) {
      MessageFormat f = in.getNextFormat();
      if (f.getValueType() != ValueType.INTEGER) {
        // e.g. EAGLE bigram pairs: keep decoding the batch, but the applier cannot hash these tokens.
        fTokensUnsupported = true;
        in.skipValue(n - i);
        return out;
      }
      out[i] = in.unpackInt();
    }
    return out;
  }

  /** Value of the last {@link #fastInt} call. */
  private long fastValue;

  /**
   * Parses the msgpack integer at absolute offset {@code pos} of the payload into {@link #fastValue}; returns
   * the offset after it, or -1 if the value there is not an integer or runs past the payload.
   */
  private int fastInt(int pos) {
    byte[] b = payload;
    int end = payloadOff + payloadLength;
    if (pos >= end) {
      return -1;
    }
    int m = b[pos] & 0xFF;
    if (m <= 0x7F) {
      fastValue = m;
      return pos + 1;
    }
    if (m >= 0xE0) {
      fastValue = (byte) m;
      return pos + 1;
    }
    int len = switch (m) {
      case 0xCC, 0xD0 -> 1;
      case 0xCD, 0xD1 -> 2;
      case 0xCE, 0xD2 -> 4;
      case 0xCF, 0xD3 -> 8;
      default -> -1;
    };
    if (len < 0 || pos + 1 + len > end) {
      return -1;
    }
    long v = 0;
    for (int k = 1; k <= len; k++) {
      v = (v << 8) | (b[pos + k] & 0xFF);
    }
    if (m >= 0xD0) {
      // signed forms: sign-extend from len bytes
      int shift = 64 - 8 * len;
      v = (v << shift) >> shift;
    }
    fastValue = v;
    return pos + 1 + len;
  }

  /** Moves the unpacker forward by {@code n} bytes already parsed by hand. */
  private void advance(int n) throws IOException {
    if (n > 0) {
      ensureScratch(n);
      in.readPayload(scratch, 0, n);
    }
  }

  private List<List<Object>> readExtraKeys() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    int n = checkedLength(in.unpackArrayHeader());
    List<List<Object>> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      if (in.tryUnpackNil()) {
        out.add(null);
      } else if (in.getNextFormat().getValueType() == ValueType.ARRAY) {
        out.add(readList(1));
      } else {
        // Not a tuple: keep the single item so the applier sees it.
        List<Object> one = new ArrayList<>(1);
        one.add(readGeneric(1));
        out.add(one);
      }
    }
    return out;
  }

  private List<Object> readList(int depth) throws IOException {
    int n = checkedLength(in.unpackArrayHeader());
    List<Object> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(readGeneric(depth + 1));
    }
    return out;
  }

  private Object readGeneric(int depth) throws IOException {
    if (depth > MAX_DEPTH) {
      throw new MalformedEventException("extra_keys nested deeper than " + MAX_DEPTH);
    }
    MessageFormat f = in.getNextFormat();
    return switch (f.getValueType()) {
      case NIL -> {
        in.unpackNil();
        yield null;
      }
      case BOOLEAN -> in.unpackBoolean();
      case INTEGER -> f == MessageFormat.UINT64 ? readHash() : in.unpackLong();
      case FLOAT -> in.unpackDouble();
      case STRING -> in.unpackString();
      case BINARY -> {
        int len = checkedLength(in.unpackBinaryHeader());
        yield in.readPayload(len);
      }
      case ARRAY -> readList(depth);
      default -> {
        in.skipValue();
        yield null;
      }
    };
  }

  private double readNumber() throws IOException {
    MessageFormat f = in.getNextFormat();
    if (f.getValueType() == ValueType.FLOAT) {
      return in.unpackDouble();
    }
    if (f.getValueType() == ValueType.INTEGER) {
      if (f == MessageFormat.UINT64) {
        long v = readHash();
        return (double) (v >>> 1) * 2.0 + (v & 1);
      }
      return in.unpackLong();
    }
    throw new MalformedEventException("batch ts is a msgpack " + f.getValueType());
  }

  private Integer readNullableInt() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    return in.unpackInt();
  }

  private int readIntOrNil(int dflt) throws IOException {
    return in.tryUnpackNil() ? dflt : in.unpackInt();
  }

  private String readNullableString() throws IOException {
    if (in.tryUnpackNil()) {
      return null;
    }
    int len = readRawString();
    return strings.get(scratch, 0, len);
  }

  /** Reads a str header and its bytes into {@code scratch}; returns the length. */
  private int readRawString() throws IOException {
    int len = checkedLength(in.unpackRawStringHeader());
    ensureScratch(len);
    in.readPayload(scratch, 0, len);
    return len;
  }

  /** Reads a map key and returns its code in {@link WireKeys#KEYS}, or -1 for an unknown (or non-string) key. */
  private int readKey() throws IOException {
    if (in.getNextFormat().getValueType() != ValueType.STRING) {
      in.skipValue();
      return -1;
    }
    int len = readRawString();
    for (int h = keyHash(scratch, len); ; h = (h + 1) & (KEY_TABLE.length - 1)) {
      int code = KEY_TABLE[h] - 1;
      if (code < 0) {
        return -1;
      }
      if (equalsScratch(KEYS[code], len)) {
        return code;
      }
    }
  }

  private boolean equalsScratch(byte[] expected, int len) {
    return expected.length == len && Arrays.equals(expected, 0, len, scratch, 0, len);
  }

  /** A length header can never exceed the payload: each element takes at least one byte. */
  private int checkedLength(int n) {
    if (n < 0 || n > payloadLength) {
      throw new MalformedEventException("length " + n + " exceeds the payload (" + payloadLength + " bytes)");
    }
    return n;
  }

  private void ensureScratch(int n) {
    if (scratch.length < n) {
      scratch = new byte[Math.max(n, scratch.length * 2)];
    }
  }

  private static long bigEndian(byte[] b, int off, int len) {
    long v = 0;
    for (int i = 0; i < len; i++) {
      v = (v << 8) | (b[off + i] & 0xFF);
    }
    return v;
  }
}
