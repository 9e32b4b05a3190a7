/**
 * Chat templates: the prompt text vLLM renders for a chat request, reproduced exactly.
 *
 * <p>{@link dev.kvrouter.extproc.template.VllmChatRenderer} runs vLLM's message preprocessing,
 * {@link dev.kvrouter.extproc.template.ChatTemplateRenderer} transformers' apply_chat_template, and
 * {@link dev.kvrouter.extproc.template.ChatTemplate} the template itself on kvrouter's Jinja
 * interpreter ({@code jinja} subpackage). Compiled templates and renderers are immutable and
 * shared by all request threads; each render owns its frames and buffers. Failures are
 * {@link dev.kvrouter.extproc.template.TemplateException}s whose messages never contain request
 * text. Design notes: docs/templates.md.
 */
package dev.kvrouter.extproc.template;
