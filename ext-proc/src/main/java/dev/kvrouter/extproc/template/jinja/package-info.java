/**
 * kvrouter's Jinja interpreter: jinja2 3.1.6 semantics as transformers configures them (sandboxed,
 * trim_blocks, lstrip_blocks, loopcontrols), with Python value semantics for the data templates
 * touch. A template is lexed and parsed once into nodes that evaluate themselves; {@code Template}
 * is the entry point, {@code TemplateAnalysis} answers vLLM's static questions about a template.
 */
package dev.kvrouter.extproc.template.jinja;
