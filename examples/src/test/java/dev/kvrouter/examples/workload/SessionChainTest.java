package dev.kvrouter.examples.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class SessionChainTest {

  private static WorkloadRequest turn(int index, String id, String after) {
    return new WorkloadRequest(index, id, index, "s", Prompt.tokens(List.of(new Segment(index, 4))), 1, null, after);
  }

  @Test
  void linksEachTurnToThePreviousOneByPosition() {
    // two interleaved sessions: a0 <- a1 <- a2 and b0 <- b1, and an open-loop request c
    SessionChain chain = new SessionChain(List.of(turn(0, "a0", null), turn(1, "b0", null), turn(2, "a1", "a0"),
        turn(3, "c", null), turn(4, "b1", "b0"), turn(5, "a2", "a1")));
    assertThat(chain.dependentTurns()).isEqualTo(3);
    assertThat(new int[] {chain.predecessor(0), chain.predecessor(1), chain.predecessor(2), chain.predecessor(3),
        chain.predecessor(4), chain.predecessor(5)}).containsExactly(-1, -1, 0, -1, 1, 2);
    assertThat(new int[] {chain.successor(0), chain.successor(1), chain.successor(2), chain.successor(3),
        chain.successor(4), chain.successor(5)}).containsExactly(2, 4, 5, -1, -1, -1);
  }

  @Test
  void aTurnMustWaitForOneEarlierRequestAndNoTwoForTheSame() {
    assertThatThrownBy(() -> new SessionChain(List.of(turn(0, "a1", "a0"), turn(1, "a0", null))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not an earlier request");
    assertThatThrownBy(() -> new SessionChain(List.of(turn(0, "a0", null), turn(1, "a1", "nobody"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not an earlier request");
    assertThatThrownBy(() -> new SessionChain(List.of(turn(0, "a0", null), turn(1, "a1", "a0"), turn(2, "a2", "a0"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("a0 has two requests waiting for it");
  }

  @Test
  void countsHoldsTheirTotalAndTheLongest() {
    SessionChain chain = new SessionChain(List.of(turn(0, "a0", null), turn(1, "a1", "a0")));
    assertThat(chain.heldBackTurns()).isZero();
    chain.held(300);
    chain.held(1_000);
    chain.held(0);
    assertThat(chain.heldBackTurns()).isEqualTo(3);
    assertThat(chain.heldBackNanos()).isEqualTo(1_300);
    assertThat(chain.maxHeldBackNanos()).isEqualTo(1_000);
  }
}
