package dev.kvrouter.extproc.template.jinja;

/** Python's {@code range}; the sandbox refuses ranges longer than 100000 items. */
record PyRange(long start, long stop, long step) {
  static final long MAX_RANGE = 100_000;

  long length() {
    if (step > 0) {
      return start < stop ? (stop - start - 1) / step + 1 : 0;
    }
    return start > stop ? (start - stop - 1) / (-step) + 1 : 0;
  }

  long get(long i) {
    return start + i * step;
  }
}
