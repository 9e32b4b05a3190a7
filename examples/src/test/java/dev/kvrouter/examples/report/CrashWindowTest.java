package dev.kvrouter.examples.report;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CrashWindowTest {

  private static RequestRecord sent(int i, double atS, String worker, long ttftMs, String error) {
    long sent = Math.round(atS * 1e6);
    return new RequestRecord(i, "r" + i, null, sent, sent, error == null ? ttftMs * 1000 : -1, 50_000,
        error == null ? 200 : 503, error, worker, "d" + i, 100, (int) ttftMs, 4, 4, 1_000);
  }

  @Test
  void splitsTheRunAroundTheCrashAndFindsTheWorkersReturn() {
    // b crashes at 10 s for 5 s
    List<RequestRecord> rs = List.of(
        sent(0, 1.0, "a", 10, null),
        sent(1, 2.0, "b", 20, null),
        sent(2, 9.5, "b", 0, "stream_error"), // in flight at the crash
        sent(3, 10.2, "b", 0, "http_503"), // sent to it while down
        sent(4, 10.4, "a", 30, null),
        sent(5, 14.0, "a", 40, null),
        sent(6, 15.0, "a", 50, null), // at the restart: after
        sent(7, 17.5, "b", 60, null), // its first request back, 2.5 s after
        sent(8, 18.0, "b", 70, null),
        RequestRecord.unsent(9, "r9", null, 19_000_000, "not_sent"));
    CrashWindow c = CrashWindow.of("b", 10, 5, rs);
    // cached tokens = the TTFT in ms here, of 100-token prompts: the share is the successful requests' mean
    assertThat(c.before()).isEqualTo(new CrashWindow.Phase(3, 1, 10.0, 20.0, 0.15, 0));
    assertThat(c.during()).isEqualTo(new CrashWindow.Phase(3, 1, 30.0, 40.0, 0.35, 0));
    assertThat(c.after()).isEqualTo(new CrashWindow.Phase(3, 0, 60.0, 70.0, 0.6, 0));
    assertThat(c.failed()).isEqualTo(2);
    assertThat(c.failedOnCrashed()).isEqualTo(2);
    assertThat(c.servedByCrashedAfter()).isEqualTo(2);
    assertThat(c.firstServedAfterSeconds()).isCloseTo(2.5, org.assertj.core.data.Offset.offset(1e-9));
    assertThat(c.firstRoutedAfterSeconds()).isCloseTo(0.0, org.assertj.core.data.Offset.offset(1e-9));
    assertThat(c.failureKinds()).isEqualTo(Map.of("stream_error", 1, "http_503", 1));
  }

  @Test
  void aWorkerNeverBackHasNoReturnTime() {
    CrashWindow c = CrashWindow.of("b", 1, 100, List.of(sent(0, 0.5, "b", 0, "stream_error"),
        sent(1, 2, "a", 5, null)));
    assertThat(c.firstServedAfterSeconds()).isNull();
    assertThat(c.after()).isEqualTo(new CrashWindow.Phase(0, 0, null, null, 0, 0));
    assertThat(c.during().ttftP50Ms()).isEqualTo(5.0);
  }

  @Test
  void aRouterCrashCountsTheRequestsTheRouterDidNotRoute() {
    RequestRecord viaPool = new RequestRecord(1, "r1", null, 2_000_000, 2_000_000, 7_000, 50_000, 200, null, "a", null,
        100, 0, 4, 4, 1_000);
    CrashWindow c = CrashWindow.of(CrashWindow.ROUTER, 1, 5, List.of(sent(0, 0.5, "a", 5, null), viaPool,
        sent(2, 7, "b", 50, null)));
    assertThat(c.during()).isEqualTo(new CrashWindow.Phase(1, 0, 7.0, 7.0, 0.0, 1));
    assertThat(c.before().withoutDecision()).isZero();
    assertThat(c.after().servedShare()).isEqualTo(0.5);
    assertThat(c.failedOnCrashed()).isZero();
    assertThat(c.firstServedAfterSeconds()).isNull();
    assertThat(c.firstRoutedAfterSeconds()).as("r2, 1 s after the restart at 6 s").isCloseTo(1.0,
        org.assertj.core.data.Offset.offset(1e-9));
  }
}
