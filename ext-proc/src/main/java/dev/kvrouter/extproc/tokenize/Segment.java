package dev.kvrouter.extproc.tokenize;

/**
 * A piece of a prompt that tokenizes on its own: an added token ({@code addedTokenId >= 0}) or the text
 * between two of them ({@code addedTokenId == -1}). Offsets are UTF-16 indices into the prompt.
 */
public record Segment(int start, int end, int addedTokenId) {

  public boolean isAddedToken() {
    return addedTokenId >= 0;
  }

  public int length() {
    return end - start;
  }
}
