package dev.kvrouter.examples.workload;

import java.util.Objects;

/**
 * An image a chat message sends as an {@code image_url} content part: a URL distinct per image (nothing ever fetches
 * it) and, when the client names the image, its {@code uuid}.
 *
 * <p>{@link #engineIdentity()} is how an engine keys the image's blocks: vLLM uses the client's uuid in place of its
 * content hash, otherwise its own hash of the decoded pixels. Every image of a workload has one URL and one content,
 * so the URL stands in for the pixels: the same image sent twice without a uuid has the same engine identity (the
 * engine's cache does repeat it), but one sent once with and once without a uuid has two.
 *
 * @param url the part's {@code image_url.url}
 * @param uuid the part's {@code uuid}, or {@code null} when the client sends none
 */
public record ImagePart(String url, String uuid) {

  /**
   * Tokens an image takes in the {@link Workload#promptTokens} stand-in: Gemma 3's expansion, {@code \n\n
   * <start_of_image>}, 256 soft tokens, {@code <end_of_image>\n\n}, about 260 after its newline merges. Runs through
   * the request path use the model's own expansion instead.
   */
  public static final int STAND_IN_TOKENS = 260;

  public ImagePart {
    Objects.requireNonNull(url, "url");
    if (uuid != null && uuid.isEmpty()) {
      throw new IllegalArgumentException("an empty uuid is no uuid: use null");
    }
  }

  /** The engine's identifier of this image: its uuid, else a content hash (here: of its one URL). */
  public String engineIdentity() {
    return uuid != null ? uuid : "content:" + url;
  }
}
