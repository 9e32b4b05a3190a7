package dev.kvrouter.extproc.pipeline;

import dev.kvrouter.extproc.model.MultimodalSpec;
import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.MultimodalPlacement;
import dev.kvrouter.extproc.tokenize.IntList;
import dev.kvrouter.extproc.tokenize.Tokenizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Turns a media request's tokenized prompt into the ids vLLM prefills and finds each item's position, the way
 * vLLM's multimodal processor does for a chat request (the prompt arrives as token ids, so vLLM applies the
 * prompt updates itself): each item's placeholder tokens, in order, become its replacement tokens; the model's
 * token merges then run over the whole prompt, one rule after the other, left to right; finally each item's
 * position is found by scanning for its replacement tokens in a view where merged tokens are split back into
 * their pair, and mapped back to the index of the merged token. The position's length is the replacement's
 * length even where a merge shortened it: vLLM's {@code mm_position} is what enters its block hashes, so it is
 * what the router must reproduce.
 *
 * <p>Immutable after construction; safe for concurrent use.
 */
public final class MediaExpander {

  private final Map<String, Modality> modalities;
  private final int[][] merges; // {left, right, merged}
  private final Map<Integer, int[]> splits; // merged -> {left, right}, the first rule that produces it

  private record Modality(String name, int[] placeholder, int[] replacement, String placeholderText) {}

  /** Thrown when the prompt and the media items do not line up the way vLLM requires. */
  public static final class Mismatch extends Exception {
    Mismatch(String message) {
      super(message, null, false, false);
    }
  }

  /** The prompt as the engine prefills it, and where each item sits. */
  public record Expanded(int[] tokens, List<MultimodalPlacement> placements) {}

  /**
   * Compiles {@code spec} against {@code tokenizer}.
   *
   * @throws IllegalArgumentException when a merge token is not a single token of the vocabulary or a
   *     placeholder tokenizes to nothing
   */
  public MediaExpander(MultimodalSpec spec, Tokenizer tokenizer) {
    Map<String, Modality> m = new LinkedHashMap<>();
    for (Map.Entry<String, MultimodalSpec.Expansion> e : spec.expansions().entrySet()) {
      MultimodalSpec.Expansion x = e.getValue();
      int[] placeholder = tokenizer.encode(x.placeholder(), false);
      if (placeholder.length == 0) {
        throw new IllegalArgumentException(e.getKey() + " placeholder tokenizes to nothing");
      }
      m.put(e.getKey(), new Modality(e.getKey(), placeholder, tokenizer.encode(x.replacement(), false),
          x.placeholder()));
    }
    this.modalities = Map.copyOf(m);
    List<List<String>> rules = spec.resolved().mergeTokens();
    this.merges = new int[rules.size()][];
    Map<Integer, int[]> split = new LinkedHashMap<>();
    for (int i = 0; i < rules.size(); i++) {
      List<String> r = rules.get(i);
      int[] ids = {single(tokenizer, r.get(0)), single(tokenizer, r.get(1)), single(tokenizer, r.get(2))};
      merges[i] = ids;
      split.putIfAbsent(ids[2], new int[] {ids[0], ids[1]});
    }
    this.splits = Map.copyOf(split);
  }

  private static int single(Tokenizer tokenizer, String token) {
    int[] ids = tokenizer.encode(token, false);
    if (ids.length != 1) {
      throw new IllegalArgumentException("merge token " + printable(token) + " is " + ids.length
          + " tokens, not one");
    }
    return ids[0];
  }

  /** The placeholder text per modality, for string-content templates (vLLM prepends one per item). */
  public Map<String, String> placeholders() {
    Map<String, String> out = new LinkedHashMap<>();
    modalities.forEach((k, v) -> out.put(k, v.placeholderText()));
    return out;
  }

  /** True when every item's modality has an expansion. */
  public boolean covers(List<MultimodalItem> items) {
    for (MultimodalItem item : items) {
      if (!modalities.containsKey(item.modality().key())) {
        return false;
      }
    }
    return true;
  }

  /**
   * Expands {@code tokens} (the rendered prompt, tokenized) for {@code items} (in order of appearance).
   *
   * @throws Mismatch when a modality has fewer placeholders than items (vLLM rejects such a request)
   */
  public Expanded expand(int[] tokens, List<MultimodalItem> items) throws Mismatch {
    Map<String, List<MultimodalItem>> byModality = new LinkedHashMap<>();
    for (MultimodalItem item : items) {
      byModality.computeIfAbsent(item.modality().key(), k -> new ArrayList<>()).add(item);
    }
    int[] out = replace(tokens, byModality);
    for (int[] rule : merges) {
      out = merge(out, rule);
    }
    return new Expanded(out, locate(out, byModality));
  }

  /**
   * The first placeholders of each modality, left to right, one per item, become the replacement; later ones stay
   * plain tokens (vLLM updates only as many as there are items and rejects a request with fewer).
   */
  private int[] replace(int[] tokens, Map<String, List<MultimodalItem>> byModality) throws Mismatch {
    IntList out = new IntList(tokens.length + 512 * byModality.size());
    Map<String, Integer> found = new LinkedHashMap<>();
    int i = 0;
    outer:
    while (i < tokens.length) {
      for (Map.Entry<String, List<MultimodalItem>> e : byModality.entrySet()) {
        String name = e.getKey();
        Modality m = modalities.get(name);
        if (found.getOrDefault(name, 0) < e.getValue().size() && startsWith(tokens, i, m.placeholder())) {
          found.merge(name, 1, Integer::sum);
          out.addAll(m.replacement());
          i += m.placeholder().length;
          continue outer;
        }
      }
      out.add(tokens[i++]);
    }
    for (Map.Entry<String, List<MultimodalItem>> e : byModality.entrySet()) {
      int n = found.getOrDefault(e.getKey(), 0);
      if (n < e.getValue().size()) {
        throw new Mismatch(e.getValue().size() + " " + e.getKey() + " items but " + n + " placeholders");
      }
    }
    return out.toArray();
  }

  /** vLLM's {@code replace_token_matches} for one pair: non-overlapping, left to right. */
  private static int[] merge(int[] tokens, int[] rule) {
    IntList out = null;
    for (int i = 0; i < tokens.length; i++) {
      if (i + 1 < tokens.length && tokens[i] == rule[0] && tokens[i + 1] == rule[1]) {
        if (out == null) {
          out = new IntList(tokens.length);
          out.addAll(tokens, 0, i);
        }
        out.add(rule[2]);
        i++;
      } else if (out != null) {
        out.add(tokens[i]);
      }
    }
    return out == null ? tokens : out.toArray();
  }

  /** Each item's range, found in the split view and mapped back to the merged prompt. */
  private List<MultimodalPlacement> locate(int[] tokens, Map<String, List<MultimodalItem>> byModality)
      throws Mismatch {
    int[] v = tokens;
    IntList origin = null; // null: the view is the prompt itself (a model without merges)
    if (!splits.isEmpty()) {
      IntList view = new IntList(tokens.length + 16);
      origin = new IntList(tokens.length + 16);
      for (int i = 0; i < tokens.length; i++) {
        int[] pair = splits.get(tokens[i]);
        if (pair == null) {
          view.add(tokens[i]);
          origin.add(i);
        } else {
          view.add(pair[0]);
          view.add(pair[1]);
          origin.add(i);
          origin.add(i);
        }
      }
      v = view.toArray();
    }
    Map<String, Integer> next = new LinkedHashMap<>();
    List<MultimodalPlacement> placements = new ArrayList<>();
    int i = 0;
    outer:
    while (i < v.length) {
      for (Map.Entry<String, List<MultimodalItem>> e : byModality.entrySet()) {
        int k = next.getOrDefault(e.getKey(), 0);
        int[] repl = modalities.get(e.getKey()).replacement();
        if (k < e.getValue().size() && startsWith(v, i, repl)) {
          placements.add(new MultimodalPlacement(e.getValue().get(k), origin == null ? i : origin.get(i),
              repl.length));
          next.put(e.getKey(), k + 1);
          i += repl.length;
          continue outer;
        }
      }
      i++;
    }
    if (placements.size() != byModality.values().stream().mapToInt(List::size).sum()) {
      throw new Mismatch("found " + placements.size() + " item positions after expansion");
    }
    return placements;
  }

  private static boolean startsWith(int[] a, int at, int[] prefix) {
    if (at + prefix.length > a.length) {
      return false;
    }
    return Arrays.equals(a, at, at + prefix.length, prefix, 0, prefix.length);
  }

  private static String printable(String s) {
    return "\"" + s.replace("\n", "\\n").replace("\t", "\\t") + "\"";
  }
}
