package dev.kvrouter.extproc.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

class CharsPerTokenEstimatorTest {

  @Test
  void observations_moveTheEstimateTowardTheObservedRatio() {
    CharsPerTokenEstimator e = new CharsPerTokenEstimator(4.0, 0.5);
    e.observe(1000, 500); // 2 chars/token
    assertThat(e.charsPerToken()).isCloseTo(3.0, within(1e-9));
    for (int i = 0; i < 50; i++) {
      e.observe(1000, 500);
    }
    assertThat(e.charsPerToken()).isCloseTo(2.0, within(1e-6));
    assertThat(e.estimateTokens(1000)).isEqualTo(500);
  }

  @Test
  void shortSegments_areIgnored_andTheRatioIsClamped() {
    CharsPerTokenEstimator e = new CharsPerTokenEstimator(4.0, 1.0);
    e.observe(CharsPerTokenEstimator.MIN_OBSERVED_CHARS - 1, 1);
    assertThat(e.charsPerToken()).isEqualTo(4.0);
    e.observe(100_000, 1);
    assertThat(e.charsPerToken()).isEqualTo(16.0);
    e.seed(100, 1000);
    assertThat(e.charsPerToken()).isEqualTo(0.5);
  }

  @Test
  void estimates_areZeroForNothing_andAtLeastOneOtherwise() {
    CharsPerTokenEstimator e = new CharsPerTokenEstimator(4.0, 0.1);
    assertThat(e.estimateTokens(0)).isZero();
    assertThat(e.estimateTokens(1)).isEqualTo(1);
    assertThatThrownBy(() -> new CharsPerTokenEstimator(4.0, 0)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void reset_replacesWhateverWasObserved_clamped() {
    CharsPerTokenEstimator e = new CharsPerTokenEstimator(4.0, 0.5);
    e.observe(100, 90);
    assertThat(e.charsPerToken()).isLessThan(3.0);
    e.reset(3.7);
    assertThat(e.charsPerToken()).isEqualTo(3.7);
    e.reset(100);
    assertThat(e.charsPerToken()).isEqualTo(16.0);
    e.reset(Double.NaN);
    assertThat(e.charsPerToken()).isEqualTo(CharsPerTokenEstimator.DEFAULT_CHARS_PER_TOKEN);
  }
}
