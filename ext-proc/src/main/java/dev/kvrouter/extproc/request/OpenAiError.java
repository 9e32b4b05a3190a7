package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/**
 * An error the router answers itself, in the shape OpenAI clients parse:
 * {@code {"error": {"message", "type", "param", "code"}}} with the matching HTTP status.
 */
public record OpenAiError(int status, String type, String code, String message, String param) {

  private static final JsonFactory JSON = new JsonFactory();

  public static OpenAiError badRequest(String message) {
    return new OpenAiError(400, "invalid_request_error", "invalid_request", message, null);
  }

  public static OpenAiError badRequest(String message, String param) {
    return new OpenAiError(400, "invalid_request_error", "invalid_request", message, param);
  }

  public static OpenAiError tooLarge(long limit) {
    return new OpenAiError(413, "invalid_request_error", "request_too_large",
        "request body exceeds the router's limit of " + limit + " bytes", null);
  }

  public static OpenAiError modelNotFound(String model) {
    return new OpenAiError(404, "invalid_request_error", "model_not_found",
        "The model `" + model + "` does not exist or no worker serves it.", "model");
  }

  public static OpenAiError noEligibleWorker(String model, String why) {
    return new OpenAiError(503, "server_error", "no_eligible_worker",
        "No worker can take a request for model `" + model + "` right now: " + why, null);
  }

  public static OpenAiError overloaded(String model) {
    return new OpenAiError(429, "rate_limit_error", "all_workers_busy",
        "Every worker serving `" + model + "` is busy; retry after the indicated delay.", null);
  }

  /**
   * A path the router does not route, refused for a tenant (OpenAI's answer to an unknown URL). The path is the
   * client's own, cut short; it is never prompt text.
   */
  public static OpenAiError unknownUrl(String method, String path) {
    String p = path == null ? "" : path.length() > 200 ? path.substring(0, 200) + "..." : path;
    return new OpenAiError(404, "invalid_request_error", "unknown_url", "Invalid URL (" + method + " " + p
        + "): this endpoint is not available to tenants through the router", null);
  }

  /** The router holds as many request bodies as its memory budget allows ({@code limits.max_buffered_body_bytes}). */
  public static OpenAiError bodiesOverBudget() {
    return new OpenAiError(503, "server_error", "router_overloaded",
        "The router is holding as many request bodies as it may; retry shortly.", null);
  }

  public static OpenAiError internal(String message) {
    return new OpenAiError(500, "server_error", "internal_error", message, null);
  }

  /** The JSON body. Messages are written by the router itself and never echo prompt text. */
  public String toJson() {
    StringWriter out = new StringWriter();
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      g.writeObjectFieldStart("error");
      g.writeStringField("message", message);
      g.writeStringField("type", type);
      if (param != null) {
        g.writeStringField("param", param);
      } else {
        g.writeNullField("param");
      }
      g.writeStringField("code", code);
      g.writeEndObject();
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }
}
