package dev.kvrouter.extproc.tokenize;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * What the tokenizer.json post-processor adds around a single sequence when {@code add_special_tokens} is
 * true: a fixed prefix (BOS) and suffix. Only {@code TemplateProcessing}, {@code ByteLevel} (offsets only)
 * and sequences of them are understood.
 */
record PostProcessor(int[] prefix, int[] suffix) {

  static final PostProcessor NONE = new PostProcessor(new int[0], new int[0]);

  /**
   * tokenizers' {@code post_process} with left truncation to {@code maxLength}: the sequence's tokens are cut to
   * their last {@code maxLength - added} (when special tokens are added, {@code added} being prefix plus suffix),
   * then prefix and suffix are added. tokenizers computes {@code maxLength - added} on a {@code usize}: below
   * {@code added} it wraps to a huge limit, so nothing is cut.
   */
  int[] truncateLeft(int[] sequence, boolean addSpecialTokens, int maxLength) {
    int added = addSpecialTokens ? prefix.length + suffix.length : 0;
    int limit = added > 0 && maxLength < added ? Integer.MAX_VALUE : maxLength - added;
    int keep = Math.min(sequence.length, limit);
    int[] out = new int[added + keep];
    int at = 0;
    if (addSpecialTokens) {
      System.arraycopy(prefix, 0, out, 0, prefix.length);
      at = prefix.length;
    }
    System.arraycopy(sequence, sequence.length - keep, out, at, keep);
    if (addSpecialTokens) {
      System.arraycopy(suffix, 0, out, at + keep, suffix.length);
    }
    return out;
  }

  /** Parses the post-processor, or adds a reason to {@code unsupported} and returns null. */
  static PostProcessor parse(JsonNode node, List<String> unsupported) {
    if (node == null || node.isNull()) {
      return NONE;
    }
    String type = node.path("type").asText();
    switch (type) {
      case "ByteLevel":
        return NONE; // only trims offsets
      case "TemplateProcessing":
        return template(node, unsupported);
      case "Sequence": {
        PostProcessor result = NONE;
        int templates = 0;
        for (JsonNode p : node.path("processors")) {
          PostProcessor one = parse(p, unsupported);
          if (one == null) {
            return null;
          }
          if (one != NONE) {
            templates++;
            result = one;
          }
        }
        if (templates > 1) {
          unsupported.add("post_processor: more than one TemplateProcessing in a Sequence");
          return null;
        }
        return result;
      }
      default:
        unsupported.add("post_processor type " + type);
        return null;
    }
  }

  private static PostProcessor template(JsonNode node, List<String> unsupported) {
    IntList prefix = new IntList(4);
    IntList suffix = new IntList(4);
    boolean seenA = false;
    for (JsonNode piece : node.path("single")) {
      if (piece.has("Sequence")) {
        if (seenA || !"A".equals(piece.path("Sequence").path("id").asText())) {
          unsupported.add("post_processor: single template is not one sequence A");
          return null;
        }
        seenA = true;
      } else if (piece.has("SpecialToken")) {
        String name = piece.path("SpecialToken").path("id").asText();
        JsonNode ids = node.path("special_tokens").path(name).path("ids");
        if (!ids.isArray() || ids.isEmpty()) {
          unsupported.add("post_processor: special token " + name + " has no ids");
          return null;
        }
        for (JsonNode id : ids) {
          (seenA ? suffix : prefix).add(id.asInt());
        }
      } else {
        unsupported.add("post_processor: unknown template piece");
        return null;
      }
    }
    if (!seenA) {
      unsupported.add("post_processor: single template has no sequence");
      return null;
    }
    return new PostProcessor(prefix.toArray(), suffix.toArray());
  }
}
