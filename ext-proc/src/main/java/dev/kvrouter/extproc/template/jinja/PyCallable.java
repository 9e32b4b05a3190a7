package dev.kvrouter.extproc.template.jinja;

import java.util.List;
import java.util.Map;

/** Anything a template can call: macros, bound methods, global functions. */
interface PyCallable {
  Object call(Frame caller, List<Object> args, Map<String, Object> kwargs);
}
