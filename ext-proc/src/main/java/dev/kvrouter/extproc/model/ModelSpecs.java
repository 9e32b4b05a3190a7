package dev.kvrouter.extproc.model;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks the {@code models:} section: {@link #validate} the values (names, block sizes, adapters), then
 * {@link #resolveFiles} the paths against the config's directory. Problems are reported all at once, each as
 * {@code models[i].key: what is wrong}.
 */
public final class ModelSpecs {

  /** Largest block size accepted; vLLM's sizes are powers of two up to a few hundred (hybrid models inflate it). */
  public static final int MAX_BLOCK_SIZE = 8192;

  private ModelSpecs() {}

  /** Value problems of the section (no file-system access). */
  public static List<String> validate(List<ModelSpec> specs) {
    List<String> problems = new ArrayList<>();
    Map<String, String> owner = new HashMap<>(); // model or adapter name -> where it was declared
    for (int i = 0; i < specs.size(); i++) {
      ModelSpec s = specs.get(i);
      String at = "models[" + i + "]";
      if (s == null) {
        problems.add(at + ": must be a mapping with at least `name`");
        continue;
      }
      if (s.name() == null || s.name().isBlank()) {
        problems.add(at + ".name: required");
      } else {
        claim(owner, problems, s.name(), at + ".name");
      }
      if (s.tokenizer() != null && s.tokenizer().isBlank()) {
        problems.add(at + ".tokenizer: must be a path (leave it out for a model without a tokenizer)");
      }
      if (s.tokenizer() == null && s.tokenizerConfig() != null) {
        problems.add(at + ".tokenizer_config: needs `tokenizer`");
      }
      if (s.tokenizer() == null && s.chatTemplate() != null) {
        problems.add(at + ".chat_template: needs `tokenizer`");
      }
      if (s.multimodal() != null) {
        if (s.tokenizer() == null) {
          problems.add(at + ".multimodal: needs `tokenizer`");
        }
        problems.addAll(s.multimodal().validate(at + ".multimodal"));
      }
      if (!"auto".equals(s.messagesInlineSystem()) && s.inlineSystemOverride() == null) {
        problems.add(at + ".messages_inline_system: must be auto, preserve, fold or merge, was `"
            + s.messagesInlineSystem() + "`");
      }
      if (s.blockSize() < 1 || s.blockSize() > MAX_BLOCK_SIZE) {
        problems.add(at + ".block_size: must be 1.." + MAX_BLOCK_SIZE + " (vLLM's default is 16)");
      }
      for (int j = 0; j < s.adapters().size(); j++) {
        String a = s.adapters().get(j);
        if (a == null || a.isBlank()) {
          problems.add(at + ".adapters[" + j + "]: must be a non-empty name");
        } else {
          claim(owner, problems, a, at + ".adapters[" + j + "]");
        }
      }
    }
    return problems;
  }

  private static void claim(Map<String, String> owner, List<String> problems, String name, String at) {
    String first = owner.putIfAbsent(name, at);
    if (first != null) {
      problems.add(at + ": `" + name + "` is already declared at " + first
          + " (model and adapter names share one namespace, as in vLLM's /v1/models)");
    }
  }

  /**
   * The files of a model with a tokenizer, resolved against {@code baseDir}; adds problems and returns null when
   * they are missing or unreadable.
   */
  public static ModelFiles resolveFiles(ModelSpec s, String at, Path baseDir, List<String> problems) {
    Path tok = baseDir.resolve(s.tokenizer()).normalize();
    Path tokenizerJson;
    Path dir;
    if (Files.isDirectory(tok)) {
      dir = tok;
      tokenizerJson = tok.resolve("tokenizer.json");
      if (!Files.isRegularFile(tokenizerJson)) {
        problems.add(at + ".tokenizer: directory " + tok + " has no tokenizer.json");
        return null;
      }
    } else if (Files.isRegularFile(tok)) {
      dir = tok.getParent();
      tokenizerJson = tok;
    } else {
      problems.add(at + ".tokenizer: " + tok + " does not exist");
      return null;
    }
    if (!Files.isReadable(tokenizerJson)) {
      problems.add(at + ".tokenizer: " + tokenizerJson + " is not readable");
      return null;
    }
    Path config = null;
    if (s.tokenizerConfig() != null) {
      config = baseDir.resolve(s.tokenizerConfig()).normalize();
      if (!Files.isRegularFile(config) || !Files.isReadable(config)) {
        problems.add(at + ".tokenizer_config: " + config + " is not a readable file");
        return null;
      }
    } else if (dir != null && Files.isRegularFile(dir.resolve("tokenizer_config.json"))) {
      config = dir.resolve("tokenizer_config.json");
    }
    Path template = null;
    boolean override = false;
    if (s.chatTemplate() != null) {
      template = baseDir.resolve(s.chatTemplate()).normalize();
      override = true;
      if (!Files.isRegularFile(template) || !Files.isReadable(template)) {
        problems.add(at + ".chat_template: " + template + " is not a readable file");
        return null;
      }
    } else if (dir != null && Files.isRegularFile(dir.resolve("chat_template.jinja"))) {
      template = dir.resolve("chat_template.jinja");
    }
    return new ModelFiles(tokenizerJson, config, template, override);
  }
}
