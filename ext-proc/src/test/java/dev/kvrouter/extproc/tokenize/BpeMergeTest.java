package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The two merge loops (rescan for short words, heap for long ones) against a direct transcription of BPE's
 * rule: repeatedly merge the adjacent pair of lowest rank, leftmost on ties. Random merge tables and words
 * from a fixed seed.
 */
class BpeMergeTest {

  /** The rule itself, written for clarity, not speed. */
  private static int[] reference(int[] word, MergeTable merges) {
    List<Integer> sym = new ArrayList<>();
    for (int s : word) {
      sym.add(s);
    }
    while (true) {
      int bestRank = Integer.MAX_VALUE;
      int at = -1;
      for (int i = 0; i + 1 < sym.size(); i++) {
        long m = merges.get(sym.get(i), sym.get(i + 1));
        if (m != MergeTable.NONE && MergeTable.rank(m) < bestRank) {
          bestRank = MergeTable.rank(m);
          at = i;
        }
      }
      if (at < 0) {
        return sym.stream().mapToInt(Integer::intValue).toArray();
      }
      long m = merges.get(sym.get(at), sym.get(at + 1));
      sym.set(at, MergeTable.merged(m));
      sym.remove(at + 1);
    }
  }

  @Test
  void smallAndLargeMergeLoops_agreeWithTheRule() {
    Random rnd = new Random(42);
    for (int table = 0; table < 30; table++) {
      int alphabet = 2 + rnd.nextInt(6);
      MergeTable merges = new MergeTable(64);
      int nextId = alphabet;
      int rank = 0;
      List<Integer> ids = new ArrayList<>();
      for (int i = 0; i < alphabet; i++) {
        ids.add(i);
      }
      int count = 5 + rnd.nextInt(60);
      for (int k = 0; k < count; k++) {
        int a = ids.get(rnd.nextInt(ids.size()));
        int b = ids.get(rnd.nextInt(ids.size()));
        if (merges.get(a, b) != MergeTable.NONE) {
          continue;
        }
        merges.put(a, b, rank++, nextId);
        ids.add(nextId++);
      }
      BpeModel model = new BpeModel(merges, null, null, null, null, null, null, null);
      for (int w = 0; w < 200; w++) {
        int n = 1 + rnd.nextInt(rnd.nextBoolean() ? 12 : 300);
        int[] word = new int[n];
        for (int i = 0; i < n; i++) {
          word[i] = rnd.nextInt(alphabet);
        }
        int[] expected = reference(word, merges);

        int[] sym = Arrays.copyOf(word, n);
        int k = model.mergeSmall(sym, new long[n], n);
        assertThat(Arrays.copyOf(sym, k)).as("rescan, table %d word %d", table, w).containsExactly(expected);

        BpeModel.Scratch scratch = new BpeModel.Scratch();
        scratch.ensureSymbols(n);
        System.arraycopy(word, 0, scratch.sym, 0, n);
        int h = model.mergeLarge(scratch, n);
        assertThat(Arrays.copyOf(scratch.sym, h)).as("heap, table %d word %d", table, w).containsExactly(expected);
      }
    }
  }
}
