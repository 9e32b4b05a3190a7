package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonParser;
import dev.kvrouter.extproc.request.InferenceRequest.Kind;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * The body splice, on random JSON objects written with random whitespace, with and without {@code cache_salt} at
 * any position (duplicates included): the result parses to the original object with only {@code cache_salt}
 * changed, and every byte outside the salt values is the client's.
 */
class CacheSaltRewriterPropertyTest {

  static final String SALT = "kvr1:0123456789abcdef0123456789abcdef";

  /** A field of the top-level object: its key and the JSON text of its value. */
  record Field(String key, String json) {}

  @Provide
  Arbitrary<List<Field>> objects() {
    Arbitrary<String> keys = Arbitraries.oneOf(
        Arbitraries.of("model", "messages", "prompt", "stream", "cache_salt", "cache_salt", "x", "cache_salt2",
            "cache", "salt", "\\u0063ache_salt"),
        Arbitraries.strings().withChars("abc_ü\"\\/").ofMaxLength(6).map(CacheSaltRewriterPropertyTest::escape));
    Arbitrary<Field> field = Combinators.combine(keys, values(3)).as(Field::new);
    return field.list().ofMaxSize(7);
  }

  static Arbitrary<String> values(int depth) {
    Arbitrary<String> scalars = Arbitraries.oneOf(
        Arbitraries.strings().ofMaxLength(12).map(s -> "\"" + escape(s) + "\""),
        Arbitraries.integers().map(String::valueOf),
        Arbitraries.of("true", "false", "null", "1.5e3", "-0.0", "\"cache_salt\"", "\"}\"", "\"{\\\"cache_salt\\\":1}\""));
    if (depth == 0) {
      return scalars;
    }
    Arbitrary<String> arrays = values(depth - 1).list().ofMaxSize(3).map(l -> "[" + String.join(" , ", l) + "]");
    Arbitrary<String> objects = Combinators.combine(Arbitraries.of("cache_salt", "a", "b"), values(depth - 1))
        .as((k, v) -> "\"" + k + "\":" + v).list().ofMaxSize(3).map(l -> "{" + String.join(",", l) + "}");
    return Arbitraries.oneOf(scalars, arrays, objects);
  }

  static String escape(String s) {
    StringBuilder sb = new StringBuilder();
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        default -> {
          if (c < 0x20) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    return sb.toString();
  }

  static String render(List<Field> fields, List<String> ws, boolean bom) {
    StringBuilder sb = new StringBuilder(bom ? "\uFEFF" : "");
    int w = 0;
    sb.append(ws.get(w++ % ws.size())).append('{');
    for (int i = 0; i < fields.size(); i++) {
      if (i > 0) {
        sb.append(ws.get(w++ % ws.size())).append(',');
      }
      Field f = fields.get(i);
      sb.append(ws.get(w++ % ws.size())).append('"').append(f.key()).append('"').append(ws.get(w++ % ws.size()))
          .append(':').append(ws.get(w++ % ws.size())).append(f.json());
    }
    sb.append(ws.get(w++ % ws.size())).append('}').append(ws.get(w % ws.size()));
    return sb.toString();
  }

  /** Python's json.loads of the top level: later duplicates replace the value, keeping the first position. */
  static Map<String, Object> python(byte[] body) throws Exception {
    try (JsonParser p = RequestBodyParser.JSON.createParser(body)) {
      @SuppressWarnings("unchecked")
      Map<String, Object> m = (Map<String, Object>) JsonValues.read(p, p.nextToken());
      assertThat(p.nextToken()).isNull();
      return m;
    }
  }

  @Property(tries = 600)
  void theSplicedBodyIsTheOriginalWithOnlyCacheSaltSet(@ForAll("objects") List<Field> fields,
      @ForAll("whitespace") List<String> ws, @ForAll boolean bom) throws Exception {
    byte[] body = render(fields, ws, bom).getBytes(StandardCharsets.UTF_8);
    CacheSaltSites sites = CacheSaltSites.scan(RequestBodyParser.JSON, body, body.length);
    byte[] out = CacheSaltRewriter.rewrite(body, body.length, sites, SALT);

    Map<String, Object> expected = new LinkedHashMap<>(python(body));
    if (!expected.containsKey("cache_salt")) {
      Map<String, Object> withSalt = new LinkedHashMap<>();
      withSalt.put("cache_salt", SALT); // inserted first
      withSalt.putAll(expected);
      expected = withSalt;
    } else {
      expected.put("cache_salt", SALT);
    }
    Map<String, Object> actual = python(out);
    assertThat(actual).isEqualTo(expected);
    assertThat(new ArrayList<>(actual.keySet())).isEqualTo(new ArrayList<>(expected.keySet()));
    assertUntouchedOutsideTheSalt(body, sites, out);
  }

  @Provide
  Arbitrary<List<String>> whitespace() {
    return Arbitraries.of("", " ", "\n", "\t", "\r\n", "  \n\t ").list().ofMinSize(1).ofMaxSize(8);
  }

  /** Removing the salt values (or the inserted field) from both leaves identical bytes. */
  static void assertUntouchedOutsideTheSalt(byte[] body, CacheSaltSites sites, byte[] out) {
    String salt = "\"" + SALT + "\"";
    String in = new String(body, StandardCharsets.UTF_8);
    String o = new String(out, StandardCharsets.UTF_8);
    if (sites.values().isEmpty()) {
      String inserted = "\"cache_salt\":" + salt + (sites.fieldCount() > 0 ? "," : "");
      int at = in.indexOf('{') + 1;
      assertThat(o.substring(0, at) + o.substring(at + inserted.length())).isEqualTo(in);
      assertThat(o.substring(at, at + inserted.length())).isEqualTo(inserted);
      return;
    }
    StringBuilder stripped = new StringBuilder();
    int from = 0;
    for (CacheSaltSites.Span s : sites.values()) {
      stripped.append(new String(body, from, s.start() - from, StandardCharsets.UTF_8)).append(salt);
      from = s.end();
    }
    stripped.append(new String(body, from, body.length - from, StandardCharsets.UTF_8));
    assertThat(o).isEqualTo(stripped.toString());
  }

  @Property(tries = 200)
  void theParserRecordsTheSameSitesAsTheStandaloneScan(@ForAll("objects") List<Field> extra,
      @ForAll("whitespace") List<String> ws, @ForAll @IntRange(min = 0, max = 3) int at) throws Exception {
    List<Field> fields = new ArrayList<>(extra.stream()
        .filter(f -> !f.key().equals("model") && !f.key().equals("messages") && !f.key().equals("stream")
            && !f.key().equals("prompt"))
        // keys are JSON text: "\\u0063ache_salt" is cache_salt too, and its value must be valid for the parser
        .filter(f -> !(f.key().equals("cache_salt") || f.key().equals("\\u0063ache_salt"))
            || f.json().startsWith("\"") && f.json().length() > 2 || f.json().equals("null"))
        .toList());
    fields.add(Math.min(at, fields.size()), new Field("model", "\"m\""));
    fields.add(new Field("messages", "[{\"role\":\"user\",\"content\":\"hi\"}]"));
    byte[] body = render(fields, ws, false).getBytes(StandardCharsets.UTF_8);
    InferenceRequest r = new RequestBodyParser().parse(Kind.CHAT, body, body.length);
    assertThat(r.saltSites()).isEqualTo(CacheSaltSites.scan(RequestBodyParser.JSON, body, body.length));
  }

  @Test
  void examplesReadAsExpected() throws Exception {
    assertThat(splice("{}")).isEqualTo("{\"cache_salt\":\"" + SALT + "\"}");
    assertThat(splice("{\"a\":1}")).isEqualTo("{\"cache_salt\":\"" + SALT + "\",\"a\":1}");
    assertThat(splice(" { \"cache_salt\" : \"mine\" , \"a\":{\"cache_salt\":\"nested\"} } "))
        .isEqualTo(" { \"cache_salt\" : \"" + SALT + "\" , \"a\":{\"cache_salt\":\"nested\"} } ");
    assertThat(splice("{\"cache_salt\":null,\"b\":2,\"cache_salt\":\"x\\\"y\"}"))
        .isEqualTo("{\"cache_salt\":\"" + SALT + "\",\"b\":2,\"cache_salt\":\"" + SALT + "\"}");
    // a salt needing escapes is written as valid JSON
    byte[] b = "{\"a\":1}".getBytes(StandardCharsets.UTF_8);
    byte[] out = CacheSaltRewriter.rewrite(b, b.length, CacheSaltSites.scan(RequestBodyParser.JSON, b, b.length),
        "q\"\\ü");
    assertThat(python(out)).containsEntry("cache_salt", "q\"\\ü");
  }

  static String splice(String json) throws Exception {
    byte[] b = json.getBytes(StandardCharsets.UTF_8);
    return new String(CacheSaltRewriter.rewrite(b, b.length, CacheSaltSites.scan(RequestBodyParser.JSON, b, b.length),
        SALT), StandardCharsets.UTF_8);
  }

  @Test
  void nonUtf8BodiesHaveNoKnownSites() throws Exception {
    byte[] utf16 = "{\"model\":\"m\",\"prompt\":\"p\"}".getBytes(StandardCharsets.UTF_16LE);
    InferenceRequest r = new RequestBodyParser().parse(Kind.COMPLETIONS, utf16, utf16.length);
    assertThat(r.saltSites().known()).isFalse();
    byte[] salted = "{\"model\":\"m\",\"cache_salt\":\"s\",\"prompt\":\"p\"}".getBytes(StandardCharsets.UTF_16BE);
    assertThat(new RequestBodyParser().parse(Kind.COMPLETIONS, salted, salted.length).cacheSalt()).isEqualTo("s");
    byte[] bad = "{\"model\":\"m\",\"cache_salt\":{\"a\":[1]},\"prompt\":\"p\"}".getBytes(StandardCharsets.UTF_16LE);
    assertThat(org.assertj.core.api.Assertions.catchThrowableOfType(RequestBodyParser.BadRequest.class,
        () -> new RequestBodyParser().parse(Kind.COMPLETIONS, bad, bad.length)).error().param()).isEqualTo("cache_salt");
  }
}
