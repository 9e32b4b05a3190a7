package dev.kvrouter.examples.workload;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * A scripted chat answer as the model emits it: the workload scripts the answer as text (the words of its
 * {@link WorkloadRequest#answer} segment, {@link ChatText}), and the model generates the tokenizer's encoding of
 * that text followed by the chat template's end-of-turn token ({@code <|im_end|>}, {@code <|eot_id|>},
 * {@code <end_of_turn>}, ...), then stops, unless {@code max_tokens} cuts it first
 * ({@link WorkloadRequest#generated}: the load generator's always does, before the end of turn). The client
 * receives the text (the end-of-turn token is special and not streamed as text, as vLLM's
 * {@code skip_special_tokens} default does) and resends it as the assistant message.
 *
 * <p>The engine computes KV for every generated token but the last (the end-of-turn token is sampled and never fed
 * back), so vLLM caches the full blocks of prompt + text tokens: {@link #tokens} is what it would generate, and what
 * survives of it into the next turn is whatever the next prompt's rendering shares ({@link AnswerReuse}).
 *
 * <p>Stateless apart from its fixed inputs; thread-safe if the encoder is.
 */
public final class ChatAnswers {

  private final TokenSpace space;
  private final Function<String, int[]> encoder;
  private final int endOfTurn;

  /**
   * @param space the workload's token space (names the answer's words)
   * @param encoder the model's tokenizer on plain text, without special tokens
   * @param endOfTurn the token the model ends an assistant message with
   */
  public ChatAnswers(TokenSpace space, Function<String, int[]> encoder, int endOfTurn) {
    this.space = Objects.requireNonNull(space, "space");
    this.encoder = Objects.requireNonNull(encoder, "encoder");
    this.endOfTurn = endOfTurn;
  }

  /** The answer's text: what the client receives and resends. */
  public String text(Segment answer) {
    return ChatText.render(List.of(answer), space);
  }

  /** The end-of-turn token. */
  public int endOfTurn() {
    return endOfTurn;
  }

  /** What the model generates for {@code answer}: the text's tokens, then the end-of-turn token. */
  public int[] tokens(Segment answer) {
    return generated(text(answer));
  }

  /** What the model generates when it answers {@code answer}: its tokens, then the end-of-turn token. */
  public int[] generated(String answer) {
    int[] text = encoder.apply(answer);
    int[] t = Arrays.copyOf(text, text.length + 1);
    t[text.length] = endOfTurn;
    return t;
  }

  /**
   * The text the client receives with each generated token of {@code answer} ({@link #tokens}, index for index):
   * a word arrives with the token that completes its encoding, so the client holding the first {@code t} tokens'
   * texts holds exactly {@link #wordsReceived}{@code (answer, t)} words; a token that completes no word (part of a
   * word, the end of turn) carries {@code ""}. Concatenated they are {@link #text}.
   */
  public String[] deltas(Segment answer) {
    String text = text(answer);
    String[] d = new String[encoder.apply(text).length + 1];
    java.util.Arrays.fill(d, "");
    int from = 0;
    for (int k = 1; k <= answer.length(); k++) {
      int end = k == answer.length() ? text.length() : text.indexOf(' ', from + 1);
      // the first k words' encoding, as wordsReceived measures it
      int t = encoder.apply(text.substring(0, end)).length;
      d[Math.max(0, t - 1)] += text.substring(from, end);
      from = end;
    }
    return d;
  }

  /**
   * Words of {@code answer} a client holds after receiving its first {@code tokens} generated tokens: the longest
   * prefix of words whose encoding fits in them (a word split across the cut is dropped; a real client would keep
   * its first piece, which the word-level script cannot name).
   */
  public int wordsReceived(Segment answer, int tokens) {
    if (tokens <= 0) {
      return 0;
    }
    int lo = 0;
    int hi = answer.length();
    // encodings of word prefixes grow with the prefix: the largest fitting prefix by bisection
    while (lo < hi) {
      int mid = (lo + hi + 1) >>> 1;
      if (encoder.apply(text(new Segment(answer.seed(), mid))).length <= tokens) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
}
