package dev.kvrouter.dist;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import net.logstash.logback.encoder.LogstashEncoder;
import org.slf4j.LoggerFactory;
import org.slf4j.bridge.SLF4JBridgeHandler;

/** Applies {@code observability.log_format} and {@code log_level}: JSON lines by default, text for humans. */
final class Logging {

  private Logging() {}

  static void configure(String format, String level) {
    if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext ctx)) {
      return; // another slf4j binding is in charge (tests, embedding); leave it alone
    }
    ctx.reset();
    Encoder<ILoggingEvent> encoder;
    if ("text".equals(format)) {
      PatternLayoutEncoder p = new PatternLayoutEncoder();
      p.setPattern("%d{HH:mm:ss.SSS} %-5level %logger{20} - %msg%n");
      encoder = p;
    } else {
      LogstashEncoder j = new LogstashEncoder();
      j.setIncludeContext(false);
      encoder = j;
    }
    encoder.setContext(ctx);
    encoder.start();
    ConsoleAppender<ILoggingEvent> console = new ConsoleAppender<>();
    console.setContext(ctx);
    console.setName("console");
    console.setEncoder(encoder);
    console.start();
    ch.qos.logback.classic.Logger root = ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    root.setLevel(Level.toLevel(level, Level.INFO));
    root.addAppender(console);
    // gRPC's Netty transport is chatty at debug; it never says anything the router's own logs do not.
    ctx.getLogger("io.grpc.netty").setLevel(Level.INFO);
    // Decision records are already one JSON object each: written as they are, one per line, whatever the format
    // and level of the diagnostic log (routing.decision_log.enabled switches them).
    PatternLayoutEncoder raw = new PatternLayoutEncoder();
    raw.setPattern("%msg%n");
    raw.setContext(ctx);
    raw.start();
    ConsoleAppender<ILoggingEvent> records = new ConsoleAppender<>();
    records.setContext(ctx);
    records.setName("decisions");
    records.setEncoder(raw);
    records.start();
    ch.qos.logback.classic.Logger decisions = ctx.getLogger("kvrouter.decisions");
    decisions.setAdditive(false);
    decisions.setLevel(Level.INFO);
    decisions.addAppender(records);
    bridgeJul(root.getLevel());
  }

  /**
   * gRPC (and Caffeine, through System.Logger) log with java.util.logging, whose default handler writes two-line
   * plain text to stderr: a failed transport, an exception a stream observer threw, past this log's format. slf4j's
   * bridge hands its records to slf4j instead; the root's level is the log's, so records nobody would see are not
   * even made (the bridge's cost is in building them).
   */
  private static void bridgeJul(Level level) {
    SLF4JBridgeHandler.removeHandlersForRootLogger();
    SLF4JBridgeHandler.install();
    java.util.logging.Level jul = level.isGreaterOrEqual(Level.ERROR) ? java.util.logging.Level.SEVERE
        : level.isGreaterOrEqual(Level.WARN) ? java.util.logging.Level.WARNING
        : level.isGreaterOrEqual(Level.INFO) ? java.util.logging.Level.INFO
        : level.isGreaterOrEqual(Level.DEBUG) ? java.util.logging.Level.FINE : java.util.logging.Level.FINEST;
    java.util.logging.Logger.getLogger("").setLevel(jul);
  }
}
