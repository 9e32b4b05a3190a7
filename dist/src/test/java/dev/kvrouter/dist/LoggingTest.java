package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** docs/operations.md: the router's log is JSON lines, whoever in the process writes to it. */
class LoggingTest {

  /**
   * gRPC logs through java.util.logging, not slf4j: its records (a transport that failed, an exception a stream
   * observer threw) went to stderr as two-line plain text past the JSON encoder. An HTTP/1 request to a gRPC port
   * is the simplest way to make gRPC log one ("Transport failed").
   */
  @Test
  void grpcsOwnRecordsAreJsonLines() throws Exception {
    PrintStream out = System.out;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    Server server = null;
    try {
      System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
      Logging.configure("json", "info");
      server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
          .addService(new HealthStatusManager().getHealthService()).build().start();
      try (Socket s = new Socket("127.0.0.1", server.getPort())) {
        s.setSoTimeout(10_000);
        s.getOutputStream().write("GET /not-grpc HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        InputStream in = s.getInputStream();
        while (in.read() >= 0) {
          // gRPC answers and closes the connection
        }
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (!captured.toString(StandardCharsets.UTF_8).contains("Transport failed") && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
    } finally {
      if (server != null) {
        server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      }
      System.setOut(out);
    }
    String lines = captured.toString(StandardCharsets.UTF_8);
    assertThat(lines.lines().filter(l -> l.contains("Transport failed")).findFirst())
        .as("gRPC's record, in the log").hasValueSatisfying(l -> assertThat(l)
            .startsWith("{").endsWith("}").contains("\"logger_name\":\"io.grpc.").contains("\"level\":\"INFO\""));
  }
}
