package dev.kvrouter.extproc.template;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;

/**
 * The chat template(s) and special tokens of a Hugging Face tokenizer, read from
 * tokenizer_config.json (and a sibling chat_template.jinja, which transformers prefers).
 * {@link #select} picks a template the way {@code get_chat_template} does for named templates.
 */
public record TokenizerChatConfig(Map<String, String> templates, boolean named, SpecialTokens specialTokens) {
  private static final ObjectMapper JSON = new ObjectMapper();

  public static TokenizerChatConfig load(Path tokenizerConfigJson) {
    try {
      JsonNode cfg = JSON.readTree(tokenizerConfigJson.toFile());
      Path jinja = tokenizerConfigJson.resolveSibling("chat_template.jinja");
      String fileTemplate = Files.isRegularFile(jinja) ? Files.readString(jinja) : null;
      return fromJson(cfg, fileTemplate);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + tokenizerConfigJson, e);
    }
  }

  public static TokenizerChatConfig fromJson(JsonNode cfg, String chatTemplateFile) {
    Map<String, String> templates = new LinkedHashMap<>();
    boolean named = false;
    JsonNode ct = cfg.get("chat_template");
    if (chatTemplateFile != null) {
      templates.put("default", chatTemplateFile);
    } else if (ct != null && ct.isTextual()) {
      templates.put("default", ct.asText());
    } else if (ct != null && ct.isArray()) {
      named = true;
      for (JsonNode t : ct) {
        templates.put(t.path("name").asText(), t.path("template").asText());
      }
    }
    return new TokenizerChatConfig(templates, named, SpecialTokens.fromTokenizerConfig(cfg));
  }

  /** {@code tokenizer.get_chat_template(None, tools)}. */
  public String select(boolean hasTools) {
    if (!named) {
      String t = templates.get("default");
      if (t == null) {
        throw new ChatInputException("Cannot use chat template functions because tokenizer.chat_template is not set");
      }
      return t;
    }
    if (hasTools && templates.containsKey("tool_use")) {
      return templates.get("tool_use");
    }
    if (templates.containsKey("default")) {
      return templates.get("default");
    }
    throw new ChatInputException("This model has multiple chat templates with no default specified! Available"
        + " template names are " + new TreeSet<>(templates.keySet()) + ".");
  }
}
