package dev.kvrouter.examples.sim.http;

import dev.kvrouter.extproc.request.OpenAiError;

/** A request the API layer refuses, with the OpenAI-shaped error to answer. */
final class ApiException extends Exception {

  private final OpenAiError error;

  ApiException(OpenAiError error) {
    super(error.message(), null, false, false);
    this.error = error;
  }

  static ApiException badRequest(String message, String param) {
    return new ApiException(OpenAiError.badRequest(message, param));
  }

  OpenAiError error() {
    return error;
  }
}
