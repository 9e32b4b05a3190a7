package dev.kvrouter.dist;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import java.util.logging.Handler;
import java.util.logging.LogManager;
import java.util.logging.LogRecord;
import java.util.logging.SimpleFormatter;
import net.logstash.logback.encoder.LogstashEncoder;
import org.slf4j.Logger;
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
    bridgeJul(root.getLevel());
  }

  /**
   * gRPC (and Caffeine, through System.Logger) log with java.util.logging, whose default handler writes two-line
   * plain text to stderr: a failed transport, an exception a stream observer threw, past this log's format. Its
   * records go to slf4j instead; the root's level is the log's, so records nobody would see are not even made.
   */
  private static void bridgeJul(Level level) {
    java.util.logging.Logger julRoot = LogManager.getLogManager().getLogger("");
    for (Handler h : julRoot.getHandlers()) {
      julRoot.removeHandler(h);
    }
    julRoot.addHandler(new JulToSlf4j());
    julRoot.setLevel(level.isGreaterOrEqual(Level.ERROR) ? java.util.logging.Level.SEVERE
        : level.isGreaterOrEqual(Level.WARN) ? java.util.logging.Level.WARNING
        : level.isGreaterOrEqual(Level.INFO) ? java.util.logging.Level.INFO
        : level.isGreaterOrEqual(Level.DEBUG) ? java.util.logging.Level.FINE : java.util.logging.Level.FINEST);
  }

  /** Hands each java.util.logging record to the slf4j logger of the same name, at the matching level. */
  private static final class JulToSlf4j extends Handler {
    private final SimpleFormatter messages = new SimpleFormatter();

    @Override
    public void publish(LogRecord r) {
      Logger log = LoggerFactory.getLogger(r.getLoggerName() == null ? "jul" : r.getLoggerName());
      int v = r.getLevel().intValue();
      if (v >= java.util.logging.Level.SEVERE.intValue()) {
        if (log.isErrorEnabled()) {
          log.error(messages.formatMessage(r), r.getThrown());
        }
      } else if (v >= java.util.logging.Level.WARNING.intValue()) {
        if (log.isWarnEnabled()) {
          log.warn(messages.formatMessage(r), r.getThrown());
        }
      } else if (v >= java.util.logging.Level.CONFIG.intValue()) {
        if (log.isInfoEnabled()) {
          log.info(messages.formatMessage(r), r.getThrown());
        }
      } else if (v >= java.util.logging.Level.FINE.intValue()) {
        if (log.isDebugEnabled()) {
          log.debug(messages.formatMessage(r), r.getThrown());
        }
      } else if (log.isTraceEnabled()) {
        log.trace(messages.formatMessage(r), r.getThrown());
      }
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}
  }
}
