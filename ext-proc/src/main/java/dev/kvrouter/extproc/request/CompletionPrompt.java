package dev.kvrouter.extproc.request;

import java.util.List;
import java.util.Objects;

/**
 * A {@code /v1/completions} prompt. vLLM accepts a string, a list of strings, a list of token ids, or a list of
 * token-id lists; a list of prompts is a batch, served as one HTTP request by one engine, so the router places
 * the whole batch on one worker (see docs/request-path.md, "Batches").
 *
 * @param inputs one or more prompts, in order; empty only for a request that sends {@code prompt_embeds} alone
 *     (which the router cannot reproduce: {@link InferenceRequest#unreproducible()})
 * @param addSpecialTokens {@code add_special_tokens} (vLLM's completions default: true, i.e. BOS is added)
 * @param truncatePromptTokens {@code truncate_prompt_tokens} (keep N tokens, see
 *     {@code pipeline.PromptTruncation}; -1 = vLLM's maximum input, which the router does not know), or null
 * @param truncationSide {@code truncation_side} ({@code "left"}, {@code "right"}), or null for the tokenizer's
 */
public record CompletionPrompt(List<Input> inputs, boolean addSpecialTokens, Integer truncatePromptTokens,
    String truncationSide) implements Prompt {

  public CompletionPrompt {
    inputs = List.copyOf(inputs);
  }

  /** The prompt the cache-affinity score is computed on: the first of a batch. */
  public Input first() {
    return inputs.get(0);
  }

  public boolean isBatch() {
    return inputs.size() > 1;
  }

  /** One prompt of a batch. */
  public sealed interface Input permits Text, Tokens {}

  /** A text prompt, tokenized by the engine (with special tokens per {@link #addSpecialTokens}). */
  public record Text(String text) implements Input {
    public Text {
      Objects.requireNonNull(text, "text");
    }

    @Override
    public String toString() {
      return "Text[" + text.length() + " chars]";
    }
  }

  /** Token ids, used by the engine exactly as given (no special tokens are added). */
  public record Tokens(TokenIds ids) implements Input {
    public Tokens {
      Objects.requireNonNull(ids, "ids");
    }
  }
}
