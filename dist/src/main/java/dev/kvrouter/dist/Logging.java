package dev.kvrouter.dist;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import net.logstash.logback.encoder.LogstashEncoder;
import org.slf4j.LoggerFactory;

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
  }
}
