package dev.kvrouter.examples.sim.http;

import com.fasterxml.jackson.databind.JsonNode;

/** The encoder of a worker started without a tokenizer: prompts must be token ids; output text is synthetic. */
final class TokenIdsOnly implements PromptEncoder {

  static final TokenIdsOnly INSTANCE = new TokenIdsOnly();
  /** Output tokens are ids 1000..1999: ordinary tokens in every real vocabulary this project uses. */
  private static final int FIRST = 1000;
  private static final int COUNT = 1000;

  private TokenIdsOnly() {}

  @Override
  public int[] encodeCompletion(String prompt) {
    throw new Unsupported("this worker has no tokenizer: send `prompt` as token ids (a list of integers)");
  }

  @Override
  public int[] encodeChat(JsonNode request) {
    throw new Unsupported("this worker has no tokenizer or chat template: use /v1/completions with token ids");
  }

  @Override
  public String tokenText(int tokenId) {
    return " t" + tokenId;
  }

  @Override
  public int[] outputVocabulary() {
    int[] v = new int[COUNT];
    for (int i = 0; i < COUNT; i++) {
      v[i] = FIRST + i;
    }
    return v;
  }
}
