package dev.kvrouter.extproc.request;

import java.util.Arrays;

/** An immutable sequence of token ids (a pre-tokenized completions prompt). */
public final class TokenIds {

  private final int[] ids;

  private TokenIds(int[] ids) {
    this.ids = ids;
  }

  /** Takes ownership of {@code ids[0, length)}, copying only when the array is longer. */
  static TokenIds wrap(int[] ids, int length) {
    return new TokenIds(ids.length == length ? ids : Arrays.copyOf(ids, length));
  }

  public static TokenIds of(int... ids) {
    return new TokenIds(ids.clone());
  }

  public int size() {
    return ids.length;
  }

  public int get(int i) {
    return ids[i];
  }

  /** A copy of the ids. */
  public int[] toArray() {
    return ids.clone();
  }

  /** Copies the ids into {@code dst} at {@code offset} (the hot path: no intermediate array). */
  public void copyInto(int[] dst, int offset) {
    System.arraycopy(ids, 0, dst, offset, ids.length);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TokenIds t && Arrays.equals(ids, t.ids);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(ids);
  }

  @Override
  public String toString() {
    return "TokenIds[" + ids.length + " tokens]"; // never the ids themselves: they are prompt content
  }
}
