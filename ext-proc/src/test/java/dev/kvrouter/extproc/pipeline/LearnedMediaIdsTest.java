package dev.kvrouter.extproc.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.extproc.request.MultimodalItem;
import dev.kvrouter.extproc.request.MultimodalPlacement;
import dev.kvrouter.extproc.routing.Overlap;
import dev.kvrouter.extproc.routing.PrefixOverlapSource;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.index.media.MediaIdentities;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Which identifiers a media request is hashed with, and which item its worker is asked to teach. */
class LearnedMediaIdsTest {

  static final long NS = 77;
  static final int BS = 16;

  record Expected(WorkerId worker, long parent, int offset, long namespace, String routerId,
      List<MediaIdentities.FollowUp> rest) {}

  /** Knows the learned identifiers given; records what it is told to expect. */
  static final class Learned implements PrefixOverlapSource {
    final Map<String, String> learned;
    final List<Expected> expected = new ArrayList<>();
    int lookups;

    Learned(Map<String, String> learned) {
      this.learned = learned;
    }

    @Override
    public Lookup lookup(long[] blockHashes) {
      return w -> Overlap.NONE;
    }

    @Override
    public String learnedMediaId(long namespace, String routerId) {
      lookups++;
      return namespace == NS ? learned.get(routerId) : null;
    }

    @Override
    public void expectMedia(WorkerId worker, long parent, int offset, long namespace, String routerId,
        List<MediaIdentities.FollowUp> rest) {
      expected.add(new Expected(worker, parent, offset, namespace, routerId, rest));
    }
  }

  static MultimodalPlacement at(int index, String id, boolean uuid, int offset) {
    return new MultimodalPlacement(new MultimodalItem(index, MultimodalItem.Modality.IMAGE, id, uuid, 0, index + 1),
        offset, 40);
  }

  @Test
  void uuidsCostNothingLearnedIdsReplaceTheRoutersAndTheFirstUnresolvedIsExpectedWithTheRest() {
    List<MultimodalPlacement> in = List.of(at(0, "client-uuid", true, 5), at(1, "kvr1-mm:image:aa", false, 50),
        at(2, "kvr1-mm:image:bb", false, 95), at(3, "kvr1-mm:image:cc", false, 140));
    Learned source = new Learned(Map.of("kvr1-mm:image:aa", "engine-aa"));

    LearnedMediaIds ids = LearnedMediaIds.resolve(in, NS, source);
    assertThat(source.lookups).as("one lookup per item without a uuid").isEqualTo(3);
    assertThat(ids.placements()).extracting(p -> p.item().identifier())
        .containsExactly("client-uuid", "engine-aa", "kvr1-mm:image:bb", "kvr1-mm:image:cc");
    assertThat(ids.placements().get(1).offset()).isEqualTo(50);
    assertThat(ids.firstUnresolved().item().identifier()).isEqualTo("kvr1-mm:image:bb");

    long[] hashes = new long[12];
    for (int i = 0; i < hashes.length; i++) {
      hashes[i] = 1000 + i;
    }
    WorkerId w = WorkerId.of("w3");
    ids.expect(source, w, NS, hashes, BS);
    // bb starts at 95 = block 5 + 15, so its parent is block 4; cc at 140 = block 8 + 12, 3 blocks later
    assertThat(source.expected).containsExactly(new Expected(w, 1004, 15, NS, "kvr1-mm:image:bb",
        List.of(new MediaIdentities.FollowUp(3, 12, "kvr1-mm:image:cc"))));
  }

  @Test
  void anItemInBlockZeroIsExpectedAtTheNamespaceRootAndOneWhoseBlockNeverFillsIsNot() {
    Learned source = new Learned(Map.of());
    LearnedMediaIds first = LearnedMediaIds.resolve(List.of(at(0, "kvr1-mm:image:aa", false, 3)), NS, source);
    first.expect(source, WorkerId.of("w"), NS, new long[] {1, 2, 3}, BS);
    assertThat(source.expected).singleElement().satisfies(e -> {
      assertThat(e.parent()).isEqualTo(NS);
      assertThat(e.offset()).isEqualTo(3);
    });

    source.expected.clear();
    LearnedMediaIds tail = LearnedMediaIds.resolve(List.of(at(0, "kvr1-mm:image:aa", false, 60)), NS, source);
    tail.expect(source, WorkerId.of("w"), NS, new long[] {1, 2, 3}, BS); // block 3 is not full
    assertThat(source.expected).isEmpty();
  }

  @Test
  void allResolvedOrAllUuidsExpectNothingAndKeepTheList() {
    List<MultimodalPlacement> in = List.of(at(0, "u1", true, 5), at(1, "kvr1-mm:image:aa", false, 50));
    Learned source = new Learned(Map.of("kvr1-mm:image:aa", "engine-aa"));
    LearnedMediaIds ids = LearnedMediaIds.resolve(in, NS, source);
    assertThat(ids.firstUnresolved()).isNull();
    assertThat(LearnedMediaIds.resolve(in, NS + 1, source).firstUnresolved().item().identifier())
        .as("another namespace learned nothing").isEqualTo("kvr1-mm:image:aa");
    List<MultimodalPlacement> uuids = List.of(at(0, "u1", true, 5));
    assertThat(LearnedMediaIds.resolve(uuids, NS, source).placements()).isSameAs(uuids);
  }
}
