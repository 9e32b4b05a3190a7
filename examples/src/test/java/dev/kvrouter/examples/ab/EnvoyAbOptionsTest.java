package dev.kvrouter.examples.ab;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvrouter.examples.sim.http.FaultControl;
import dev.kvrouter.examples.sim.http.ScriptedOutput;
import dev.kvrouter.examples.workload.TokenSpace;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class EnvoyAbOptionsTest {

  @Test
  void imageWorkloadsNeedAMultimodalModel() {
    assertThatThrownBy(() -> EnvoyAb.media(null, List.of("system-prompt:count=4", "image-qa:count=4,uuid=yes|no")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("uuid=yes")
        .hasMessageContaining("sends images").hasMessageContaining("--multimodal gemma3");
    assertThat(EnvoyAb.media(null, List.of("system-prompt:count=4"))).isNull();
    assertThat(EnvoyAb.media("gemma3", List.of("image-qa:count=4")).preset()).isEqualTo("gemma3");
    assertThatThrownBy(() -> EnvoyAb.media("qwen-vl", List.of("image-qa:count=4")))
        .hasMessageContaining("unknown multimodal preset");
  }

  @Test
  void theCommandRefusesThemBeforeStartingAnything(@TempDir Path dir) throws Exception {
    Path out = dir.resolve("out");
    StringWriter err = new StringWriter();
    CommandLine cl = new CommandLine(new EnvoyAb()).setErr(new PrintWriter(err));
    int code = cl.execute("--workload", "image-qa:count=4", "--out", out.toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("sends images: run it with --multimodal gemma3");
    assertThat(Files.exists(out)).as("nothing written").isFalse();
  }

  @Test
  void eventFaultsReachTheWorkersOnlyWhenAskedFor() {
    assertThat(EnvoyAb.eventFaults(0, 0, 0)).as("no fault: the fleet starts without one").isNull();
    assertThat(EnvoyAb.eventFaults(0.1, 0, 0)).isEqualTo(new FaultControl.Update(0.1, 0L, 0.0, null, null, null));
    assertThat(EnvoyAb.eventFaults(0, 1000, 0.2)).isEqualTo(new FaultControl.Update(0.0, 1000L, 0.2, null, null, null));
    assertThatThrownBy(() -> EnvoyAb.eventFaults(1.5, 0, 0)).hasMessage("--event-drop must be in [0, 1], was 1.5");
    assertThatThrownBy(() -> EnvoyAb.eventFaults(0, 0, -0.1)).hasMessageContaining("--event-reorder must be in [0, 1]");
    assertThatThrownBy(() -> EnvoyAb.eventFaults(Double.NaN, 0, 0)).hasMessageContaining("--event-drop");
    assertThatThrownBy(() -> EnvoyAb.eventFaults(0, -1, 0)).hasMessageContaining("--event-delay-ms must be in");
  }

  @Test
  void aCrashNamesAWorkerOfTheFleetAndFiniteTimes() {
    EnvoyAb.checkCrash(-1, 8, 20, 10); // off
    EnvoyAb.checkCrash(7, 8, 0, 0);
    assertThatThrownBy(() -> EnvoyAb.checkCrash(8, 8, 20, 10)).hasMessageContaining("a worker index in [0, 8)");
    assertThatThrownBy(() -> EnvoyAb.checkCrash(0, 8, -1, 10)).hasMessageContaining("--crash-at-s");
    assertThatThrownBy(() -> EnvoyAb.checkCrash(0, 8, 1, Double.POSITIVE_INFINITY)).hasMessageContaining("finite");
  }

  @Test
  void anEventFaultOutOfRangeIsRefusedBeforeAnythingStarts(@TempDir Path dir) {
    Path out = dir.resolve("out");
    StringWriter err = new StringWriter();
    CommandLine cl = new CommandLine(new EnvoyAb()).setErr(new PrintWriter(err));
    int code = cl.execute("--workload", "rag:count=4", "--event-drop", "2", "--no-replay", "--out", out.toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("--event-drop must be in [0, 1], was 2.0");
    assertThat(Files.exists(out)).as("nothing written").isFalse();
  }

  @Test
  void chatAndTokenAnswersAreScriptedOverTheirTokenSpace() {
    assertThat(EnvoyAb.scriptedOutput(List.of("system-prompt:count=4", "multi-turn:format=chat,answers=fresh")))
        .as("nothing scripts its answers").isNull();
    assertThat(EnvoyAb.scriptedOutput(List.of("multi-turn:format=chat,answers=model,vocab=2000..9000")))
        .isEqualTo(new ScriptedOutput(new TokenSpace(2000, 9000)));
    assertThat(EnvoyAb.scriptedOutput(List.of("multi-turn:format=chat,answers=model", "multi-turn:format=tokens")))
        .isEqualTo(new ScriptedOutput(TokenSpace.DEFAULT));
    assertThatThrownBy(() -> EnvoyAb.scriptedOutput(List.of("multi-turn:format=chat,answers=model,vocab=2000..9000",
        "multi-turn:format=tokens"))).hasMessageContaining("must share one token space");
  }
}
