package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/**
 * The body an error the router answers itself is written in: the shape the client of that API parses. Claude Code
 * and the Anthropic SDKs read {@code {"type": "error", "error": {"type", "message"}}} on the Messages API, OpenAI's
 * clients {@code {"error": {"message", "type", "param", "code"}}} everywhere else; the status is the same in both.
 */
public enum ErrorShape {

  /** OpenAI's error object ({@link OpenAiError#toJson()}). */
  OPENAI {
    @Override
    public String body(OpenAiError error) {
      return error.toJson();
    }
  },

  /**
   * vLLM's {@code AnthropicErrorResponse}, which its Messages and count_tokens handlers answer with. The inner
   * {@code type} is the one vLLM puts there ({@link #anthropicType}), so a refusal reads the same whether the router
   * or the worker made it.
   */
  ANTHROPIC {
    @Override
    public String body(OpenAiError error) {
      StringWriter out = new StringWriter();
      try (JsonGenerator g = JSON.createGenerator(out)) {
        g.writeStartObject();
        g.writeStringField("type", "error");
        g.writeObjectFieldStart("error");
        g.writeStringField("type", anthropicType(error.status()));
        g.writeStringField("message", error.message());
        g.writeEndObject();
        g.writeEndObject();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return out.toString();
    }
  };

  private static final JsonFactory JSON = new JsonFactory();

  /** The JSON body for {@code error}. Messages are the router's own and never echo prompt text. */
  public abstract String body(OpenAiError error);

  /**
   * The shape for a request to {@code path} as the engine reads it ({@code RequestStream.normalizedPath}): Anthropic's
   * on vLLM's two Anthropic routes, {@code /v1/messages} and {@code /v1/messages/count_tokens}, OpenAI's elsewhere.
   */
  public static ErrorShape forPath(String normalizedPath) {
    return "/v1/messages".equals(normalizedPath) || "/v1/messages/count_tokens".equals(normalizedPath)
        ? ANTHROPIC : OPENAI;
  }

  /**
   * The error type vLLM's Anthropic handlers write for a status: {@code translate_error_response} copies the type of
   * the {@code ErrorResponse} that {@code create_error_response} made ({@code BadRequestError}, {@code NotFoundError},
   * the reason phrase for any other status a {@code GracefulHTTPError} carries), and a failure inside the handler is
   * {@code internal_error}.
   */
  static String anthropicType(int status) {
    return switch (status) {
      case 400 -> "BadRequestError";
      case 404 -> "NotFoundError";
      case 413 -> "Request Entity Too Large";
      case 429 -> "Too Many Requests";
      case 500 -> "internal_error";
      case 503 -> "Service Unavailable";
      default -> status >= 500 ? "internal_error" : "BadRequestError";
    };
  }
}
