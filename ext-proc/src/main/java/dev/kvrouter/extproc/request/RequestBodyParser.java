package dev.kvrouter.extproc.request;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;

/**
 * Reads the routing-relevant top-level fields of an OpenAI request with Jackson's streaming parser, skipping
 * everything else without building a tree, so a 1 MB prompt costs one pass over its bytes.
 */
public final class RequestBodyParser {

  private static final JsonFactory JSON = JsonFactory.builder()
      .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(64).build())
      .build();

  /** Thrown for a body that is not a valid request; carries the 400 error to send back. */
  public static final class BadRequest extends Exception {
    private final OpenAiError error;

    public BadRequest(OpenAiError error) {
      super(error.message(), null, false, false);
      this.error = error;
    }

    public OpenAiError error() {
      return error;
    }
  }

  public InferenceRequest parse(InferenceRequest.Kind kind, byte[] body, int length) throws BadRequest {
    String model = null;
    boolean stream = false;
    String cacheSalt = null;
    int maxTokens = -1;
    boolean hasPrompt = false;
    try (JsonParser p = JSON.createParser(body, 0, length)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new BadRequest(OpenAiError.badRequest("request body must be a JSON object"));
      }
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        JsonToken v = p.nextToken();
        switch (field) {
          case "model" -> model = v == JsonToken.VALUE_STRING ? p.getText() : null;
          case "stream" -> stream = v == JsonToken.VALUE_TRUE;
          case "cache_salt" -> cacheSalt = v == JsonToken.VALUE_STRING ? p.getText() : null;
          case "max_tokens", "max_completion_tokens" -> {
            if (v == JsonToken.VALUE_NUMBER_INT) {
              maxTokens = p.getIntValue();
            }
          }
          case "prompt" -> {
            hasPrompt = kind == InferenceRequest.Kind.COMPLETIONS;
            p.skipChildren();
          }
          case "messages" -> {
            hasPrompt = kind == InferenceRequest.Kind.CHAT && v == JsonToken.START_ARRAY;
            p.skipChildren();
          }
          default -> p.skipChildren();
        }
      }
      if (t != JsonToken.END_OBJECT || p.nextToken() != null) {
        throw new BadRequest(OpenAiError.badRequest("request body is not a single JSON object"));
      }
    } catch (JsonParseException e) {
      // Jackson's own message can quote the offending input; report only where it broke.
      throw new BadRequest(OpenAiError.badRequest("request body is not valid JSON (line "
          + e.getLocation().getLineNr() + ", column " + e.getLocation().getColumnNr() + ")"));
    } catch (IOException e) {
      throw new BadRequest(OpenAiError.badRequest("request body could not be read: " + e.getClass().getSimpleName()));
    }
    if (model == null || model.isEmpty()) {
      throw new BadRequest(OpenAiError.badRequest("you must provide a `model` string", "model"));
    }
    if (!hasPrompt) {
      throw new BadRequest(kind == InferenceRequest.Kind.CHAT
          ? OpenAiError.badRequest("`messages` must be a list", "messages")
          : OpenAiError.badRequest("you must provide a `prompt`", "prompt"));
    }
    return new InferenceRequest(kind, model, stream, cacheSalt, maxTokens);
  }
}
