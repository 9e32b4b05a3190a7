package dev.kvrouter.extproc.model;

import java.nio.file.Path;
import java.util.Objects;

/**
 * A model's tokenizer and template files, resolved and checked at start. Loaders read these, never the raw
 * {@link ModelSpec} paths.
 *
 * @param tokenizerJson the {@code tokenizer.json}
 * @param tokenizerConfig the {@code tokenizer_config.json} (special tokens, usually the chat template), or null
 * @param chatTemplate a template file that takes precedence over the one in {@code tokenizer_config.json}: the
 *     configured override, else a {@code chat_template.jinja} beside the tokenizer (newer Hugging Face layout),
 *     else null
 * @param chatTemplateOverride true when {@code chatTemplate} is the configured override
 */
public record ModelFiles(Path tokenizerJson, Path tokenizerConfig, Path chatTemplate, boolean chatTemplateOverride) {

  public ModelFiles {
    Objects.requireNonNull(tokenizerJson, "tokenizerJson");
  }
}
