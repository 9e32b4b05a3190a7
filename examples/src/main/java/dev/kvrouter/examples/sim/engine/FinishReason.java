package dev.kvrouter.examples.sim.engine;

/** Why a request stopped generating, as OpenAI's {@code finish_reason}. */
public enum FinishReason {
  /** Reached {@code max_tokens} or the context length. The simulated model always runs to its length. */
  LENGTH("length");

  private final String wire;

  FinishReason(String wire) {
    this.wire = wire;
  }

  public String wire() {
    return wire;
  }
}
