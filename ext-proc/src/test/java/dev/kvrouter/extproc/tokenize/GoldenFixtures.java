package dev.kvrouter.extproc.tokenize;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The golden token ids written by {@code scripts/fixtures/tokenizer_goldens.py} from the real Python tokenizers and
 * transformers, and the tokenizers under test (loaded once per JVM: they are large).
 */
final class GoldenFixtures {
  static final List<String> MODELS = List.of("qwen3", "llama3_1", "deepseek_v3", "gemma3");
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final Map<String, Tokenizer> LOADED = new ConcurrentHashMap<>();
  private static volatile String corpus;

  /** One case: full ids, or (for the longest texts) count, sha256, head and tail. */
  record Case(String id, String text, int[] ids, int[] idsSpecial, int count, String sha256, int countSpecial,
      String sha256Special, int[] head, int[] tail) {
    boolean full() {
      return ids != null;
    }
  }

  record Meta(String model, String tokenizerJsonSha256) {}

  private GoldenFixtures() {}

  static Path root() {
    String root = System.getProperty("kvrouter.root");
    if (root == null) {
      throw new IllegalStateException("system property kvrouter.root is not set (surefire sets it to the checkout root)");
    }
    return Path.of(root);
  }

  /** The tokenizer directory; fails (never skips) when CI's fetch step did not run. */
  static Path tokenizerDir(String model) {
    Path dir = root().resolve(".cache/tokenizers").resolve(model);
    if (!Files.isRegularFile(dir.resolve("tokenizer.json"))) {
      throw new IllegalStateException(dir.resolve("tokenizer.json")
          + " is missing: run scripts/fetch-tokenizers.sh (CI fetches it before the tests)");
    }
    return dir;
  }

  static Path fixtureDir() {
    return root().resolve("ext-proc/src/test/resources/fixtures/tokenize");
  }

  static String corpus() {
    String c = corpus;
    if (c == null) {
      try {
        c = Files.readString(fixtureDir().resolve("corpus.txt"), StandardCharsets.UTF_8);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      corpus = c;
    }
    return c;
  }

  static Meta meta(String model) {
    try (var lines = Files.lines(fixtureDir().resolve(model + ".jsonl"), StandardCharsets.UTF_8)) {
      JsonNode m = MAPPER.readTree(lines.findFirst().orElseThrow()).path("meta");
      return new Meta(m.path("model").asText(), m.path("tokenizer_json_sha256").asText());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static List<Case> cases(String model) {
    List<Case> out = new ArrayList<>();
    try {
      for (String line : Files.readAllLines(fixtureDir().resolve(model + ".jsonl"), StandardCharsets.UTF_8)) {
        JsonNode n = MAPPER.readTree(line);
        if (n.has("meta")) {
          continue;
        }
        String text;
        if (n.has("corpus")) {
          text = corpus().substring(n.path("corpus").get(0).asInt(), n.path("corpus").get(1).asInt());
        } else {
          text = n.path("text").asText();
        }
        if (n.has("ids")) {
          out.add(new Case(n.path("id").asText(), text, ids(n.path("ids").asText()), ids(n.path("ids_special").asText()),
              -1, null, -1, null, null, null));
        } else {
          out.add(new Case(n.path("id").asText(), text, null, null, n.path("count").asInt(), n.path("sha256").asText(),
              n.path("count_special").asInt(), n.path("sha256_special").asText(), ids(n.path("head").asText()),
              ids(n.path("tail").asText())));
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  static int[] ids(String b64) {
    ByteBuffer b = ByteBuffer.wrap(Base64.getDecoder().decode(b64)).order(ByteOrder.LITTLE_ENDIAN);
    int[] out = new int[b.remaining() / 4];
    for (int i = 0; i < out.length; i++) {
      out[i] = b.getInt();
    }
    return out;
  }

  static String sha256(int[] ids) {
    ByteBuffer b = ByteBuffer.allocate(ids.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    for (int id : ids) {
      b.putInt(id);
    }
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b.array()));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  static String fileSha256(Path file) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A tokenizer shared by the tests of this JVM (no segment cache). */
  static Tokenizer tokenizer(String model, TokenizerOptions.Implementation impl) {
    return LOADED.computeIfAbsent(model + "/" + impl, k -> {
      try {
        return TokenizerLoader.load(tokenizerDir(model), TokenizerOptions.defaults().withImplementation(impl));
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      } catch (UnsupportedTokenizerException e) {
        throw new IllegalStateException(e);
      }
    });
  }

  /**
   * Null if equal, else a readable first difference: position, expected and actual ids around it, lengths.
   * Never the text.
   */
  static String firstDifference(int[] expected, int[] actual) {
    int n = Math.min(expected.length, actual.length);
    int i = 0;
    while (i < n && expected[i] == actual[i]) {
      i++;
    }
    if (i == n && expected.length == actual.length) {
      return null;
    }
    int from = Math.max(0, i - 3);
    return "first difference at token " + i + " (expected " + expected.length + " tokens, got " + actual.length
        + "): expected[" + from + "..] = " + window(expected, from) + ", actual[" + from + "..] = " + window(actual, from);
  }

  private static String window(int[] a, int from) {
    StringBuilder sb = new StringBuilder("[");
    for (int k = from; k < Math.min(a.length, from + 8); k++) {
      sb.append(k > from ? ", " : "").append(a[k]);
    }
    return sb.append(a.length > from + 8 ? ", ...]" : "]").toString();
  }

  /** A short printable form of a test text (the fixture texts are ours, so printing them is fine). */
  static String preview(String text) {
    String t = text.length() > 60 ? text.substring(0, 60) + "..." : text;
    StringBuilder sb = new StringBuilder();
    t.codePoints().forEach(cp -> {
      if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || Character.getType(cp) == Character.FORMAT) {
        sb.append(String.format("\\u%04x", cp));
      } else {
        sb.appendCodePoint(cp);
      }
    });
    return sb.toString();
  }
}
