package dev.kvrouter.index.wire;

/** Constants and helpers of the ZMQ framing shared by engines, our publisher and our subscriber. */
public final class ZmqFrames {

  /** The replay end marker's sequence frame: {@code (-1).to_bytes(8, "big", signed=True)}. */
  public static final long END_SEQ = -1L;

  private ZmqFrames() {}

  /** The 8-byte big-endian sequence frame. */
  public static byte[] seqBytes(long seq) {
    byte[] b = new byte[8];
    for (int i = 7; i >= 0; i--) {
      b[i] = (byte) seq;
      seq >>>= 8;
    }
    return b;
  }

  /** Reads an 8-byte big-endian sequence frame; throws if the frame is not 8 bytes. */
  public static long readSeq(byte[] frame) {
    if (frame == null || frame.length != 8) {
      throw new MalformedEventException("sequence frame has " + (frame == null ? 0 : frame.length)
          + " bytes, expected 8");
    }
    long v = 0;
    for (byte b : frame) {
      v = (v << 8) | (b & 0xFF);
    }
    return v;
  }

  /**
   * vLLM's endpoint heuristic: the publisher binds when the endpoint has a wildcard host ({@code *},
   * {@code ::}) or is {@code ipc://}/{@code inproc://}; otherwise it connects to a binding subscriber.
   */
  public static boolean engineBinds(String endpoint) {
    return endpoint.contains("*") || endpoint.contains("::") || endpoint.startsWith("ipc://")
        || endpoint.startsWith("inproc://");
  }

  /**
   * The endpoint of data-parallel rank {@code rank}: TCP port + rank, {@code inproc://x_dp<rank>}; rank 0 is
   * unchanged (vLLM's {@code offset_endpoint_port}).
   */
  public static String offsetEndpoint(String endpoint, int rank) {
    if (rank == 0 || endpoint == null) {
      return endpoint;
    }
    if (endpoint.startsWith("inproc://")) {
      return endpoint + "_dp" + rank;
    }
    if (endpoint.startsWith("tcp://")) {
      int colon = endpoint.lastIndexOf(':');
      if (colon > "tcp://".length()) {
        int port = Integer.parseInt(endpoint.substring(colon + 1));
        return endpoint.substring(0, colon + 1) + (port + rank);
      }
    }
    throw new IllegalArgumentException("cannot offset endpoint for data-parallel rank " + rank + ": " + endpoint);
  }
}
