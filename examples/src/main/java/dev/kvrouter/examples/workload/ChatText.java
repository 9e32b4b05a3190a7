package dev.kvrouter.examples.workload;

import java.util.List;

/**
 * Renders segments as chat text: one common English word per token id, joined by spaces. Each of these words
 * is a single token (with its leading space) in the Llama 3 and Qwen 3 vocabularies, so a segment of n ids
 * becomes roughly n real tokens after tokenization, and equal segments give equal text, which keeps the
 * workload's sharing structure through the real chat template and tokenizer.
 */
public final class ChatText {

  private static final String[] WORDS = {
      "time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child", "world", "school",
      "state", "family", "student", "group", "country", "problem", "hand", "part", "place", "case", "week",
      "company", "system", "program", "question", "work", "government", "number", "night", "point", "home",
      "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right", "study", "book",
      "eye", "job", "word", "business", "issue", "side", "kind", "head", "house", "service", "friend",
      "father", "power", "hour", "game", "line", "end", "member", "law", "car", "city", "community", "name",
      "president", "team", "minute", "idea", "kid", "body", "information", "back", "parent", "face",
      "others", "level", "office", "door", "health", "person", "art", "war", "history", "party", "result",
      "change", "morning", "reason", "research", "girl", "guy", "moment", "air", "teacher", "force",
      "education", "foot", "boy", "age", "policy", "process", "music", "market", "sense", "nation", "plan",
      "college", "interest", "death", "experience", "effect", "class", "control", "care", "field",
      "development", "role", "effort", "rate", "heart", "drug", "show", "leader", "light", "voice", "wife",
      "police", "mind", "price", "report", "decision", "son", "view", "relationship", "town", "road", "arm",
      "difference", "value", "building", "action", "model", "season", "society", "tax", "director",
      "position", "player", "record", "paper", "space", "ground", "form", "event", "official", "matter",
      "center", "couple", "site", "project", "activity", "star", "table", "need", "court", "oil",
      "situation", "cost", "industry", "figure", "street", "image", "phone", "data", "picture", "practice",
      "piece", "land", "product", "doctor", "wall", "patient", "worker", "news", "test", "movie", "north",
      "love", "support", "technology", "step", "baby", "computer", "type", "attention", "film", "tree",
      "source", "organization", "hair", "window", "evidence", "population", "truth", "song", "energy",
      "army", "top", "garden", "river", "bank", "station", "glass", "chair", "bread", "stone", "ocean",
      "summer", "winter", "spring", "autumn", "yellow", "green", "blue", "orange", "silver", "golden",
      "quick", "slow", "happy", "simple", "strong", "early", "late", "small", "large", "young", "old"
  };

  private ChatText() {}

  static int vocabularySize() {
    return WORDS.length;
  }

  static String word(int tokenId) {
    return WORDS[Math.floorMod(tokenId, WORDS.length)];
  }

  /**
   * The whole words of {@code segment}'s text ({@link #render}) that {@code received} holds, a client having received
   * it in place of that text: the words it repeats up to its end, a last word cut short not counted (as a client
   * resending what it received of a scripted answer keeps whole words, {@link ChatAnswers#wordsReceived}); -1 when
   * it is not a prefix of the text (the model said something else).
   */
  public static int wordsHeld(String received, Segment segment, TokenSpace space) {
    String text = render(List.of(segment), space);
    if (!text.startsWith(received)) {
      return -1;
    }
    int words = 0;
    for (int i = 1; i < received.length(); i++) {
      if (received.charAt(i) == ' ') {
        words++;
      }
    }
    boolean lastWhole = !received.isEmpty()
        && (received.length() == text.length() || text.charAt(received.length()) == ' ');
    return words + (lastWhole ? 1 : 0);
  }

  /** The text of the segments, in order, separated by single spaces. */
  public static String render(List<Segment> segments, TokenSpace space) {
    StringBuilder b = new StringBuilder();
    for (Segment s : segments) {
      for (int i = 0; i < s.length(); i++) {
        if (b.length() > 0) {
          b.append(' ');
        }
        b.append(word(space.token(s.seed(), i)));
      }
    }
    return b.toString();
  }
}
