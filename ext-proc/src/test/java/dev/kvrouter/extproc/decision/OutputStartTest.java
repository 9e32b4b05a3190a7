package dev.kvrouter.extproc.decision;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class OutputStartTest {

  /** Where the output begins in {@code body} fed whole: the byte offset just past the byte that told, or -1. */
  static int startsAt(String body) {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    OutputStart s = new OutputStart();
    for (int i = 0; i < b.length; i++) {
      if (s.feed(ByteBuffer.wrap(b, i, 1))) {
        return i + 1;
      }
    }
    return -1;
  }

  static final String CREATED = "event: response.created\ndata: {\"response\":{\"status\":\"in_progress\"},"
      + "\"sequence_number\":0,\"type\":\"response.created\"}\n\n";
  static final String IN_PROGRESS = "event: response.in_progress\ndata: {\"sequence_number\":1,"
      + "\"type\":\"response.in_progress\"}\n\n";
  static final String ITEM_ADDED = "event: response.output_item.added\ndata: {\"sequence_number\":2}\n\n";

  @Test
  void aResponsesStreamBeginsAfterItsPreambleEvents() {
    String body = CREATED + IN_PROGRESS + ITEM_ADDED;
    int expected = CREATED.length() + IN_PROGRESS.length() + "event: response.output_item.added\n".length();
    assertThat(startsAt(body)).isEqualTo(expected);
    assertThat(startsAt(CREATED + IN_PROGRESS)).as("only the preamble so far").isEqualTo(-1);
    // the preamble's data may say anything, including what a later event would
    assertThat(startsAt("event:response.created\r\ndata: event: x\r\n\r\n")).isEqualTo(-1);
  }

  @Test
  void chatCompletionsAndBodiesBeginAtOnce() {
    assertThat(startsAt("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n")).isEqualTo(5);
    assertThat(startsAt("{\"id\":\"resp_1\",\"object\":\"response\"}")).isEqualTo(1);
    assertThat(startsAt("  \n{\"error\":{}}")).isEqualTo(4);
    assertThat(startsAt(": comment\nid: 7\ndata: x\n\n")).isEqualTo(": comment\nid: 7\ndata:".length());
  }

  @Test
  void anyOtherEventNameOrAnErrorEventBeginsIt() {
    assertThat(startsAt(CREATED + "event: error\ndata: {}\n\n")).isEqualTo(CREATED.length() + "event: error\n".length());
    assertThat(startsAt("event: response.created.but.longer.than.any.preamble.name\n")).isPositive();
    assertThat(startsAt("event: response.create\n")).isEqualTo("event: response.create\n".length());
  }

  @Test
  void everySplitGivesTheSameChunk() {
    byte[] b = (CREATED + IN_PROGRESS + ITEM_ADDED).getBytes(StandardCharsets.UTF_8);
    for (int cut = 0; cut <= b.length; cut++) {
      OutputStart s = new OutputStart();
      boolean firstPart = s.feed(ByteBuffer.wrap(b, 0, cut));
      boolean second = s.feed(ByteBuffer.wrap(b, cut, b.length - cut));
      int itemEnd = CREATED.length() + IN_PROGRESS.length() + "event: response.output_item.added\n".length();
      assertThat(firstPart).as("cut at %d", cut).isEqualTo(cut >= itemEnd);
      assertThat(second).isTrue();
    }
  }
}
