package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.request.MultimodalItem.Modality;
import dev.kvrouter.index.block.BlockHasher;
import java.util.List;
import org.junit.jupiter.api.Test;

class MultimodalBlockKeysTest {

  static MultimodalPlacement at(String id, int offset, int length) {
    return new MultimodalPlacement(new MultimodalItem(0, Modality.IMAGE, id, true, 0, 0), offset, length);
  }

  static long extra(String[] ids, int[] offsets) {
    return BlockHasher.multimodalExtra(ids, offsets, 0, ids.length);
  }

  @Test
  void eachBlockGetsEveryOverlappingItemWithItsOffsetRelativeToTheBlockAsVllmDoes() {
    // block size 4; tokens 0..15; item A covers [2, 9), item B covers [9, 10); given out of order
    long[] extras = MultimodalBlockKeys.extras(List.of(at("B", 9, 1), at("A", 2, 7)), 16, 4);
    assertThat(extras).containsExactly(
        extra(new String[] {"A"}, new int[] {2}), // block [0,4): A starts at offset 2
        extra(new String[] {"A"}, new int[] {-2}), // block [4,8): A started 2 tokens before the block
        extra(new String[] {"A", "B"}, new int[] {-6, 1}), // block [8,12): A (ends at 9), then B
        0L); // block [12,16): no item
    assertThat(extras[0]).isNotEqualTo(extras[1]).isNotZero();
  }

  @Test
  void partialTrailingBlocksAreNotKeyed() {
    assertThat(MultimodalBlockKeys.extras(List.of(at("A", 5, 3)), 7, 4)).containsExactly(0L);
  }

  @Test
  void aRepeatedImageIsKeyedByTheSameIdentifierAtEachPosition() {
    long[] extras = MultimodalBlockKeys.extras(List.of(at("X", 0, 4), at("X", 8, 4)), 12, 4);
    assertThat(extras[0]).isEqualTo(extras[2]).isNotZero();
    assertThat(extras[1]).isZero();
    // another image at the same place is another block
    assertThat(MultimodalBlockKeys.extras(List.of(at("Y", 0, 4)), 4, 4)[0]).isNotEqualTo(extras[0]);
  }

  @Test
  void placementsAreValidated() {
    assertThatThrownBy(() -> at("A", -1, 2)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> at("A", 0, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MultimodalBlockKeys.extras(List.of(), 8, 0)).isInstanceOf(IllegalArgumentException.class);
  }
}
