package dev.kvrouter.dist;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvrouter.xds.registry.WorkerRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class AdminServerTest {

  /**
   * A client that sends part of a request and then nothing (a stuck scraper, a half-open connection, slowloris) held
   * one of the admin server's two threads for as long as it kept the connection open, so two of them took /health
   * and /metrics down: an orchestrator's liveness probe then restarts a router that routes fine.
   */
  @Test
  void healthAnswersWhileClientsHoldPartRequestsOpen() throws Exception {
    AdminServer admin = new AdminServer(new PrometheusMeterRegistry(PrometheusConfig.DEFAULT), new WorkerRegistry(),
        () -> true).start("127.0.0.1", 0, Duration.ofMillis(500));
    List<Socket> stuck = new ArrayList<>();
    try {
      for (int i = 0; i < 8; i++) { // more than the server has threads
        Socket s = new Socket();
        s.connect(new InetSocketAddress("127.0.0.1", admin.port()), 2000);
        s.getOutputStream().write("GET /metrics HTTP/1.1\r\nHost: x\r\n".getBytes(StandardCharsets.US_ASCII));
        s.getOutputStream().flush();
        stuck.add(s);
      }
      HttpResponse<String> health = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build().send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + admin.port() + "/health"))
              .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
      assertThat(health.statusCode()).isEqualTo(200);
      for (Socket s : stuck) {
        s.setSoTimeout(10_000);
        assertThat(readToEnd(s.getInputStream())).as("a stuck request's connection is closed by the server")
            .isTrue();
      }
    } finally {
      for (Socket s : stuck) {
        s.close();
      }
      admin.close();
    }
  }

  /** True once the peer closed (end of stream or reset) within the socket's timeout. */
  private static boolean readToEnd(InputStream in) {
    byte[] buf = new byte[4096];
    try {
      for (int i = 0; i < 1024; i++) {
        if (in.read(buf) < 0) {
          return true;
        }
      }
      return false;
    } catch (java.net.SocketTimeoutException e) {
      return false;
    } catch (IOException e) {
      return true; // reset
    }
  }
}
