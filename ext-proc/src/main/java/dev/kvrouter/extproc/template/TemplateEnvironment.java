package dev.kvrouter.extproc.template;

import dev.kvrouter.extproc.template.jinja.Template;
import java.time.Clock;
import java.util.Map;
import java.util.Objects;

/**
 * What a render needs besides the template and its variables: the clock behind
 * {@code strftime_now} (a local date-time in the clock's zone, as Python's naive
 * {@code datetime.now()}) and the {@link RenderLimits}. Immutable; build once and share.
 */
public final class TemplateEnvironment {
  private final Clock clock;
  private final RenderLimits limits;
  private final Map<String, Object> globals;

  public TemplateEnvironment(Clock clock, RenderLimits limits) {
    this.clock = Objects.requireNonNull(clock, "clock");
    this.limits = Objects.requireNonNull(limits, "limits");
    this.globals = Template.globals(clock);
  }

  /** System clock in the system time zone, default limits. */
  public static TemplateEnvironment systemDefault() {
    return new TemplateEnvironment(Clock.systemDefaultZone(), RenderLimits.DEFAULT);
  }

  public Clock clock() {
    return clock;
  }

  public RenderLimits limits() {
    return limits;
  }

  Map<String, Object> globals() {
    return globals;
  }
}
