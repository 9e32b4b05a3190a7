package dev.kvrouter.e2e;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * A TCP forwarder on loopback in front of one router replica that can hold all of its traffic at once, in both
 * directions, the way a paused process would (a long GC pause, CPU throttling): bytes wait, connections stay
 * open, nothing is refused. The stall starts on the next bytes Envoy sends on the first connection it opened,
 * which is its health checker's when no request has gone through yet, so the stall is sure to hold a health
 * check from its start.
 */
final class StallingProxy implements AutoCloseable {

  private final ServerSocket server;
  private final int targetPort;
  private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "stalling-proxy");
    t.setDaemon(true);
    return t;
  });
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private final CountDownLatch stalled = new CountDownLatch(1);
  private volatile Socket first;
  private volatile Duration armed;
  private volatile long stallEndNanos;
  private volatile boolean stalling;

  StallingProxy(int targetPort) throws IOException {
    this.targetPort = targetPort;
    server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    threads.execute(this::accept);
  }

  int port() {
    return server.getLocalPort();
  }

  /** Holds every byte for {@code d}, from the next bytes Envoy sends on its first connection. */
  void stallOnNextCheck(Duration d) {
    armed = d;
  }

  /** Waits for the armed stall to start; returns when it ends, as {@link System#nanoTime}. */
  long awaitStall(Duration timeout) throws InterruptedException {
    if (!stalled.await(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      throw new AssertionError("no bytes on Envoy's first connection to the proxy within " + timeout);
    }
    return stallEndNanos;
  }

  private void accept() {
    while (!server.isClosed()) {
      try {
        Socket in = server.accept();
        Socket out = new Socket(InetAddress.getLoopbackAddress(), targetPort);
        for (Socket s : List.of(in, out)) {
          s.setTcpNoDelay(true);
          sockets.add(s);
        }
        if (first == null) {
          first = in;
        }
        threads.execute(() -> pump(in, out, true));
        threads.execute(() -> pump(out, in, false));
      } catch (IOException closed) {
        return;
      }
    }
  }

  private void pump(Socket from, Socket to, boolean fromEnvoy) {
    byte[] buf = new byte[64 * 1024];
    try {
      InputStream in = from.getInputStream();
      OutputStream out = to.getOutputStream();
      for (int n; (n = in.read(buf)) >= 0; ) {
        if (fromEnvoy && from == first) {
          startArmedStall();
        }
        waitOutStall();
        out.write(buf, 0, n);
        out.flush();
      }
    } catch (IOException | InterruptedException closed) {
      // either side went away: the pair is done
    } finally {
      closeQuietly(from);
      closeQuietly(to);
    }
  }

  private synchronized void startArmedStall() {
    Duration d = armed;
    if (d != null) {
      armed = null;
      stallEndNanos = System.nanoTime() + d.toNanos();
      stalling = true;
      stalled.countDown();
    }
  }

  private void waitOutStall() throws InterruptedException {
    while (stalling) {
      long left = stallEndNanos - System.nanoTime();
      if (left <= 0) {
        stalling = false;
        return;
      }
      TimeUnit.NANOSECONDS.sleep(left);
    }
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // already closed
    }
  }

  @Override
  public void close() throws IOException {
    server.close();
    sockets.forEach(StallingProxy::closeQuietly);
    threads.shutdownNow();
  }
}
