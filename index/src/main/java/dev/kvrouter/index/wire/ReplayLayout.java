package dev.kvrouter.index.wire;

/** The two replay reply shapes (as received by a DEALER); a client must accept both. */
public enum ReplayLayout {
  /** vLLM since PR #45177 (0.26.0): {@code ["", topic, seq8, payload]}, end {@code ["", "", END_SEQ, ""]}. */
  WITH_TOPIC,
  /** Older vLLM and SGLang: {@code ["", seq8, payload]}, end {@code ["", END_SEQ, ""]}. */
  WITHOUT_TOPIC
}
