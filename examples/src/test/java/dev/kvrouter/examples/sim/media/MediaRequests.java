package dev.kvrouter.examples.sim.media;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** Chat request bodies with media parts, shared by the media and fleet tests. */
public final class MediaRequests {

  static final ObjectMapper JSON = new ObjectMapper();
  static final String TEXT = "Please describe the chart below in detail: the axes, the trend of each series, and any "
      + "annotation written on it, then say what the data suggests about the cache hit rate of each worker.";

  private MediaRequests() {}

  /** One user message: {@link #TEXT}, then an image part ({@code uuid} omitted when null). */
  public static ObjectNode image(String model, String url, String uuid) {
    ObjectNode root = JSON.createObjectNode();
    root.put("model", model);
    root.put("max_tokens", 2);
    ArrayNode content = root.putArray("messages").addObject().put("role", "user").putArray("content");
    content.addObject().put("type", "text").put("text", TEXT);
    ObjectNode part = content.addObject().put("type", "image_url");
    part.putObject("image_url").put("url", url);
    if (uuid != null) {
      part.put("uuid", uuid);
    }
    return root;
  }

  /** One user message with {@link #TEXT} and an {@code input_audio} part. */
  public static ObjectNode audio(String model) {
    ObjectNode root = JSON.createObjectNode();
    root.put("model", model);
    ArrayNode content = root.putArray("messages").addObject().put("role", "user").putArray("content");
    content.addObject().put("type", "text").put("text", TEXT);
    content.addObject().put("type", "input_audio").putObject("input_audio").put("data", "AAAA").put("format", "wav");
    return root;
  }

  static byte[] bytes(JsonNode n) {
    try {
      return JSON.writeValueAsBytes(n);
    } catch (java.io.IOException e) {
      throw new AssertionError(e);
    }
  }
}
