package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;

/** A growable {@code int} array: the output buffer of tokenization, and of media expansion. Not thread-safe. */
public final class IntList {
  private int[] a;
  private int size;

  public IntList(int capacity) {
    a = new int[Math.max(4, capacity)];
  }

  /** An empty list writing into {@code reuse} (its contents are overwritten) while it is large enough. */
  IntList(int[] reuse, int capacity) {
    a = reuse != null && reuse.length >= Math.max(4, capacity) ? reuse : new int[Math.max(4, capacity)];
  }

  public int size() {
    return size;
  }

  public int get(int i) {
    return a[i];
  }

  /** The backing array, valid up to {@link #size()}; replaced when the list grows. */
  int[] array() {
    return a;
  }

  public void add(int v) {
    if (size == a.length) {
      a = Arrays.copyOf(a, a.length * 2);
    }
    a[size++] = v;
  }

  public void addAll(int[] src) {
    addAll(src, 0, src.length);
  }

  public void addAll(int[] src, int off, int len) {
    ensure(size + len);
    System.arraycopy(src, off, a, size, len);
    size += len;
  }

  void ensure(int capacity) {
    if (capacity > a.length) {
      a = Arrays.copyOf(a, Math.max(capacity, a.length * 2));
    }
  }

  void clear() {
    size = 0;
  }

  public int[] toArray() {
    return Arrays.copyOf(a, size);
  }

  int[] copyRange(int from, int to) {
    return Arrays.copyOfRange(a, from, to);
  }
}
