package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.kvrouter.extproc.model.ModelSpec;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * docs/configuration.md is the reference operators read, kvrouter.example.yaml the file they copy, and
 * {@link KvrouterConfigTest#theShippedExampleIsValidAndEqualToTheDefaults} already holds the example to the code's
 * defaults. These tests hold the reference to the example, so a default changed in the code and the example but not
 * in the docs (or a setting added without a row, or a row left behind by a removed setting) fails the build.
 */
class ConfigurationDocsTest {

  private static final Path ROOT = Path.of(System.getProperty("kvrouter.root"));
  private static final String DOC = "docs/configuration.md";
  private static final String EXAMPLE = "kvrouter.example.yaml";

  /**
   * The sections whose `| key | default | meaning |` tables document kvrouter.yaml, and what their keys are
   * relative to: the main table writes whole dotted keys, the events section's are below `events.`, and the models
   * section's are the keys of each `models:` entry. A settings table in any other section fails the test, so a new
   * section has to say here how its keys are written.
   */
  private static final Map<String, String> SECTION_PREFIX = Map.of(
      "kvrouter.yaml", "",
      "events", "events.",
      "models", "models[].");

  /**
   * Sections with `| key | meaning |` tables: the shape of a value, not settings with defaults (multimodal: the
   * keys of `models[].multimodal`, which has no default expansion). Any other key table without a default column
   * fails the test.
   */
  private static final Set<String> VALUE_SHAPE_SECTIONS = Set.of("multimodal");

  /**
   * Rows that stand for entries of a map or list rather than for one setting, with the example's path of that map or
   * list. The example leaves each empty (no per-model overrides, no models), so these rows have no value there to
   * match; the test checks the container is there and empty instead, so an example that gains an entry is noticed.
   * The `models[].` entry keys are checked against a parsed one-entry config by
   * {@link #everyModelEntryKeyIsDocumentedWithTheCodesDefault}.
   */
  private static final Map<String, String> PATTERNS = Map.of(
      "routing.models.<model>", "routing.models",
      "models[].", "models");

  /**
   * Keys whose default the doc writes as a word instead of a literal, with the value the example must hold.
   * `none`: a secret's file or variable, which has no default (a public seed is used without one); `empty`: no
   * replica endpoint. Every other row's default must start with a `literal`.
   */
  private static final Map<String, String> DEFAULTS_IN_WORDS = Map.of(
      "tenancy.secret_file", "none=null",
      "tenancy.secret_env", "none=null",
      "replicas.bind", "empty=\"\"",
      "replicas.curve.secret_key_file", "none=null",
      "replicas.curve.public_key_file", "none=null");

  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  @Test
  void everySettingInTheExampleIsDocumented() throws IOException {
    Map<String, Row> doc = documented();
    List<String> missing = example().keySet().stream()
        .filter(k -> !doc.containsKey(k))
        .map(k -> k + ": in " + EXAMPLE + " but not in " + DOC)
        .collect(Collectors.toList());
    assertThat(missing).as("settings without a row in " + DOC).isEmpty();
  }

  @Test
  void everyDocumentedSettingIsInTheExample() throws IOException {
    Map<String, String> example = example();
    JsonNode tree = exampleTree();
    List<String> problems = new ArrayList<>();
    for (String key : documented().keySet()) {
      String pattern = pattern(key);
      if (pattern != null) {
        JsonNode container = tree.at(pointer(PATTERNS.get(pattern)));
        if (!(container.isContainerNode() && container.isEmpty())) {
          problems.add(key + ": documented as a pattern, so " + EXAMPLE + " should hold an empty "
              + PATTERNS.get(pattern) + ", has `" + canonical(container) + "`");
        }
      } else if (!example.containsKey(key)) {
        problems.add(key + ": in " + DOC + " but not in " + EXAMPLE);
      }
    }
    assertThat(problems).as("rows without a setting in " + EXAMPLE).isEmpty();
  }

  @Test
  void everyDocumentedDefaultIsTheExamplesValue() throws IOException {
    Map<String, String> example = example();
    List<String> problems = new ArrayList<>();
    for (Row row : documented().values()) {
      if (pattern(row.key) != null || !example.containsKey(row.key)) {
        continue; // patterns have no value here; a missing setting is everyDocumentedSettingIsInTheExample's
      }
      String documented = documentedValue(row, problems);
      String actual = example.get(row.key);
      if (documented != null && !documented.equals(actual)) {
        problems.add(row.key + ": " + DOC + " says " + row.defaultCell + ", " + EXAMPLE + " has `" + actual + "`");
      }
    }
    assertThat(problems).as("defaults in " + DOC + " that differ from " + EXAMPLE).isEmpty();
  }

  /**
   * The example has no model entry to compare with, so the models section is held to what the code makes of an entry
   * that gives only its name: every ModelSpec field has a row, every row names a field, and each literal default
   * (the words, such as `required` or `the model's`, describe behaviour) is the parsed value.
   */
  @Test
  void everyModelEntryKeyIsDocumentedWithTheCodesDefault() throws IOException {
    ModelSpec entry = KvrouterConfig.parse("models: [{name: m}]\n", "k.yaml").models().get(0);
    JsonNode parsed = new ObjectMapper().setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
        .valueToTree(entry);
    Map<String, Row> rows = new LinkedHashMap<>();
    documented().forEach((k, r) -> {
      if (k.startsWith("models[].")) {
        rows.put(k.substring("models[].".length()), r);
      }
    });
    Set<String> fields = Arrays.stream(ModelSpec.class.getRecordComponents())
        .map(c -> PropertyNamingStrategies.SnakeCaseStrategy.INSTANCE.translate(c.getName()))
        .collect(Collectors.toCollection(TreeSet::new));
    Set<String> documentedFields = rows.keySet().stream().map(k -> k.split("\\.")[0])
        .collect(Collectors.toCollection(TreeSet::new));
    assertThat(documentedFields).as("the models section's keys against ModelSpec's fields").isEqualTo(fields);
    List<String> problems = new ArrayList<>();
    for (Map.Entry<String, Row> e : rows.entrySet()) {
      Row row = e.getValue();
      if (!row.defaultCell.startsWith("`")) {
        continue;
      }
      String documented = documentedValue(row, problems);
      String actual = canonical(parsed.at(pointer(e.getKey())));
      if (!documented.equals(actual)) {
        problems.add(row.key + ": " + DOC + " says " + row.defaultCell + ", an entry with only a name gets `"
            + actual + "`");
      }
    }
    assertThat(problems).as("model entry defaults in " + DOC + " that differ from the code's").isEmpty();
  }

  /**
   * The bounds a row states are the parser's: its first `>= L`, `L..M` or `in [L, M]` (`(L` exclusive), else the
   * doc's rule that no number is negative. The bound itself is accepted and the next value past it refused, 0 is
   * accepted where the row makes it a setting (`0 = off`, `0`: ...), and a row without an upper bound takes the type's
   * largest value. A check the code makes that the reference does not state (a port's range, a floor of 1024) fails
   * here, as does a stated bound the code does not hold.
   */
  @Test
  void everyNumericSettingsDocumentedBoundsAreTheParsers() throws IOException {
    Map<String, String> example = example();
    List<String> problems = new ArrayList<>();
    for (Row row : documented().values()) {
      Class<?> type = example.containsKey(row.key) ? leafType(row.key) : null;
      if (type == null || !Number.class.isAssignableFrom(type)) {
        continue;
      }
      boolean whole = type != Double.class;
      Bounds b = Bounds.of(row.defaultCell + " " + row.meaning, name -> sibling(example, row.key, name));
      BigDecimal step = whole ? BigDecimal.ONE : new BigDecimal("0.5");
      BigDecimal below = b.lowerExclusive ? b.lower : b.lower.subtract(step);
      boolean zeroIsSetting = ZERO_IS_A_SETTING.matcher(row.defaultCell + " " + row.meaning).find();
      expect(problems, row, below, zeroIsSetting && below.signum() == 0);
      if (!b.lowerExclusive) {
        expect(problems, row, b.lower, true);
      }
      if (b.lower.signum() > 0) {
        expect(problems, row, BigDecimal.ZERO, zeroIsSetting);
      }
      if (b.upper != null) {
        expect(problems, row, b.upper, true);
        expect(problems, row, b.upper.add(step), false);
      } else {
        expect(problems, row, type == Integer.class ? BigDecimal.valueOf(Integer.MAX_VALUE)
            : type == Long.class ? BigDecimal.valueOf(Long.MAX_VALUE) : new BigDecimal("1000000000000000"), true);
      }
    }
    assertThat(problems).as("bounds in " + DOC + " that differ from the parser's").isEmpty();
  }

  private static final Pattern ZERO_IS_A_SETTING = Pattern.compile("(?<![\\d.])`?0`?\\s*(=|:)(?!\\d)");

  /** A row's stated bounds: lower (0 unless stated), whether it is exclusive, upper or null. */
  private record Bounds(BigDecimal lower, boolean lowerExclusive, BigDecimal upper) {
    private static final Pattern ANY = Pattern.compile(
        "(?:>=|≥|at least)\\s*(\\d+(?:\\.\\d+)?|[a-z_]+)"
            + "|(\\d+(?:\\.\\d+)?)\\s*\\.\\.\\s*(\\d+(?:\\^\\d+)?)"
            + "|in ([\\[(])(\\d+(?:\\.\\d+)?), (\\d+(?:\\^\\d+|\\.\\d+)?)]");

    /** {@code setting} gives the default of a setting a bound names (`>= max_body_bytes`). */
    static Bounds of(String text, java.util.function.Function<String, String> setting) {
      Matcher m = ANY.matcher(text.replace("`", ""));
      if (!m.find()) {
        return new Bounds(BigDecimal.ZERO, false, null);
      }
      if (m.group(1) != null) {
        String lower = Character.isDigit(m.group(1).charAt(0)) ? m.group(1) : setting.apply(m.group(1));
        return new Bounds(new BigDecimal(lower), false, null);
      }
      if (m.group(2) != null) {
        return new Bounds(new BigDecimal(m.group(2)), false, number(m.group(3)));
      }
      return new Bounds(new BigDecimal(m.group(5)), m.group(4).equals("("), number(m.group(6)));
    }

    private static BigDecimal number(String s) {
      String[] pow = s.split("\\^");
      return pow.length == 2 ? new BigDecimal(pow[0]).pow(Integer.parseInt(pow[1])) : new BigDecimal(s);
    }
  }

  private static void expect(List<String> problems, Row row, BigDecimal value, boolean accepted) {
    String written = value.toPlainString();
    StringBuilder yaml = new StringBuilder();
    String[] parts = row.key.split("\\.");
    for (int i = 0; i < parts.length - 1; i++) {
      yaml.append(parts[i]).append(": {");
    }
    yaml.append(parts[parts.length - 1]).append(": ").append(written).append("}".repeat(parts.length - 1));
    String refusal = null;
    try {
      KvrouterConfig.parse(yaml + "\n", "k.yaml");
    } catch (KvrouterConfig.InvalidConfig e) {
      // an error on the key, or on its section as a whole (routing.busy's thresholds are checked together)
      refusal = e.getMessage().lines()
          .filter(l -> {
            String path = l.replaceFirst("^k\\.yaml: ", "").split(": | \\(line ", 2)[0];
            return row.key.equals(path) || row.key.startsWith(path + ".");
          })
          .findFirst().orElse(null);
    }
    if ((refusal == null) != accepted) {
      problems.add(row.key + " = " + written + ": " + DOC + ":" + row.line + " says "
          + (accepted ? "allowed" : "refused") + ", the parser " + (accepted ? "refuses it (" + refusal + ")"
          : "accepts it"));
    }
  }

  /** The example's value of the setting {@code name} beside {@code key} (a bound stated as another setting). */
  private static String sibling(Map<String, String> example, String key, String name) {
    String other = key.substring(0, key.lastIndexOf('.') + 1) + name;
    assertThat(example).as(DOC + ": " + key + " is bounded by `" + name + "`, which is not a setting beside it")
        .containsKey(other);
    return example.get(other);
  }

  /** The declared type of a dotted kvrouter.yaml key, following KvrouterConfig's records; null if not a record leaf. */
  private static Class<?> leafType(String dotted) {
    Class<?> type = KvrouterConfig.class;
    for (String part : dotted.split("\\.")) {
      if (!type.isRecord()) {
        return null;
      }
      Class<?> next = null;
      for (var c : type.getRecordComponents()) {
        if (PropertyNamingStrategies.SnakeCaseStrategy.INSTANCE.translate(c.getName()).equals(part)) {
          next = c.getType();
        }
      }
      if (next == null) {
        return null;
      }
      type = next;
    }
    return type == int.class ? Integer.class : type == long.class ? Long.class
        : type == double.class ? Double.class : type;
  }

  /** A documented row: its dotted key (section prefix applied), its default and meaning cells as written. */
  private record Row(String key, String defaultCell, String meaning, int line) {}

  private static final Pattern HEADING = Pattern.compile("#{2,3} (.+)");
  private static final Pattern LEADING_LITERAL = Pattern.compile("`([^`]*)`.*");

  /** The doc's settings rows by dotted key; a key documented twice fails (the two rows could disagree). */
  private static Map<String, Row> documented() throws IOException {
    List<String> lines = Files.readAllLines(ROOT.resolve(DOC));
    Map<String, Row> rows = new LinkedHashMap<>();
    String section = "";
    boolean fenced = false;
    boolean settingsTable = false;
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i);
      if (line.startsWith("```")) {
        fenced = !fenced; // YAML comments in code blocks are not headings
        continue;
      }
      Matcher h = HEADING.matcher(line);
      if (fenced || h.matches()) {
        section = fenced ? section : h.group(1).trim();
        continue;
      }
      if (!line.startsWith("|")) {
        settingsTable = false;
        continue;
      }
      List<String> cells = cells(line);
      if (cells.get(0).startsWith("---")) {
        continue;
      }
      if (!settingsTable && cells.get(0).equals("key")) { // a table's header row
        if (cells.equals(List.of("key", "default", "meaning"))) {
          assertThat(SECTION_PREFIX).as(DOC + ":" + (i + 1) + ": a settings table in section `" + section
              + "`: add how its keys are written to SECTION_PREFIX").containsKey(section);
          settingsTable = true;
        } else {
          assertThat(VALUE_SHAPE_SECTIONS).as(DOC + ":" + (i + 1) + ": key table " + cells + " in section `"
              + section + "` without a default column").contains(section);
        }
        continue;
      }
      if (settingsTable) {
        String key = SECTION_PREFIX.get(section) + cells.get(0).replace("`", "");
        Row previous = rows.put(key, new Row(key, cells.get(1), cells.get(2), i + 1));
        assertThat(previous).as(DOC + ":" + (i + 1) + ": " + key + " documented twice").isNull();
      }
    }
    return rows;
  }

  private static List<String> cells(String row) {
    String inner = row.substring(1, row.endsWith("|") ? row.length() - 1 : row.length());
    return Arrays.stream(inner.split("\\|", -1)).map(String::trim).collect(Collectors.toList());
  }

  /**
   * The canonical form of a row's default: its leading `literal` (so "`0` = min(4, cores)" is 0), or for
   * {@link #DEFAULTS_IN_WORDS} the value its word stands for; null, with a problem added, for any other wording.
   */
  private static String documentedValue(Row row, List<String> problems) throws IOException {
    String words = DEFAULTS_IN_WORDS.get(row.key);
    if (words != null) {
      String[] wordAndValue = words.split("=", 2);
      if (!row.defaultCell.equals(wordAndValue[0])) {
        problems.add(row.key + ": " + DOC + " says " + row.defaultCell + ", DEFAULTS_IN_WORDS expects `"
            + wordAndValue[0] + "`");
        return null;
      }
      return canonical(YAML.readTree("v: " + wordAndValue[1]).get("v"));
    }
    Matcher m = LEADING_LITERAL.matcher(row.defaultCell);
    if (!m.matches()) {
      problems.add(row.key + ": " + DOC + ":" + row.line + " gives the default as " + row.defaultCell
          + ": start it with the value in backticks (or list the key in DEFAULTS_IN_WORDS)");
      return null;
    }
    return canonical(YAML.readTree("v: " + m.group(1)).get("v"));
  }

  private static JsonNode exampleTree() throws IOException {
    return YAML.readTree(ROOT.resolve(EXAMPLE).toFile());
  }

  /** The example's settings by dotted key: maps recurse, lists are values, patterns' containers are left out. */
  private static Map<String, String> example() throws IOException {
    Map<String, String> out = new LinkedHashMap<>();
    flatten("", exampleTree(), out);
    return out;
  }

  private static void flatten(String path, JsonNode node, Map<String, String> out) {
    if (PATTERNS.containsValue(path) && node.isObject()) {
      return; // a map of entries keyed by name (routing.models); everyDocumentedSettingIsInTheExample checks it
    }
    if (node.isObject() && !node.isEmpty()) {
      for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        flatten(path.isEmpty() ? e.getKey() : path + "." + e.getKey(), e.getValue(), out);
      }
    } else {
      out.put(path, canonical(node));
    }
  }

  /**
   * One spelling per value, as the doc and the example may write it differently: 1.0 and 1, 8_000_000 and 8000000,
   * quoted or bare strings, flow or block lists.
   */
  private static String canonical(JsonNode node) {
    if (node.isNumber()) {
      return number(node.decimalValue());
    }
    if (node.isTextual()) {
      String s = node.textValue();
      return s.matches("[-+]?\\d[\\d_]*(\\.\\d[\\d_]*)?") ? number(new BigDecimal(s.replace("_", ""))) : s;
    }
    if (node.isArray()) {
      List<String> items = new ArrayList<>();
      node.forEach(n -> items.add(canonical(n)));
      return "[" + String.join(", ", items) + "]";
    }
    if (node.isObject()) {
      List<String> entries = new ArrayList<>();
      node.fields().forEachRemaining(e -> entries.add(e.getKey() + ": " + canonical(e.getValue())));
      return "{" + String.join(", ", entries) + "}";
    }
    return node.isMissingNode() ? "(missing)" : node.asText(); // true, false, null
  }

  private static String number(BigDecimal d) {
    return d.signum() == 0 ? "0" : d.stripTrailingZeros().toPlainString();
  }

  /** The pattern a documented key belongs to, or null. */
  private static String pattern(String key) {
    return PATTERNS.keySet().stream().filter(p -> p.endsWith(".") ? key.startsWith(p) : key.equals(p))
        .findFirst().orElse(null);
  }

  private static String pointer(String dotted) {
    return "/" + dotted.replace(".", "/");
  }
}
