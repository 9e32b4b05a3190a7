package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import dev.kvrouter.extproc.request.MultimodalItem.Modality;
import dev.kvrouter.extproc.request.RequestBodyParser.BadRequest;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import net.openhft.hashing.LongHashFunction;

/**
 * Reads the content parts of chat messages and identifies their media items the way vLLM's
 * {@code _parse_chat_message_content_mm_part} classifies them: a known {@code type} without a {@code uuid} decides;
 * otherwise (no type, or a uuid present) the first media key present does ({@code image_url}, {@code image_pil},
 * {@code image_embeds}, {@code audio_embeds}, {@code video_embeds}, {@code prompt_embeds}, {@code audio_url},
 * {@code input_audio}, {@code video_url}, {@code tool_reference}).
 *
 * <p>Media payloads (URLs, base64 data) never become strings: a payload without escapes is hashed straight from
 * the body's bytes (a JSON string without escapes is the UTF-8 of its value) and Jackson skips the token without
 * decoding it; only a payload with escapes is decoded first. Either way the hash is XXH3-64 of the value's UTF-8
 * bytes. In the message the payload is replaced by the item's identifier.
 *
 * <p>One instance per body, used by one thread.
 */
final class MediaParts {

  /** Seed of content hashes ("kvr1mm" in ASCII); changing it changes every derived media identifier. */
  static final long CONTENT_SEED = 0x6B7672316D6DL;
  private static final LongHashFunction CONTENT_HASH = LongHashFunction.xx3(CONTENT_SEED);

  /** Part keys whose values may carry media payloads. */
  private static final Set<String> MEDIA_KEYS = Set.of("image_url", "image_pil", "image_embeds", "audio_embeds",
      "video_embeds", "audio_url", "input_audio", "video_url", "data");
  private static final String[] DETECTION_ORDER = {"image_url", "image_pil", "image_embeds", "audio_embeds",
      "video_embeds", "prompt_embeds", "audio_url", "input_audio", "video_url", "tool_reference"};
  private static final Set<String> TEXT_TYPES =
      Set.of("text", "input_text", "output_text", "refusal", "thinking", "tool_reference");

  /** A media payload string seen only as its hash. */
  private record Payload(long hash) {}

  private final byte[] body;
  private final int length;
  private final List<MultimodalItem> items = new ArrayList<>();
  private final List<MultimodalItem> pending = new ArrayList<>();
  String unreproducible;

  /** @param body the request body the parser reads (for hashing payload bytes in place) */
  MediaParts(byte[] body, int length) {
    this.body = body;
    this.length = length;
  }

  /**
   * A message's {@code content} key begins: a repeated key replaces the earlier one, so its items and any reason its
   * parts gave are forgotten.
   *
   * @param unreproducibleBefore the reason as it was when the message began
   */
  void startContent(String unreproducibleBefore) {
    pending.clear();
    unreproducible = unreproducibleBefore;
  }

  /** The media items and reason of one parts array, held until its item shows whether they reach the template. */
  record Section(List<MultimodalItem> items, String unreproducible) {}

  /** Takes the parts read since the message began out of it, and the reason back to {@code unreproducibleBefore}. */
  Section takeSection(String unreproducibleBefore) {
    Section s = new Section(List.copyOf(pending), unreproducible);
    pending.clear();
    unreproducible = unreproducibleBefore;
    return s;
  }

  /** Makes a taken section the message's content again. */
  void restore(Section s) {
    pending.addAll(s.items());
    unreproducible = s.unreproducible();
  }

  void endMessage() {
    for (MultimodalItem it : pending) {
      items.add(new MultimodalItem(items.size(), it.modality(), it.identifier(), it.clientUuid(), it.message(),
          it.part()));
    }
    pending.clear();
  }

  List<MultimodalItem> items() {
    return List.copyOf(items);
  }

  /** Reads the parts array whose {@code START_ARRAY} is current. */
  List<Object> readParts(JsonParser p, int message) throws IOException, BadRequest {
    return readParts(p, message, "messages[" + message + "].content");
  }

  /**
   * Reads the parts array whose {@code START_ARRAY} is current, naming it {@code path} in errors (a Responses input
   * item's {@code input[i].content} or {@code input[i].output}).
   */
  List<Object> readParts(JsonParser p, int message, String path) throws IOException, BadRequest {
    List<Object> parts = new ArrayList<>();
    JsonToken t;
    int j = 0;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (t == JsonToken.VALUE_STRING) {
        parts.add(p.getText());
      } else if (t == JsonToken.START_OBJECT) {
        parts.add(readPart(p, message, j, path));
      } else {
        String at = path + "[" + j + "]";
        throw RequestBodyParser.bad("`" + at + "` must be a string or an object", at);
      }
      j++;
    }
    return Collections.unmodifiableList(parts);
  }

  private Map<String, Object> readPart(JsonParser p, int message, int index, String path)
      throws IOException, BadRequest {
    Map<String, Object> part = new LinkedHashMap<>();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String k = p.currentName();
      JsonToken v = p.nextToken();
      part.put(k, MEDIA_KEYS.contains(k) ? readMedia(p, v, k) : JsonValues.read(p, v));
    }
    Object type = part.get("type");
    Object uuid = part.get("uuid");
    String effective;
    if (type instanceof String s && RequestBodyParser.KNOWN_PART_TYPES.contains(s) && uuid == null) {
      effective = s;
    } else if (type == null || uuid != null) {
      effective = detect(part);
      if (effective == null) {
        if (type instanceof String s && TEXT_TYPES.contains(s)) {
          effective = s; // a stray uuid on a text part: the engine decides, the router reads it as text
        } else {
          String at = path + "[" + index + "].type";
          throw RequestBodyParser.bad("`" + at + "` is missing and the part holds no media", at);
        }
      }
    } else if (!(type instanceof String)) {
      String at = path + "[" + index + "].type";
      throw RequestBodyParser.bad("`" + at + "` must be a string", at);
    } else {
      effective = (String) type; // a type this router does not know: route by load, let the engine judge it
      unreproducible = "unsupported_content_part";
    }
    String identifier = identify(effective, part, uuid, message, index);
    replacePayloads(part, identifier);
    return Collections.unmodifiableMap(part);
  }

  private static String detect(Map<String, Object> part) {
    for (String k : DETECTION_ORDER) {
      if (part.containsKey(k) && (!k.equals("input_audio") || part.get(k) != null)) {
        return k;
      }
    }
    return null;
  }

  /** Records the part's media item, if it is one, and returns the identifier that replaces its payloads. */
  private String identify(String type, Map<String, Object> part, Object uuid, int message, int index) {
    Modality modality;
    Object payload;
    switch (type) {
      case "image_url", "audio_url", "video_url" -> {
        modality = type.equals("image_url") ? Modality.IMAGE : type.equals("audio_url") ? Modality.AUDIO
            : Modality.VIDEO;
        Object v = part.get(type);
        payload = v instanceof Map<?, ?> m ? m.get("url") : v;
      }
      case "input_image" -> {
        modality = Modality.IMAGE;
        payload = part.get("image_url");
      }
      case "image_pil", "image_embeds" -> {
        modality = Modality.IMAGE;
        payload = part.get(type);
      }
      case "audio_embeds" -> {
        modality = Modality.AUDIO;
        payload = part.get(type);
      }
      case "video_embeds" -> {
        modality = Modality.VIDEO;
        payload = part.get(type);
      }
      case "input_audio" -> {
        modality = Modality.AUDIO;
        payload = part.get(type) instanceof Map<?, ?> m ? m.get("data") : null;
      }
      case "prompt_embeds" -> {
        unreproducible = "prompt_embeds";
        return derived("embeds", hash(part.get("data")));
      }
      default -> {
        return derived("payload", 0L);
      }
    }
    String clientUuid = uuidString(uuid);
    if (uuid != null && clientUuid == null) {
      unreproducible = "unsupported_uuid";
    }
    String identifier = clientUuid != null ? clientUuid : derived(modality.key(), hash(payload));
    pending.add(new MultimodalItem(-1, modality, identifier, clientUuid != null, message, index));
    return identifier;
  }

  static String derived(String kind, long hash) {
    String hex = Long.toHexString(hash);
    return MultimodalItem.DERIVED_PREFIX + kind + ":" + "0".repeat(16 - hex.length()) + hex;
  }

  /** vLLM applies {@code str(uuid)}; strings and integers read the same, anything else is not reproduced. */
  private static String uuidString(Object uuid) {
    if (uuid instanceof String s) {
      return s;
    }
    if (uuid instanceof Long || uuid instanceof BigInteger) {
      return uuid.toString();
    }
    return null;
  }

  /** The content hash of a payload: its UTF-8 bytes, or for a map of payloads its entries in key order. */
  private static long hash(Object payload) {
    if (payload instanceof Payload h) {
      return h.hash();
    }
    if (payload instanceof String s) {
      return contentHash(s);
    }
    if (payload instanceof Map<?, ?> m) {
      long h = CONTENT_HASH.hashLong(m.size());
      for (Map.Entry<?, ?> e : new TreeMap<>(m).entrySet()) {
        h = CONTENT_HASH.hashLongs(new long[] {h, contentHash((String) e.getKey()), hash(e.getValue())});
      }
      return h;
    }
    return contentHash("");
  }

  /** XXH3-64, seeded with {@link #CONTENT_SEED}, of the UTF-8 bytes of {@code s}. */
  static long contentHash(String s) {
    return CONTENT_HASH.hashBytes(s.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * Reads the value of media key {@code key}: the payload strings (the value itself, its {@code url} or
   * {@code data}, or any string of an embeddings map) are hashed in place; other values ({@code detail},
   * {@code format}) are read as usual.
   */
  private Object readMedia(JsonParser p, JsonToken t, String key) throws IOException {
    if (t == JsonToken.VALUE_STRING) {
      return payload(p);
    }
    if (t != JsonToken.START_OBJECT) {
      return JsonValues.read(p, t);
    }
    boolean embeds = key.endsWith("_embeds");
    Map<String, Object> m = new LinkedHashMap<>();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String k = p.currentName();
      JsonToken v = p.nextToken();
      boolean isPayload = v == JsonToken.VALUE_STRING && (embeds || k.equals("url") || k.equals("data"));
      m.put(k, isPayload ? payload(p) : JsonValues.read(p, v));
    }
    return m;
  }

  /** Hashes the current string token, from the body's bytes when it has no escapes (leaving it undecoded). */
  private Payload payload(JsonParser p) throws IOException {
    long quote = p.currentTokenLocation().getByteOffset(); // -1 for bodies Jackson does not read as UTF-8
    if (quote >= 0 && quote < length && body[(int) quote] == '"') {
      int from = (int) quote + 1;
      for (int i = from; i < length; i++) {
        byte b = body[i];
        if (b == '"') {
          return new Payload(CONTENT_HASH.hashBytes(body, from, i - from));
        }
        if (b == '\\') {
          break;
        }
      }
    }
    return new Payload(contentHash(p.getText()));
  }

  /** Replaces every payload under the part's media keys by {@code identifier}, leaving plain values. */
  private static void replacePayloads(Map<String, Object> part, String identifier) {
    for (Map.Entry<String, Object> e : part.entrySet()) {
      if (MEDIA_KEYS.contains(e.getKey())) {
        e.setValue(plain(e.getValue(), identifier));
      }
    }
  }

  private static Object plain(Object v, String identifier) {
    if (v instanceof Payload) {
      return identifier;
    }
    if (v instanceof Map<?, ?> m) {
      Map<String, Object> out = new LinkedHashMap<>();
      m.forEach((k, x) -> out.put((String) k, plain(x, identifier)));
      return Collections.unmodifiableMap(out);
    }
    if (v instanceof List<?> l) {
      List<Object> out = new ArrayList<>(l.size());
      l.forEach(x -> out.add(plain(x, identifier)));
      return Collections.unmodifiableList(out);
    }
    return v;
  }
}
