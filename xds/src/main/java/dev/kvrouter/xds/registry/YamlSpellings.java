package dev.kvrouter.xds.registry;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonStreamContext;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.dataformat.yaml.YAMLParser;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * What a YAML tree or a bound record no longer shows: how a number or key was spelled. YAML 1.1 reads
 * {@code 0x1F40}, {@code 017}, {@code 0b101}, {@code 1_000}, {@code +80} and {@code 1_0.5} as numbers in other bases
 * or notations (017 is 15, 1_0.5 is 10.5), which an operator rarely means; an unquoted {@code ~} or {@code null} key is YAML's null, which the
 * tree turns into the text "~" or "null". Both workers.yaml ({@link WorkersFile}) and kvrouter.yaml's loader refuse
 * them, with the same words.
 *
 * <p>So are three things the tree hides outright: a tag ({@code !secret x}, {@code !!binary ...}), whose value it
 * keeps as plain text; a second document (after {@code ---}), which the tree never reads,
 * so every setting in it was silently ignored; and an alias ({@code *name}), which the parser does not expand but
 * reads as the text {@code name}, so {@code model: *m} named a model "m". Not expanding aliases is what keeps an
 * alias bomb harmless; refusing them keeps them from passing for values.
 */
public final class YamlSpellings {

  private static final Pattern PLAIN_INTEGER = Pattern.compile("-?(0|[1-9][0-9]*)");
  /** Digits, a point and an exponent: not YAML 1.1's {@code 1_0.5} (10.5), {@code +.5}, {@code 1:30.5} or .inf. */
  private static final Pattern PLAIN_DECIMAL = Pattern.compile("-?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  private static final Set<String> YAML_NULLS = Set.of("~", "null", "Null", "NULL");

  private YamlSpellings() {}

  /**
   * Each oddly spelled number or null key of {@code yaml}, in file order, as {@code path (line n): what}. A file
   * that is not valid YAML yields what was found before the fault: its reading as a tree reports the fault.
   */
  public static List<String> check(JsonFactory factory, String yaml) {
    List<String> problems = new ArrayList<>();
    try (JsonParser p = factory.createParser(yaml)) {
      int depth = 0;
      boolean firstDocumentRead = false;
      for (JsonToken t = p.nextToken(); t != null; t = p.nextToken()) {
        String line = " (line " + p.currentTokenLocation().getLineNr() + ")";
        if (firstDocumentRead) {
          // an empty document after `---` (templating tools end with one) says nothing; the parser reads it as ""
          if (t != JsonToken.VALUE_NULL && !(t == JsonToken.VALUE_STRING && p.getText().isEmpty())) {
            problems.add("(top level)" + line + ": a second YAML document; only the first is read, so this one "
                + "would be silently ignored: merge it into the first");
            break;
          }
          continue;
        }
        if (t.isStructStart()) {
          depth++;
        } else if (t.isStructEnd()) {
          depth--;
        }
        firstDocumentRead = depth == 0 && t != JsonToken.FIELD_NAME;
        if (p instanceof YAMLParser y && y.isCurrentAlias()) {
          problems.add(pathOrTop(p.getParsingContext()) + line + ": `*" + p.getText() + "` is a YAML alias, which "
              + "would be read as the text \"" + p.getText() + "\", not the anchored value; write the value itself");
        } else if (t != JsonToken.FIELD_NAME && p.getTypeId() != null) {
          // the tree drops a tag and keeps the text: `!secret name` would bind the word "name", `!!binary` its base64
          String id = String.valueOf(p.getTypeId());
          String tag = id.startsWith("tag:") ? id : "!" + id; // the parser drops the !
          problems.add(pathOrTop(p.getParsingContext()) + line + ": the YAML tag `" + tag + "` is not "
              + "read (the value would be taken as its plain text); write the value without it");
        } else if (t == JsonToken.VALUE_NUMBER_INT && !PLAIN_INTEGER.matcher(p.getText()).matches()
            || t == JsonToken.VALUE_NUMBER_FLOAT && !PLAIN_DECIMAL.matcher(p.getText()).matches()) {
          problems.add(path(p.getParsingContext()) + line + ": `" + p.getText()
              + "` is not a plain decimal number (YAML reads it as " + p.getNumberValue()
              + "); write the number in decimal");
        } else if (t == JsonToken.FIELD_NAME && YAML_NULLS.contains(p.currentName())) {
          long at = p.currentTokenLocation().getCharOffset();
          char first = at >= 0 && at < yaml.length() ? yaml.charAt((int) at) : '~';
          if (first != '"' && first != '\'') {
            problems.add(path(p.getParsingContext()) + line + ": the key is YAML's null; name it (or quote it)");
          }
        }
      }
    } catch (IOException e) {
      // reported by the tree's reading
    }
    return problems;
  }

  private static String pathOrTop(JsonStreamContext c) {
    String p = path(c);
    return p.isEmpty() ? "(top level)" : p;
  }

  /** {@code workers[0].labels.zone}: the path of a parser's current key or value; empty at the top level. */
  public static String path(JsonStreamContext c) {
    StringBuilder sb = new StringBuilder();
    for (; c != null && !c.inRoot(); c = c.getParent()) {
      sb.insert(0, c.inArray() ? "[" + c.getCurrentIndex() + "]" : "." + c.getCurrentName());
    }
    return sb.length() > 0 && sb.charAt(0) == '.' ? sb.substring(1) : sb.toString();
  }
}
