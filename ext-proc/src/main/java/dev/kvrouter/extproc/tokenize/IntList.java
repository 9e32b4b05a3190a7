package dev.kvrouter.extproc.tokenize;

import java.util.Arrays;

/** A growable {@code int} array: the output buffer of tokenization. Not thread-safe. */
final class IntList {
  private int[] a;
  private int size;

  IntList(int capacity) {
    a = new int[Math.max(4, capacity)];
  }

  /** An empty list writing into {@code reuse} (its contents are overwritten) while it is large enough. */
  IntList(int[] reuse, int capacity) {
    a = reuse != null && reuse.length >= Math.max(4, capacity) ? reuse : new int[Math.max(4, capacity)];
  }

  int size() {
    return size;
  }

  int get(int i) {
    return a[i];
  }

  /** The backing array, valid up to {@link #size()}; replaced when the list grows. */
  int[] array() {
    return a;
  }

  void add(int v) {
    if (size == a.length) {
      a = Arrays.copyOf(a, a.length * 2);
    }
    a[size++] = v;
  }

  void addAll(int[] src) {
    addAll(src, 0, src.length);
  }

  void addAll(int[] src, int off, int len) {
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

  int[] toArray() {
    return Arrays.copyOf(a, size);
  }

  int[] copyRange(int from, int to) {
    return Arrays.copyOfRange(a, from, to);
  }
}
