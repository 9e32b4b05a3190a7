package dev.kvrouter.bench.tokenize;

import dev.kvrouter.extproc.tokenize.Tokenizer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Deterministic English-like prompts sized in tokens of a given tokenizer: prose documents and multi-turn
 * conversations rendered in each model family's chat format (what its chat template produces for plain text
 * messages).
 */
final class SyntheticPrompts {
  private static final String[] WORDS = (
      "the of and to in is that for it as was with be by on not he this are or his from at which but have an they "
      + "you were her she there been one all we their has would when if so no will more about up out who into them "
      + "can only other time new some could these two may first then do any like my now over such our man me even "
      + "most made after also did many before must through back years where much your way well down should because "
      + "each just those people how too little state good very make world still own see men work long get here "
      + "between both life being under never day same another know while last might us great old year off come "
      + "since against go came right used take three router cache token prefix block worker latency request model "
      + "engine prompt memory throughput scheduler kernel tensor batch attention context window stream cluster "
      + "header hash chain index event question answer document summary report customer order invoice policy "
      + "don't it's we're they've I'm you'll isn't can't won't").split(" ");
  private static final String[] PUNCT = {".", ".", ".", ",", ",", ";", ":", "?", "!"};

  /** How each model family renders {@code system}, {@code user} and {@code assistant} turns. */
  enum ChatFormat {
    CHATML("", "<|im_start|>system\n%s<|im_end|>\n", "<|im_start|>user\n%s<|im_end|>\n",
        "<|im_start|>assistant\n%s<|im_end|>\n", "<|im_start|>assistant\n"),
    LLAMA3("<|begin_of_text|>", "<|start_header_id|>system<|end_header_id|>\n\n%s<|eot_id|>",
        "<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>",
        "<|start_header_id|>assistant<|end_header_id|>\n\n%s<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    DEEPSEEK("<｜begin▁of▁sentence｜>", "%s", "<｜User｜>%s", "<｜Assistant｜>%s<｜end▁of▁sentence｜>", "<｜Assistant｜>"),
    GEMMA("<bos>", "<start_of_turn>user\n%s<end_of_turn>\n", "<start_of_turn>user\n%s<end_of_turn>\n",
        "<start_of_turn>model\n%s<end_of_turn>\n", "<start_of_turn>model\n");

    final String begin;
    final String system;
    final String user;
    final String assistant;
    final String generation;

    ChatFormat(String begin, String system, String user, String assistant, String generation) {
      this.begin = begin;
      this.system = system;
      this.user = user;
      this.assistant = assistant;
      this.generation = generation;
    }

    static ChatFormat of(String model) {
      return switch (model) {
        case "qwen3" -> CHATML;
        case "llama3_1" -> LLAMA3;
        case "deepseek_v3" -> DEEPSEEK;
        case "gemma3" -> GEMMA;
        default -> throw new IllegalArgumentException("no chat format for " + model);
      };
    }
  }

  /** A conversation: everything before the last user turn, and how to render a new last turn. */
  record Chat(String history, ChatFormat format) {
    String withLastTurn(String message) {
      return history + String.format(format.user, message) + format.generation;
    }
  }

  private final SplittableRandom rnd;

  SyntheticPrompts(long seed) {
    rnd = new SplittableRandom(seed);
  }

  String sentence() {
    StringBuilder sb = new StringBuilder();
    int n = 5 + rnd.nextInt(18);
    for (int i = 0; i < n; i++) {
      String w = WORDS[rnd.nextInt(WORDS.length)];
      if (i == 0) {
        w = Character.toUpperCase(w.charAt(0)) + w.substring(1);
      }
      if (i > 0) {
        sb.append(' ');
      }
      sb.append(w);
      if (rnd.nextInt(40) == 0) {
        sb.append(' ').append(rnd.nextInt(100_000));
      }
    }
    return sb.append(PUNCT[rnd.nextInt(PUNCT.length)]).toString();
  }

  String paragraph() {
    StringBuilder sb = new StringBuilder();
    int n = 2 + rnd.nextInt(6);
    for (int i = 0; i < n; i++) {
      sb.append(i > 0 ? " " : "").append(sentence());
    }
    return sb.toString();
  }

  /** Paragraphs separated by blank lines until the text has at least {@code tokens} tokens. */
  String prose(Tokenizer tokenizer, int tokens) {
    StringBuilder sb = new StringBuilder();
    // Grow in steps, measuring occasionally: tokenizing after every paragraph would be quadratic.
    while (tokenizer.encode(sb, false).length < tokens) {
      for (int i = 0; i < 20; i++) {
        sb.append(paragraph()).append("\n\n");
      }
    }
    return trimToTokens(tokenizer, sb.toString(), tokens);
  }

  private static String trimToTokens(Tokenizer tokenizer, String text, int tokens) {
    String[] paragraphs = text.split("\n\n");
    StringBuilder sb = new StringBuilder();
    for (String p : paragraphs) {
      sb.append(p).append("\n\n");
      if (tokenizer.encode(sb, false).length >= tokens) {
        break;
      }
    }
    return sb.toString();
  }

  /**
   * A system prompt and alternating user/assistant turns of 100-600 tokens each, about {@code tokens} tokens
   * in total including a last user turn of about 200 tokens.
   */
  Chat chat(Tokenizer tokenizer, String model, int tokens) {
    ChatFormat f = ChatFormat.of(model);
    StringBuilder history = new StringBuilder(f.begin);
    history.append(String.format(f.system, "You are a careful assistant. " + paragraph() + " " + paragraph()));
    List<String> turns = new ArrayList<>();
    int total = tokenizer.encode(history, false).length;
    boolean user = true;
    while (total < tokens - 250) {
      StringBuilder msg = new StringBuilder(paragraph());
      int target = 100 + rnd.nextInt(500);
      while (tokenizer.encode(msg, false).length < target) {
        msg.append("\n\n").append(paragraph());
      }
      String turn = String.format(user ? f.user : f.assistant, msg);
      turns.add(turn);
      total += tokenizer.encode(turn, false).length;
      user = !user;
    }
    if (!user) {
      turns.add(String.format(f.assistant, paragraph()));
    }
    turns.forEach(history::append);
    return new Chat(history.toString(), f);
  }

  /** A new last user message of about 200 tokens; {@code unique} makes it differ from every earlier one. */
  String lastMessage(long unique) {
    return "Request " + unique + ": " + paragraph() + " " + paragraph() + " " + paragraph();
  }
}
