package dev.kvrouter.extproc.request;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.extproc.request.MultimodalItem.Modality;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class MultimodalBlockKeysTest {

  /** Records the calls instead of hashing, so each block's key list is visible. */
  final List<String> calls = new ArrayList<>();
  final MultimodalBlockKeys.Folder recording = (extra, id, offset) -> {
    calls.add(extra + ">" + id + "@" + offset);
    return extra * 31 + id.hashCode() * 7L + offset + 1;
  };

  static MultimodalPlacement at(String id, int offset, int length) {
    return new MultimodalPlacement(new MultimodalItem(0, Modality.IMAGE, id, true, 0, 0), offset, length);
  }

  @Test
  void eachBlockGetsEveryOverlappingItemWithItsOffsetRelativeToTheBlockAsVllmDoes() {
    // block size 4; tokens 0..15; item A covers [2, 9), item B covers [9, 10)
    long[] extras = MultimodalBlockKeys.extras(List.of(at("B", 9, 1), at("A", 2, 7)), 16, 4, recording);
    assertThat(extras).hasSize(4);
    assertThat(calls).containsExactly(
        "0>A@2", // block [0,4): A starts at offset 2
        "0>A@-2", // block [4,8): A started 2 before the block
        "0>A@-6", ("A".hashCode() * 7L - 6 + 1) + ">B@1"); // block [8,12): A (ends at 9), then B
    assertThat(extras[3]).isZero(); // block [12,16): no item
    assertThat(extras[0]).isNotZero();
  }

  @Test
  void partialTrailingBlocksAreNotKeyed() {
    long[] extras = MultimodalBlockKeys.extras(List.of(at("A", 5, 3)), 7, 4, recording);
    assertThat(extras).hasSize(1).containsExactly(0L);
    assertThat(calls).isEmpty();
  }

  @Test
  void aRepeatedImageIsKeyedByTheSameIdentifierAtEachPosition() {
    long[] extras = MultimodalBlockKeys.extras(List.of(at("X", 0, 4), at("X", 8, 4)), 12, 4, recording);
    assertThat(extras[0]).isEqualTo(extras[2]);
    assertThat(extras[1]).isZero();
  }

  @Test
  void placementsAreValidated() {
    assertThatThrownBy(() -> at("A", -1, 2)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> at("A", 0, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MultimodalBlockKeys.extras(List.of(), 8, 0, recording))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
