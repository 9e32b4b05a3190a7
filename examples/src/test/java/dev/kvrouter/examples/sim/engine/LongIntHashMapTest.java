package dev.kvrouter.examples.sim.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class LongIntHashMapTest {

  @Test
  void putGetRemove() {
    LongIntHashMap m = new LongIntHashMap(8);
    assertThat(m.get(42)).isEqualTo(LongIntHashMap.MISSING);
    assertThat(m.put(42, 1)).isEqualTo(LongIntHashMap.MISSING);
    assertThat(m.put(42, 2)).isEqualTo(1);
    assertThat(m.get(42)).isEqualTo(2);
    assertThat(m.remove(42)).isEqualTo(2);
    assertThat(m.get(42)).isEqualTo(LongIntHashMap.MISSING);
    assertThat(m.size()).isZero();
  }

  @Test
  void refusesToGrowBeyondItsBound() {
    LongIntHashMap m = new LongIntHashMap(2);
    m.put(1, 1);
    m.put(2, 2);
    assertThatThrownBy(() -> m.put(3, 3)).isInstanceOf(IllegalStateException.class);
  }

  /** Keys drawn from a small range collide in probe runs, which exercises backward-shift deletion. */
  @Property(tries = 300)
  void behavesLikeHashMap(@ForAll @Size(max = 400) List<@IntRange(min = -40, max = 40) Integer> ops) {
    LongIntHashMap m = new LongIntHashMap(100);
    Map<Long, Integer> model = new HashMap<>();
    int v = 0;
    for (int op : ops) {
      long key = Math.abs(op) * 0x100000000L; // same low bits: worst case for the slot function
      if (op >= 0) {
        if (model.size() < 100 || model.containsKey(key)) {
          Integer prev = model.put(key, v);
          assertThat(m.put(key, v)).isEqualTo(prev == null ? LongIntHashMap.MISSING : prev);
          v++;
        }
      } else {
        Integer prev = model.remove(key);
        assertThat(m.remove(key)).isEqualTo(prev == null ? LongIntHashMap.MISSING : prev);
      }
      assertThat(m.size()).isEqualTo(model.size());
    }
    for (int k = 0; k <= 40; k++) {
      long key = k * 0x100000000L;
      Integer expected = model.get(key);
      assertThat(m.get(key)).isEqualTo(expected == null ? LongIntHashMap.MISSING : expected);
    }
  }
}
