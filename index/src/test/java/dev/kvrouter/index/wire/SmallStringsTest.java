package dev.kvrouter.index.wire;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link SmallStrings} must answer exactly what decoding the bytes answers, whatever it has cached before (slot
 * collisions, strings that differ only in length or in one byte, the end of the array), and repeat one instance
 * for a repeated value.
 */
class SmallStringsTest {

  @Test
  void answersTheDecodedBytesWhateverWasCachedBefore() {
    SmallStrings cache = new SmallStrings();
    SplittableRandom r = new SplittableRandom(5);
    byte[][] pool = new byte[300][];
    for (int i = 0; i < pool.length; i++) {
      int len = i < 100 ? r.nextInt(9) : r.nextInt(80); // many short ones: the word-keyed path
      pool[i] = new byte[len];
      for (int j = 0; j < len; j++) {
        pool[i][j] = (byte) (r.nextInt(4) == 0 ? r.nextInt(256) : 'A' + r.nextInt(4)); // few letters: near-misses
      }
    }
    for (int n = 0; n < 20_000; n++) {
      byte[] s = pool[r.nextInt(pool.length)];
      int pad = r.nextInt(9);
      int tail = r.nextInt(3) == 0 ? 0 : r.nextInt(12); // often right at the array's end
      byte[] buf = new byte[pad + s.length + tail];
      Arrays.fill(buf, (byte) r.nextInt(256));
      System.arraycopy(s, 0, buf, pad, s.length);
      assertThat(cache.get(buf, pad, s.length)).isEqualTo(new String(s, StandardCharsets.UTF_8));
    }
  }

  @Test
  void aRepeatedShortValueIsOneInstanceAndPrefixesAreDistinct() {
    SmallStrings cache = new SmallStrings();
    byte[] buf = "GPU\0\0\0\0\0\0\0\0CPU_PINNED".getBytes(StandardCharsets.UTF_8);
    String gpu = cache.get(buf, 0, 3);
    assertThat(gpu).isEqualTo("GPU");
    assertThat(cache.get(buf.clone(), 0, 3)).isSameAs(gpu);
    assertThat(cache.get(buf, 0, 4)).isEqualTo("GPU\0"); // same word, another length
    assertThat(cache.get(buf, 0, 2)).isEqualTo("GP");
    assertThat(cache.get(buf, 0, 3)).isEqualTo("GPU");
    assertThat(cache.get(buf, 11, 10)).isEqualTo("CPU_PINNED");
    assertThat(cache.get(buf, 11, 3)).isEqualTo("CPU");
  }
}
