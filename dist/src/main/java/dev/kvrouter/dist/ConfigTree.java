package dev.kvrouter.dist;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.introspect.BeanPropertyDefinition;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * kvrouter.yaml's keys and types checked on the tree, before binding: binding stops at its first problem, so a file
 * with several took as many runs to fix. The walk follows the records' own shape as Jackson sees it (names in snake
 * case, component types), reports every unknown key and every value Jackson would refuse, each with its path, and
 * removes them, so that the rest binds and its values are checked too (a removed value takes its default and is not
 * also reported out of range). A list with a bad element is removed whole: its other elements' indices stay true.
 */
final class ConfigTree {

  private ConfigTree() {}

  /**
   * Every unknown key and wrongly typed value under {@code root}, which is left holding only the rest; the path of
   * each value removed is added to {@code removed}, so that a check comparing two settings can leave out a pair
   * whose one side is only its default now.
   */
  static List<String> prune(ObjectMapper mapper, JsonNode root, Class<?> type, Set<String> removed) {
    List<String> problems = new ArrayList<>();
    check(mapper, root, mapper.constructType(type), "(top level)", new Problems(problems, removed));
    return problems;
  }

  /** What the walk reports, and the paths of the values it removes. */
  private record Problems(List<String> lines, Set<String> removed) {
    void add(String line) {
      lines.add(line);
    }
  }

  /** False when {@code node} cannot be bound as {@code type} (each reason added), so its holder drops it. */
  private static boolean check(ObjectMapper mapper, JsonNode node, JavaType type, String path,
      Problems problems) {
    if (node == null || node.isNull()) {
      return true; // unset: the default
    }
    if (type.getRawClass().isRecord()) {
      return record(mapper, node, type, path, problems);
    }
    if (type.isCollectionLikeType() && node.isArray()) {
      boolean ok = true;
      for (int i = 0; i < node.size(); i++) {
        ok &= check(mapper, node.get(i), type.getContentType(), path + "[" + i + "]", problems);
      }
      return ok;
    }
    if (type.isMapLikeType() && node.isObject()) {
      List<String> bad = new ArrayList<>();
      node.fields().forEachRemaining(e -> {
        if (!check(mapper, e.getValue(), type.getContentType(), path + "." + e.getKey(), problems)) {
          bad.add(e.getKey());
          problems.removed().add(path + "." + e.getKey());
        }
      });
      ((ObjectNode) node).remove(bad);
      return true;
    }
    try {
      mapper.readerFor(type).readValue(node);
      return true;
    } catch (JsonProcessingException e) {
      problems.add(path + ": " + explain(e.getOriginalMessage(), null));
      return false;
    } catch (IOException e) {
      problems.add(path + ": " + e.getMessage());
      return false;
    }
  }

  private static boolean record(ObjectMapper mapper, JsonNode node, JavaType type, String path,
      Problems problems) {
    if (!node.isObject()) {
      problems.add(path + ": must be a mapping, was " + kind(node));
      return false;
    }
    Map<String, JavaType> keys = new TreeMap<>();
    for (BeanPropertyDefinition p : mapper.getDeserializationConfig().introspect(type).findProperties()) {
      keys.put(p.getName(), p.getPrimaryType());
    }
    String at = path.equals("(top level)") ? "" : path + ".";
    List<String> bad = new ArrayList<>();
    node.fields().forEachRemaining(e -> {
      JavaType t = keys.get(e.getKey());
      if (t == null) {
        problems.add(at + e.getKey() + ": unknown key `" + e.getKey() + "` (allowed: "
            + String.join(", ", keys.keySet()) + ")");
        bad.add(e.getKey());
      } else if (!check(mapper, e.getValue(), t, at + e.getKey(), problems)) {
        bad.add(e.getKey());
        problems.removed().add(at + e.getKey());
      }
    });
    ((ObjectNode) node).remove(bad);
    return true;
  }

  private static String kind(JsonNode v) {
    return v instanceof ArrayNode ? "a list" : v.isObject() ? "a mapping"
        : v.isTextual() ? "string \"" + v.asText() + "\"" : v.asText();
  }

  private static final Pattern DUPLICATE = Pattern.compile("Duplicate field '(.*)'");
  private static final Pattern COERCION = Pattern.compile(
      "Cannot coerce (?:empty )?(.+?)(?: value)? \\((.*)\\) to `([^`]+)` value.*", Pattern.DOTALL);
  private static final Pattern SHAPE = Pattern.compile(
      "Cannot deserialize value of type `([^`]+)` from (Array|Object) value.*", Pattern.DOTALL);
  private static final Pattern NUMBER_OR_SWITCH = Pattern.compile("\"(-?\\d+(\\.\\d+)?|true|false)\"",
      Pattern.CASE_INSENSITIVE);

  /** Jackson's wording for the strict checks points at its own settings; say what the file should hold. */
  static String explain(String message, JsonLocation at) {
    String line = at == null || at.getLineNr() < 1 ? "" : " (line " + at.getLineNr() + ")";
    Matcher m = DUPLICATE.matcher(message);
    if (m.matches()) {
      return "key `" + m.group(1) + "` appears twice" + line + "; the second would silently replace the first";
    }
    m = COERCION.matcher(message);
    if (m.matches()) {
      boolean quoted = m.group(1).equals("String") && NUMBER_OR_SWITCH.matcher(m.group(2)).matches();
      return "must be " + want(m.group(3)) + ", was " + m.group(1).toLowerCase(Locale.ROOT) + " " + m.group(2)
          + (quoted ? " (write it without quotes)" : "");
    }
    m = SHAPE.matcher(message);
    if (m.matches()) {
      return "must be " + want(m.group(1)) + ", was " + (m.group(2).equals("Array") ? "a list" : "a mapping");
    }
    return message;
  }

  private static String want(String javaType) {
    String raw = javaType.contains("<") ? javaType.substring(0, javaType.indexOf('<')) : javaType;
    String type = raw.replace("java.lang.", "").toLowerCase(Locale.ROOT);
    return type.equals("boolean") ? "true or false"
        : type.equals("int") || type.equals("integer") || type.equals("long") ? "a whole number"
        : type.equals("double") || type.equals("float") ? "a number"
        : type.equals("string") ? "a string"
        : type.contains("list") || type.contains("collection") ? "a list"
        : type.contains("map") ? "a mapping" : "a " + javaType;
  }
}
