package dev.kvrouter.index.wire;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link WireKeyTable} against the obvious byte-by-byte search over {@link WireKeys}: every known key and tag at
 * every alignment and at the very end of the array (where the word reads fall back to bytes), every one-byte
 * change of them, prefixes and extensions, and random strings of every length.
 */
class WireKeyTableTest {

  private static final byte[][] TAGS = {WireKeys.T_STORED, WireKeys.T_REMOVED, WireKeys.T_CLEARED};

  /** The reference: the index of the entry of {@code table} equal to {@code s}, or -1. */
  private static int reference(byte[][] table, byte[] s) {
    for (int c = 0; c < table.length; c++) {
      if (Arrays.equals(table[c], s)) {
        return c;
      }
    }
    return -1;
  }

  /** Both lookups of {@code s}, placed at offset {@code pad} of an array with {@code tail} bytes after it. */
  private static void check(byte[] s, int pad, int tail, byte filler) {
    byte[] buf = new byte[pad + s.length + tail];
    Arrays.fill(buf, filler);
    System.arraycopy(s, 0, buf, pad, s.length);
    String what = "'" + new String(s, StandardCharsets.ISO_8859_1) + "' at " + pad + ", " + tail + " bytes after";
    assertThat(WireKeyTable.key(buf, pad, s.length)).as("key " + what).isEqualTo(reference(WireKeys.KEYS, s));
    assertThat(WireKeyTable.tag(buf, pad, s.length)).as("tag " + what).isEqualTo(reference(TAGS, s));
  }

  private static void everywhere(byte[] s) {
    for (int pad = 0; pad < 9; pad++) {
      for (int tail : new int[] {0, 1, 3, 7, 8, 16}) {
        check(s, pad, tail, (byte) 0);
        check(s, pad, tail, (byte) 'a'); // bytes after the key must not count, whatever they are
      }
    }
  }

  @Test
  void findsEveryKeyAndTagAtEveryAlignmentAndAtTheArraysEnd() {
    for (int c = 0; c < WireKeys.KEYS.length; c++) {
      byte[] k = WireKeys.KEYS[c];
      assertThat(WireKeyTable.key(k, 0, k.length)).as(new String(k, StandardCharsets.UTF_8)).isEqualTo(c);
      everywhere(k);
    }
    assertThat(WireKeyTable.tag(WireKeys.T_STORED, 0, WireKeys.T_STORED.length)).isEqualTo(WireKeyTable.STORED);
    assertThat(WireKeyTable.tag(WireKeys.T_REMOVED, 0, WireKeys.T_REMOVED.length)).isEqualTo(WireKeyTable.REMOVED);
    assertThat(WireKeyTable.tag(WireKeys.T_CLEARED, 0, WireKeys.T_CLEARED.length)).isEqualTo(WireKeyTable.CLEARED);
    for (byte[] t : TAGS) {
      everywhere(t);
    }
  }

  @Test
  void unknownKeysOfTheSameLengthDifferingInAnyByteAreUnknown() {
    byte[][] all = Arrays.copyOf(WireKeys.KEYS, WireKeys.KEYS.length + TAGS.length);
    System.arraycopy(TAGS, 0, all, WireKeys.KEYS.length, TAGS.length);
    int checked = 0;
    for (byte[] k : all) {
      for (int i = 0; i < k.length; i++) {
        for (int x : new int[] {0x01, 0x20, 0x80, 0xFF}) {
          byte[] m = k.clone();
          m[i] ^= (byte) x;
          everywhere(m);
          checked++;
        }
      }
      everywhere(Arrays.copyOf(k, k.length - 1)); // a prefix
      byte[] longer = Arrays.copyOf(k, k.length + 1);
      longer[k.length] = 's';
      everywhere(longer); // an extension
    }
    assertThat(checked).isGreaterThan(1000);
    // the same letters in another order, and the empty string
    everywhere("epyt".getBytes(StandardCharsets.UTF_8));
    everywhere("token_dis".getBytes(StandardCharsets.UTF_8));
    everywhere(new byte[0]);
  }

  @Test
  void randomStringsOfEveryLengthMatchTheReference() {
    SplittableRandom r = new SplittableRandom(11);
    for (int len = 0; len <= 40; len++) {
      for (int i = 0; i < 200; i++) {
        byte[] s = new byte[len];
        for (int j = 0; j < len; j++) {
          s[j] = (byte) (r.nextBoolean() ? 'a' + r.nextInt(26) : r.nextInt(256));
        }
        check(s, r.nextInt(9), r.nextInt(10), (byte) r.nextInt(256));
      }
    }
  }
}
