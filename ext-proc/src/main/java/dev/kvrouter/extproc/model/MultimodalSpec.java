package dev.kvrouter.extproc.model;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The {@code multimodal:} entry of a model: how each media item becomes prompt tokens, the part of vLLM's
 * multimodal processor the router must reproduce for a media request's blocks to line up with the engine's.
 *
 * <p>vLLM renders one placeholder per item (the chat template's, or {@code get_placeholder_str} prepended for
 * string-content templates), tokenizes the prompt, then replaces each placeholder's tokens by the item's full
 * token sequence and records that range as the item's position, which enters the block hashes. The router can
 * only do this for models whose sequence has a fixed length (it never fetches the media): Gemma 3 without
 * pan-and-scan (256 soft tokens), LLaVA-1.5 (576). Models whose token count depends on the image size
 * (Qwen-VL, Llama 4, InternVL) keep routing media requests by load.
 *
 * <p>Either {@code preset} or the modalities are given, not both.
 *
 * @param preset a known model family ({@code gemma3}), or null
 * @param image the image expansion, or null
 * @param audio the audio expansion, or null
 * @param video the video expansion, or null
 * @param mergeTokens token merges the engine applies after the replacement, each {@code [left, right, merged]}
 *     (single tokens): vLLM's Gemma 3 processor re-joins {@code "\n" + "\n\n"} into {@code "\n\n\n"} where the
 *     inserted sequence meets the text around it, so the ids equal the tokenizer's own output
 */
public record MultimodalSpec(String preset, Expansion image, Expansion audio, Expansion video,
    List<List<String>> mergeTokens) {

  /** Presets by name. */
  public static final Set<String> PRESETS = Set.of("gemma3");

  public MultimodalSpec {
    mergeTokens = mergeTokens == null ? List.of() : List.copyOf(mergeTokens);
  }

  /**
   * One modality's expansion: every {@code placeholder} in the tokenized prompt becomes
   * {@code prefix + token x count + suffix}, tokenized without special tokens.
   *
   * @param placeholder the text the template renders (or vLLM inserts) once per item, e.g.
   *     {@code <start_of_image>}
   * @param prefix text before the repeated token (may be empty)
   * @param token the soft token the encoder's embeddings replace
   * @param count how many times it repeats per item
   * @param suffix text after the repeated token (may be empty)
   */
  public record Expansion(String placeholder, String prefix, String token, Integer count, String suffix) {

    public Expansion {
      prefix = prefix == null ? "" : prefix;
      suffix = suffix == null ? "" : suffix;
    }

    /** The text one item expands to. */
    public String replacement() {
      return prefix + token.repeat(count) + suffix;
    }
  }

  /** Gemma 3 (transformers' {@code Gemma3Processor}, pan-and-scan off, the default) as vLLM applies it. */
  public static MultimodalSpec gemma3() {
    return new MultimodalSpec(null,
        new Expansion("<start_of_image>", "\n\n<start_of_image>", "<image_soft_token>", 256, "<end_of_image>\n\n"),
        null, null,
        List.of(List.of("\n", "\n\n", "\n\n\n"), List.of("\n\n", "\n", "\n\n\n"), List.of("\n\n", "\n\n", "\n\n\n\n")));
  }

  /** The effective spec: the preset's, or this one. */
  public MultimodalSpec resolved() {
    if (preset == null) {
      return this;
    }
    return switch (preset) {
      case "gemma3" -> gemma3();
      default -> throw new IllegalStateException("unknown multimodal preset " + preset + " (validate first)");
    };
  }

  /** Modality name ({@code image}, {@code audio}, {@code video}) to its expansion, for the configured ones. */
  public Map<String, Expansion> expansions() {
    MultimodalSpec r = resolved();
    Map<String, Expansion> out = new LinkedHashMap<>();
    if (r.image != null) {
      out.put("image", r.image);
    }
    if (r.audio != null) {
      out.put("audio", r.audio);
    }
    if (r.video != null) {
      out.put("video", r.video);
    }
    return out;
  }

  /** Value problems, each prefixed with {@code at}. */
  public List<String> validate(String at) {
    List<String> problems = new ArrayList<>();
    boolean explicit = image != null || audio != null || video != null || !mergeTokens.isEmpty();
    if (preset != null) {
      if (!PRESETS.contains(preset)) {
        problems.add(at + ".preset: unknown `" + preset + "` (known: " + String.join(", ", PRESETS) + ")");
      }
      if (explicit) {
        problems.add(at + ": give either `preset` or the modalities, not both");
      }
      return problems;
    }
    if (!explicit) {
      problems.add(at + ": give `preset` or at least one of image, audio, video");
    }
    check(problems, at + ".image", image);
    check(problems, at + ".audio", audio);
    check(problems, at + ".video", video);
    for (int i = 0; i < mergeTokens.size(); i++) {
      List<String> m = mergeTokens.get(i);
      if (m == null || m.size() != 3 || m.stream().anyMatch(x -> x == null || x.isEmpty())) {
        problems.add(at + ".merge_tokens[" + i + "]: must be [left, right, merged], three non-empty tokens");
      }
    }
    return problems;
  }

  private static void check(List<String> problems, String at, Expansion e) {
    if (e == null) {
      return;
    }
    if (e.placeholder() == null || e.placeholder().isEmpty()) {
      problems.add(at + ".placeholder: required (the text the template renders per item)");
    }
    if (e.token() == null || e.token().isEmpty()) {
      problems.add(at + ".token: required (the soft token repeated per item)");
    }
    if (e.count() == null || e.count() < 1 || e.count() > 65536) {
      problems.add(at + ".count: must be 1..65536 tokens per item");
    }
  }
}
