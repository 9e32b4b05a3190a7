package dev.kvrouter.extproc.request;

import java.util.concurrent.Callable;

/** The 400 a parse refuses a body with, for tests that name the field it blames. */
final class Refusals {

  private Refusals() {}

  static OpenAiError of(Callable<?> parse, String what) {
    try {
      parse.call();
    } catch (RequestBodyParser.BadRequest e) {
      return e.error();
    } catch (Exception e) {
      throw new AssertionError(e);
    }
    throw new AssertionError("accepted: " + what);
  }
}
