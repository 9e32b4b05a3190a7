package dev.kvrouter.extproc.template;

import dev.kvrouter.extproc.template.jinja.PyOps;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Renders a conversation the way transformers 5.24's
 * {@code tokenizer.apply_chat_template(..., tokenize=False)} does: normalize the messages (drop
 * keys whose value is None), alias reasoning fields ({@code reasoning_content}, {@code thinking},
 * {@code reasoning}), pass the tokenizer's special tokens under the caller's kwargs, and
 * implement {@code continue_final_message} by tagging the final message, rendering, and cutting
 * the prompt right after it, with the same checks and failures.
 *
 * <p>Immutable and thread-safe; build one per model and template.
 */
public final class ChatTemplateRenderer {
  /** transformers' marker appended to the message being continued. */
  static final String CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG ";
  private static final List<String> REASONING_FIELDS = List.of("reasoning_content", "thinking", "reasoning");

  private final ChatTemplate template;
  private final SpecialTokens specialTokens;
  private final TemplateEnvironment env;

  public ChatTemplateRenderer(ChatTemplate template, SpecialTokens specialTokens, TemplateEnvironment env) {
    this.template = Objects.requireNonNull(template, "template");
    this.specialTokens = Objects.requireNonNull(specialTokens, "specialTokens");
    this.env = Objects.requireNonNull(env, "env");
  }

  public ChatTemplate template() {
    return template;
  }

  public SpecialTokens specialTokens() {
    return specialTokens;
  }

  /** The rendered prompt text; throws a {@link TemplateException} subtype when Python would raise. */
  public String render(ChatTemplateInput in) {
    List<? extends Map<String, ?>> messages = Objects.requireNonNull(in.messages(), "messages");
    if (messages.isEmpty()) {
      throw new ChatInputException("Cannot apply chat template to an empty conversation. Provide at least one message.");
    }
    String cfm = in.continueFinalMessage();
    if (cfm != null && in.addGenerationPrompt()) {
      throw new ChatInputException("continue_final_message and add_generation_prompt are not compatible. Use"
          + " continue_final_message when you want the model to continue the final message, and"
          + " add_generation_prompt when you want to add a header that will prompt it to start a new assistant"
          + " message instead.");
    }
    List<Object> chat = normalizeMessages(messages);
    Object tools = checkedTools(in.tools());
    Object documents = checkedDocuments(in.documents());

    Map<String, Object> vars = new HashMap<>();
    vars.putAll(specialTokens.tokens());
    for (Map.Entry<String, ?> e : in.kwargs().entrySet()) {
      String k = e.getKey();
      if (k.equals("messages") || k.equals("tools") || k.equals("documents") || k.equals("add_generation_prompt")) {
        throw new ChatInputException("TypeError", "render() got multiple values for keyword argument '" + k + "'");
      }
      vars.put(k, PyOps.canonicalize(e.getValue()));
    }

    String finalText = null;
    if (cfm != null) {
      finalText = tagFinalMessage(chat, cfm);
    }
    vars.put("messages", chat);
    vars.put("tools", tools);
    vars.put("documents", documents);
    vars.put("add_generation_prompt", in.addGenerationPrompt());
    String rendered = template.renderCanonical(vars, env, sizeHint(chat));
    if (cfm != null) {
      rendered = cutAfterFinalMessage(rendered, finalText);
    }
    return rendered;
  }

  /** Output buffer guess: the message text plus room for the template's own text. */
  private int sizeHint(List<Object> chat) {
    long chars = 2048;
    for (Object m : chat) {
      for (Object v : ((Map<?, ?>) m).values()) {
        if (v instanceof String s) {
          chars += s.length();
        }
      }
    }
    return (int) Math.min(chars + chars / 4, Math.min(env.limits().maxOutputChars(), 1 << 24));
  }

  /** transformers' _normalize_chat_messages + _plain_template_data + _alias_reasoning_fields. */
  @SuppressWarnings("unchecked")
  private static List<Object> normalizeMessages(List<? extends Map<String, ?>> messages) {
    List<Object> chat = new ArrayList<>(messages.size());
    for (Object m : messages) {
      if (!(m instanceof Map<?, ?> raw)) {
        throw new ChatInputException("TypeError", "Chat messages should be dicts, dataclasses or pydantic models.");
      }
      Map<Object, Object> msg = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : raw.entrySet()) {
        if (e.getValue() != null) {
          msg.put(PyOps.canonicalize(e.getKey()), PyOps.canonicalize(e.getValue()));
        }
      }
      Object reasoning = null;
      for (String f : REASONING_FIELDS) {
        if (msg.get(f) != null) {
          reasoning = msg.get(f);
          break;
        }
      }
      if (reasoning != null) {
        Map<Object, Object> aliased = new LinkedHashMap<>();
        aliased.put("thinking", reasoning);
        aliased.putAll(msg);
        aliased.put("reasoning_content", reasoning);
        msg = aliased;
      }
      chat.add(msg);
    }
    return chat;
  }

  private static Object checkedTools(List<? extends Map<String, ?>> tools) {
    if (tools == null) {
      return null;
    }
    List<Object> out = new ArrayList<>(tools.size());
    for (Object t : tools) {
      if (!(t instanceof Map)) {
        throw new ChatInputException("Tools should either be a JSON schema, or a callable function with type hints and"
            + " a docstring suitable for auto-conversion to a schema.");
      }
      out.add(PyOps.canonicalize(t));
    }
    return out;
  }

  private static Object checkedDocuments(List<? extends Map<String, ?>> documents) {
    if (documents == null) {
      return null;
    }
    for (Object d : documents) {
      if (!(d instanceof Map)) {
        throw new ChatInputException("TypeError", "Documents should be a list of dicts with 'title' and 'text' keys!");
      }
    }
    return PyOps.canonicalize(documents);
  }

  /** Appends the continue tag to the field being continued; returns the text to find afterwards. */
  @SuppressWarnings("unchecked")
  private String tagFinalMessage(List<Object> chat, String field) {
    Map<Object, Object> last = (Map<Object, Object>) chat.get(chat.size() - 1);
    Object finalMessage = last.get(field);
    if (finalMessage == null) {
      throw new ChatInputException("continue_final_message is set but the final message has no \"" + field
          + "\" to continue!");
    }
    List<String> fields = new ArrayList<>();
    if (REASONING_FIELDS.contains(field)) {
      for (String f : REASONING_FIELDS) {
        if (last.containsKey(f) && PyOps.eq(last.get(f), finalMessage)) {
          fields.add(f);
        }
      }
    } else {
      fields.add(field);
    }
    if (fields.stream().noneMatch(f -> template.source().contains(f))) {
      throw new ChatInputException("continue_final_message is set to \"" + field
          + "\" but this is not an accepted field in the chat_template");
    }
    if (finalMessage instanceof List<?> blocks) {
      for (int i = blocks.size() - 1; i >= 0; i--) {
        Object block = blocks.get(i);
        if (block instanceof Map<?, ?> b && b.containsKey("text")) {
          Map<Object, Object> mb = (Map<Object, Object>) b;
          Object text = mb.get("text");
          if (!(text instanceof String s)) {
            throw new ChatInputException("TypeError", "the text block being continued is not a string");
          }
          mb.put("text", s + CONTINUE_TAG);
          return s;
        }
        if (block instanceof String s && s.contains("text")) {
          throw new ChatInputException("TypeError", "string indices must be integers");
        }
      }
      throw new ChatInputException("continue_final_message is set but we could not find any text to continue in the"
          + " final message!");
    }
    for (String f : fields) {
      Object v = last.get(f);
      if (!(v instanceof String s)) {
        throw new ChatInputException("TypeError", "the \"" + f + "\" field being continued is not a string");
      }
      last.put(f, s + CONTINUE_TAG);
    }
    return (String) finalMessage;
  }

  private static String cutAfterFinalMessage(String rendered, String finalText) {
    String tagWord = CONTINUE_TAG.strip();
    if (!rendered.contains(PyOps.strip(finalText)) || !rendered.contains(tagWord)) {
      throw new ChatInputException("continue_final_message is set but the final message does not appear in the chat"
          + " after applying the chat template! This can happen if the chat template deletes portions of the final"
          + " message.");
    }
    int tagLoc = rendered.lastIndexOf(tagWord);
    if (rendered.startsWith(CONTINUE_TAG, tagLoc)) {
      return rendered.substring(0, tagLoc);
    }
    return PyOps.rstrip(rendered.substring(0, tagLoc));
  }
}
