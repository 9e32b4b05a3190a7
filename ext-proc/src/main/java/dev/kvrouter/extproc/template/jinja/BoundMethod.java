package dev.kvrouter.extproc.template.jinja;

import java.util.List;
import java.util.Map;

/** A method bound to its object, e.g. {@code message.get} or {@code content.strip}. */
record BoundMethod(Object self, String name, Impl impl) implements PyCallable {
  interface Impl {
    Object invoke(Object self, String name, List<Object> args, Map<String, Object> kwargs);
  }

  @Override
  public Object call(Frame caller, List<Object> args, Map<String, Object> kwargs) {
    return impl.invoke(self, name, args, kwargs);
  }
}
